/// \file
/// How each kind of field value is saved, loaded, compared, hashed, copied and
/// printed. Included by object.h; node authors only need FieldList::def.
///
/// Supported field types: bool, integers, double, std::string, enums with an
/// EnumNames specialisation, value types with to_json/from_json/hash/str and
/// ==, Ref<T> and its subclasses (nodes), std::vector and std::optional of
/// any of these, and nlohmann::json (opaque data such as instrument
/// parameters).
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensortune/support/hash.h"
#include "tensortune/support/strings.h"

namespace tensortune {

/// Serialises node references while saving.
class SaveContext {
 public:
  virtual ~SaveContext() = default;
  /// The index the node is saved under (null gives -1).
  virtual int64_t ref(const ObjectPtr& node) = 0;
};

/// Resolves node references while loading.
class LoadContext {
 public:
  virtual ~LoadContext() = default;
  /// The already-loaded node at `index`; throws if it does not exist yet.
  virtual ObjectPtr node(int64_t index) = 0;
};

/// An integer as JSON text holds it: non-negative ones as unsigned, negative
/// ones as signed (as nlohmann::json stores them).
struct JsonInt {
  bool is_unsigned = true;
  uint64_t u = 0;  ///< the value, when is_unsigned
  int64_t s = 0;   ///< the value, when not
};

/// Reads field values straight from JSON text: the fast path of load_string,
/// which builds no JSON DOM. A read returns false when the text does not hold
/// what the field needs; load_string then loads the whole text through the
/// checked DOM path (parse_json_text + load_json) instead, which reports the
/// error with its byte offset, node, type and field. A read therefore needs no
/// error message of its own, only exactness when it succeeds: it must give the
/// value that FieldTraits::load would give for the same text.
class JsonReader {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject, kInvalid };
  virtual ~JsonReader() = default;
  /// The kind of the next value, without consuming it.
  virtual Kind peek() = 0;
  virtual bool read_null() = 0;
  virtual bool read_bool(bool& v) = 0;
  /// An integer: a number without fraction or exponent that fits 64 bits.
  virtual bool read_int(JsonInt& v) = 0;
  /// Any number, converted as nlohmann::json's get<double>() would.
  virtual bool read_number(double& v) = 0;
  /// A string, unescaped; the view is valid until the next read.
  virtual bool read_string(std::string_view& v) = 0;
  /// Consumes the '[' of an array; then call next_element() before each element.
  virtual bool begin_array() = 0;
  /// True when another element follows; false at the closing ']' (consumed)
  /// or on malformed text, which the loader notices after the field.
  virtual bool next_element() = 0;
  /// Any value, as the DOM node that parsing the whole text would have built.
  virtual bool read_json(nlohmann::json& v) = 0;
  /// Any value, checked but not parsed: its text, a view into the loaded text.
  virtual bool read_text(std::string_view& text) = 0;
};

/// Compares two graphs; keeps the variable bindings and the path to the first difference.
class EqualContext {
 public:
  virtual ~EqualContext() = default;
  virtual bool nodes(const ObjectPtr& a, const ObjectPtr& b) = 0;
  /// Both nodes are defined here (a binding site): map their variables, then compare.
  virtual bool bind(const ObjectPtr& a, const ObjectPtr& b) = 0;
  /// Descends into a sub-path (field name or "[i]") for difference reports.
  virtual void push(std::string step) = 0;
  virtual void pop() = 0;
  /// Records why the current path differs (only the first difference is kept).
  virtual void differ(std::string why) = 0;
};

/// Hashes a graph consistently with EqualContext.
class HashContext {
 public:
  virtual ~HashContext() = default;
  virtual uint64_t node(const ObjectPtr& node) = 0;
  virtual uint64_t bind(const ObjectPtr& node) = 0;
};

/// Deep-copies a graph, preserving sharing.
class CopyContext {
 public:
  virtual ~CopyContext() = default;
  virtual ObjectPtr node(const ObjectPtr& node) = 0;
};

/// Prints a graph readably.
class PrintContext {
 public:
  virtual ~PrintContext() = default;
  virtual void node(const ObjectPtr& node) = 0;
  virtual void text(std::string_view text) = 0;
};

/// Specialise with `static constexpr std::array<std::string_view, N> names`
/// (indexed by the enumerator's value) to use an enum as a field type.
template <class E>
struct EnumNames;

namespace detail {
using json = nlohmann::json;

/// The start of `value`'s JSON text, for error messages: at most `max_chars`
/// bytes (then "..."), never cutting a UTF-8 sequence, so that the message can
/// itself be put into JSON (a worker's error reply, a record).
inline std::string json_excerpt(const json& value, size_t max_chars = 40) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= max_chars) return text;
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

// The text writer of save_string (serialize.cc). Each appends exactly what
// nlohmann::json's dump() writes for the same value, so save_string and
// save_json(...).dump() give the same bytes.

/// `s` as a JSON string: quoted, escaped, UTF-8 passed through. Invalid UTF-8
/// throws the nlohmann::json::type_error that dump() throws for it.
void append_json_string(std::string& out, std::string_view s);
/// A finite double, in dump()'s shortest round-trip form ("1.0", "0.1", "1e+20").
void append_json_double(std::string& out, double v);
/// Any JSON value, compactly.
void append_json_value(std::string& out, const json& v);

template <class I>
void append_json_int(std::string& out, I v) {
  char buf[24];
  auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

/// parse_json_text (serialize.h) of text already checked by a JsonReader.
json parse_json_value(std::string_view text);

[[noreturn]] inline void type_mismatch(std::string_view expected, const json& got) {
  fail(ErrorKind::kTypeMismatch, "expected ", expected, ", got ", std::string(got.type_name()), " ",
       json_excerpt(got));
}

template <class T>
concept RefType = std::is_base_of_v<RefBase, T>;

// A value type's saved form must depend on its value alone (equal values,
// equal to_json; equal JSON, equal from_json): structural equality and hash
// already rely on it, and the text writer and reader memoise on it.
template <class T>
concept ValueType = requires(const T& v, const json& j) {
  { v.to_json() } -> std::convertible_to<json>;
  { T::from_json(j) } -> std::convertible_to<T>;
  { v.hash() } -> std::convertible_to<uint64_t>;
  { v.str() } -> std::convertible_to<std::string>;
  { v == v } -> std::convertible_to<bool>;
};

template <class E>
concept NamedEnum = std::is_enum_v<E> && requires {
  EnumNames<E>::names;
};

using ChildFn = std::function<void(const ObjectPtr&)>;
}  // namespace detail

template <class T, class Enable = void>
struct FieldTraits {
  static_assert(sizeof(T) == 0, "unsupported field type: see field_traits.h");
};

template <>
struct FieldTraits<bool> {
  static std::string type_name() { return "bool"; }
  static detail::json save(bool v, SaveContext&) { return v; }
  static void write(bool v, std::string& out, SaveContext&) { out += v ? "true" : "false"; }
  static bool read(bool& v, JsonReader& r, LoadContext&) { return r.read_bool(v); }
  static void load(bool& v, const detail::json& j, LoadContext&) {
    if (!j.is_boolean()) detail::type_mismatch("bool", j);
    v = j.get<bool>();
  }
  static bool equal(bool a, bool b, EqualContext&, bool) { return a == b; }
  static uint64_t hash(bool v, HashContext&, bool) { return v ? 1 : 2; }
  static void copy(bool& d, bool s, CopyContext&) { d = s; }
  static void print(bool v, PrintContext& p) { p.text(v ? "true" : "false"); }
  static void children(bool, const detail::ChildFn&) {}
};

template <class T>
struct FieldTraits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static std::string type_name() { return "int"; }
  static double number(T v) { return static_cast<double>(v); }
  static detail::json save(T v, SaveContext&) { return v; }
  static void write(T v, std::string& out, SaveContext&) { detail::append_json_int(out, v); }
  static bool read(T& v, JsonReader& r, LoadContext&) {
    JsonInt i;
    if (!r.read_int(i)) return false;
    if (i.is_unsigned) {
      if (i.u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      v = static_cast<T>(i.u);
      return true;
    }
    if (i.s < static_cast<int64_t>(std::numeric_limits<T>::min())) return false;
    v = static_cast<T>(i.s);  // negative, so no larger than any integer type's max
    return true;
  }
  static void load(T& v, const detail::json& j, LoadContext&) {
    if (!j.is_number_integer()) detail::type_mismatch("integer", j);
    if (j.is_number_unsigned()) {
      auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        fail(ErrorKind::kTypeMismatch, "integer ", u, " is out of range");
      v = static_cast<T>(u);
      return;
    }
    auto s = j.get<int64_t>();
    if (s < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (s > 0 && static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
      fail(ErrorKind::kTypeMismatch, "integer ", s, " is out of range");
    v = static_cast<T>(s);
  }
  static bool equal(T a, T b, EqualContext&, bool) { return a == b; }
  static uint64_t hash(T v, HashContext&, bool) { return static_cast<uint64_t>(v); }
  static void copy(T& d, T s, CopyContext&) { d = s; }
  static void print(T v, PrintContext& p) { p.text(std::to_string(v)); }
  static void children(T, const detail::ChildFn&) {}
};

/// Doubles are saved as numbers, and non-finite ones as the strings "inf", "-inf", "nan".
template <>
struct FieldTraits<double> {
  static std::string type_name() { return "float"; }
  static double number(double v) { return v; }
  static detail::json save(double v, SaveContext&) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
  }
  static void write(double v, std::string& out, SaveContext&) {
    if (std::isnan(v)) {
      out += "\"nan\"";
    } else if (std::isinf(v)) {
      out += v > 0 ? "\"inf\"" : "\"-inf\"";
    } else {
      detail::append_json_double(out, v);
    }
  }
  static bool read(double& v, JsonReader& r, LoadContext&) {
    if (r.peek() != JsonReader::Kind::kString) return r.read_number(v);
    std::string_view s;
    if (!r.read_string(s)) return false;
    if (s == "nan") {
      v = std::nan("");
    } else if (s == "inf") {
      v = INFINITY;
    } else if (s == "-inf") {
      v = -INFINITY;
    } else {
      return false;
    }
    return true;
  }
  static void load(double& v, const detail::json& j, LoadContext&) {
    if (j.is_number()) {
      v = j.get<double>();
    } else if (j == "nan") {
      v = std::nan("");
    } else if (j == "inf") {
      v = INFINITY;
    } else if (j == "-inf") {
      v = -INFINITY;
    } else {
      detail::type_mismatch("number", j);
    }
  }
  static bool equal(double a, double b, EqualContext&, bool) {
    return hash_double(a) == hash_double(b);
  }
  static uint64_t hash(double v, HashContext&, bool) { return hash_double(v); }
  static void copy(double& d, double s, CopyContext&) { d = s; }
  static void print(double v, PrintContext& p) { p.text(format_double(v)); }
  static void children(double, const detail::ChildFn&) {}
};

/// Durations are saved as seconds, the unit a user writes them in, and kept
/// to the millisecond.
template <>
struct FieldTraits<std::chrono::milliseconds> {
  using ms = std::chrono::milliseconds;
  static std::string type_name() { return "float"; }
  static double number(ms v) { return static_cast<double>(v.count()) / 1000; }
  static detail::json save(ms v, SaveContext&) { return number(v); }
  static void write(ms v, std::string& out, SaveContext&) {
    detail::append_json_double(out, number(v));
  }
  static bool read(ms& v, JsonReader& r, LoadContext&) {
    double s;
    if (!r.read_number(s) || !from_seconds(s, v)) return false;
    return true;
  }
  static void load(ms& v, const detail::json& j, LoadContext&) {
    if (!j.is_number()) detail::type_mismatch("number of seconds", j);
    if (!from_seconds(j.get<double>(), v)) {
      fail(ErrorKind::kTypeMismatch, "duration of ", j.dump(), " seconds is out of range");
    }
  }
  static bool equal(ms a, ms b, EqualContext&, bool) { return a == b; }
  static uint64_t hash(ms v, HashContext&, bool) { return static_cast<uint64_t>(v.count()); }
  static void copy(ms& d, ms s, CopyContext&) { d = s; }
  static void print(ms v, PrintContext& p) { p.text(format_double(number(v)) + "s"); }
  static void children(ms, const detail::ChildFn&) {}

 private:
  static bool from_seconds(double s, ms& v) {
    // Beyond a century is no timeout anyone means, and keeps the count exact.
    if (!std::isfinite(s) || std::abs(s) > 3.2e9) return false;
    v = ms(std::llround(s * 1000));
    return true;
  }
};

template <>
struct FieldTraits<std::string> {
  static std::string type_name() { return "string"; }
  static detail::json save(const std::string& v, SaveContext&) { return v; }
  static void write(const std::string& v, std::string& out, SaveContext&) {
    detail::append_json_string(out, v);
  }
  static bool read(std::string& v, JsonReader& r, LoadContext&) {
    std::string_view s;
    if (!r.read_string(s)) return false;
    v.assign(s);
    return true;
  }
  static void load(std::string& v, const detail::json& j, LoadContext&) {
    if (!j.is_string()) detail::type_mismatch("string", j);
    v = j.get<std::string>();
  }
  static bool equal(const std::string& a, const std::string& b, EqualContext&, bool) {
    return a == b;
  }
  static uint64_t hash(const std::string& v, HashContext&, bool) { return hash_string(v); }
  static void copy(std::string& d, const std::string& s, CopyContext&) { d = s; }
  static void print(const std::string& v, PrintContext& p) { p.text(detail::json(v).dump()); }
  static void children(const std::string&, const detail::ChildFn&) {}
};

template <>
struct FieldTraits<nlohmann::json> {
  using json = nlohmann::json;
  static std::string type_name() { return "json"; }
  static json save(const json& v, SaveContext&) { return v; }
  static void write(const json& v, std::string& out, SaveContext&) {
    detail::append_json_value(out, v);
  }
  static bool read(json& v, JsonReader& r, LoadContext&) { return r.read_json(v); }
  static void load(json& v, const json& j, LoadContext&) { v = j; }
  static bool equal(const json& a, const json& b, EqualContext&, bool) { return a == b; }
  static uint64_t hash(const json& v, HashContext&, bool) { return hash_string(v.dump()); }
  static void copy(json& d, const json& s, CopyContext&) { d = s; }
  static void print(const json& v, PrintContext& p) { p.text(v.dump()); }
  static void children(const json&, const detail::ChildFn&) {}
};

template <detail::NamedEnum E>
struct FieldTraits<E> {
  static std::string type_name() {
    std::vector<std::string> names(EnumNames<E>::names.begin(), EnumNames<E>::names.end());
    return "one of " + join(names, "|");
  }
  static detail::json save(E v, SaveContext&) { return name(v); }
  static void write(E v, std::string& out, SaveContext&) {
    auto i = static_cast<size_t>(v);
    detail::append_json_string(out, i < EnumNames<E>::names.size() ? EnumNames<E>::names[i] : "?");
  }
  static bool read(E& v, JsonReader& r, LoadContext&) {
    std::string_view s;
    if (!r.read_string(s)) return false;
    const auto& names = EnumNames<E>::names;
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == s) {
        v = static_cast<E>(i);
        return true;
      }
    }
    return false;
  }
  static void load(E& v, const detail::json& j, LoadContext&) {
    if (j.is_string()) {
      const auto& names = EnumNames<E>::names;
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == j.get<std::string>()) {
          v = static_cast<E>(i);
          return;
        }
      }
    }
    detail::type_mismatch(type_name(), j);
  }
  static bool equal(E a, E b, EqualContext&, bool) { return a == b; }
  static uint64_t hash(E v, HashContext&, bool) { return static_cast<uint64_t>(v) + 1; }
  static void copy(E& d, E s, CopyContext&) { d = s; }
  static void print(E v, PrintContext& p) { p.text(name(v)); }
  static void children(E, const detail::ChildFn&) {}
  static std::string name(E v) {
    auto i = static_cast<size_t>(v);
    return i < EnumNames<E>::names.size() ? std::string(EnumNames<E>::names[i]) : "?";
  }
};

template <detail::ValueType T>
struct FieldTraits<T> {
  static std::string type_name() { return T::kTypeName; }
  static detail::json save(const T& v, SaveContext&) { return v.to_json(); }
  // Value types only convert to and from a DOM, which costs allocations, and
  // a graph repeats few values (every expression node has a dtype): so the
  // last value written and the last text read are remembered, per thread.
  static void write(const T& v, std::string& out, SaveContext&) {
    thread_local std::optional<T> last;
    thread_local std::string last_text;
    if (!last || !(*last == v)) {
      last.reset();  // stays empty if to_json or its writing throws
      last_text.clear();
      detail::append_json_value(last_text, v.to_json());
      last = v;
    }
    out += last_text;
  }
  static bool read(T& v, JsonReader& r, LoadContext& c) {
    thread_local std::optional<T> last;
    thread_local std::string last_text;
    std::string_view text;
    if (!r.read_text(text)) return false;
    if (!last || last_text != text) {
      last.reset();
      // The text was checked by read_text; a bad value throws, and the loader
      // then takes the DOM path.
      load(v, detail::parse_json_value(text), c);
      last_text.assign(text);
      last = v;
      return true;
    }
    v = *last;
    return true;
  }
  static void load(T& v, const detail::json& j, LoadContext&) { v = T::from_json(j); }
  static bool equal(const T& a, const T& b, EqualContext&, bool) { return a == b; }
  static uint64_t hash(const T& v, HashContext&, bool) { return v.hash(); }
  static void copy(T& d, const T& s, CopyContext&) { d = s; }
  static void print(const T& v, PrintContext& p) { p.text(v.str()); }
  static void children(const T&, const detail::ChildFn&) {}
};

template <detail::RefType R>
struct FieldTraits<R> {
  using Node = typename R::NodeType;
  static std::string type_name() { return "node"; }
  static detail::json save(const R& v, SaveContext& c) {
    if (!v) return nullptr;
    return c.ref(v.ptr());
  }
  static void write(const R& v, std::string& out, SaveContext& c) {
    if (!v) {
      out += "null";
    } else {
      detail::append_json_int(out, c.ref(v.ptr()));
    }
  }
  static bool read(R& v, JsonReader& r, LoadContext& c) {
    if (r.peek() == JsonReader::Kind::kNull) {
      v = R();
      return r.read_null();
    }
    JsonInt i;
    if (!r.read_int(i)) return false;
    if (i.is_unsigned && i.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    // A bad index throws; the loader then takes the DOM path.
    ObjectPtr node = c.node(i.is_unsigned ? static_cast<int64_t>(i.u) : i.s);
    // dynamic_cast compares type names and dominated loading references: a
    // type seen to be a Node once is one every time (one C++ type per
    // NodeTypeInfo), and then a static cast gives the same pointer.
    if constexpr (requires(const Object* o) { static_cast<const Node*>(o); }) {
      const NodeTypeInfo* type = &node->type_info();
      thread_local std::array<const NodeTypeInfo*, 4> known{};
      for (const NodeTypeInfo* k : known) {
        if (k == type) {
          v = R(std::static_pointer_cast<const Node>(std::move(node)));
          return true;
        }
      }
      auto typed = std::dynamic_pointer_cast<const Node>(std::move(node));
      if (!typed) return false;
      std::rotate(known.rbegin(), known.rbegin() + 1, known.rend());
      known[0] = type;
      v = R(std::move(typed));
      return true;
    } else {
      auto typed = std::dynamic_pointer_cast<const Node>(std::move(node));
      if (!typed) return false;
      v = R(std::move(typed));
      return true;
    }
  }
  static void load(R& v, const detail::json& j, LoadContext& c) {
    if (j.is_null()) {
      v = R();
      return;
    }
    if (!j.is_number_integer()) detail::type_mismatch("node reference (integer index) or null", j);
    ObjectPtr node = c.node(j.get<int64_t>());
    auto typed = std::dynamic_pointer_cast<const Node>(node);
    if (!typed) {
      fail(ErrorKind::kTypeMismatch, "node ", j.get<int64_t>(), " is a ", node->type_key(),
           ", which cannot be used here");
    }
    v = R(std::move(typed));
  }
  static bool equal(const R& a, const R& b, EqualContext& c, bool binds) {
    if (!a || !b) return !a && !b;
    return binds ? c.bind(a.ptr(), b.ptr()) : c.nodes(a.ptr(), b.ptr());
  }
  static uint64_t hash(const R& v, HashContext& c, bool binds) {
    if (!v) return 0x6e756c6cULL;
    return binds ? c.bind(v.ptr()) : c.node(v.ptr());
  }
  static void copy(R& d, const R& s, CopyContext& c) {
    d = s ? R(std::static_pointer_cast<const Node>(c.node(s.ptr()))) : R();
  }
  static void print(const R& v, PrintContext& p) {
    if (!v) {
      p.text("null");
    } else {
      p.node(v.ptr());
    }
  }
  static void children(const R& v, const detail::ChildFn& f) {
    if (v) f(v.ptr());
  }
};

namespace detail {
/// A node held by value, as option sets nest (a tuner's options hold the
/// runner's): saved inline as `{"type": KEY, FIELD: VALUE, ...}`.
template <class T>
concept InlineNode = std::is_base_of_v<Object, T> && !RefType<T>;
json save_inline_node(const Object& node, SaveContext& c);
/// Loads every field of `node` from `j` with the checks a saved node gets:
/// its type key, unknown and missing fields, and the type's validate().
void load_inline_node(Object& node, const json& j, LoadContext& c);
}  // namespace detail

template <detail::InlineNode T>
struct FieldTraits<T> {
  static std::string type_name() { return T::kTypeKey; }
  static detail::json save(const T& v, SaveContext& c) { return detail::save_inline_node(v, c); }
  static void write(const T& v, std::string& out, SaveContext& c) {
    detail::append_json_value(out, save(v, c));
  }
  static bool read(T&, JsonReader&, LoadContext&) { return false; }  // rare: the DOM path
  static void load(T& v, const detail::json& j, LoadContext& c) {
    detail::load_inline_node(v, j, c);
  }
  static bool equal(const T& a, const T& b, EqualContext& c, bool) {
    for (const auto& f : a.type_info().fields) {
      if (f.flags & kIgnoredByEquality) continue;
      c.push(f.name);
      bool same = f.equal(a, b, c);
      c.pop();
      if (!same) return false;
    }
    return true;
  }
  static uint64_t hash(const T& v, HashContext& c, bool) {
    uint64_t h = 0x696e6c696e65ULL;
    for (const auto& f : v.type_info().fields) {
      if (!(f.flags & kIgnoredByEquality)) h = h * 0x100000001b3ULL ^ f.hash(v, c);
    }
    return h;
  }
  static void copy(T& d, const T& s, CopyContext& c) {
    for (const auto& f : s.type_info().fields) f.copy(d, s, c);
  }
  static void print(const T& v, PrintContext& p) {
    p.text(std::string(T::kTypeKey) + "(");
    bool first = true;
    for (const auto& f : v.type_info().fields) {
      p.text(std::string(first ? "" : ", ") + f.name + "=");
      f.print(v, p);
      first = false;
    }
    p.text(")");
  }
  static void children(const T& v, const detail::ChildFn& fn) {
    for (const auto& f : v.type_info().fields) f.children(v, fn);
  }
};

template <class T>
struct FieldTraits<std::vector<T>> {
  using Elem = FieldTraits<T>;
  static std::string type_name() { return "list of " + Elem::type_name(); }
  static detail::json save(const std::vector<T>& v, SaveContext& c) {
    detail::json out = detail::json::array();
    for (const auto& e : v) out.push_back(Elem::save(e, c));
    return out;
  }
  static void write(const std::vector<T>& v, std::string& out, SaveContext& c) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      Elem::write(v[i], out, c);
    }
    out += ']';
  }
  static bool read(std::vector<T>& v, JsonReader& r, LoadContext& c) {
    if (!r.begin_array()) return false;
    v.clear();
    while (r.next_element()) {
      v.emplace_back();
      if (!Elem::read(v.back(), r, c)) return false;
    }
    return true;
  }
  static void load(std::vector<T>& v, const detail::json& j, LoadContext& c) {
    if (!j.is_array()) detail::type_mismatch(type_name(), j);
    v.clear();
    v.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      try {
        v.emplace_back();
        Elem::load(v.back(), j[i], c);
      } catch (const Error& e) {
        fail(e.kind(), "element ", i, ": ", e.what());
      }
    }
  }
  static bool equal(const std::vector<T>& a, const std::vector<T>& b, EqualContext& c, bool binds) {
    if (a.size() != b.size()) {
      c.differ("lengths " + std::to_string(a.size()) + " and " + std::to_string(b.size()));
      return false;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      c.push("[" + std::to_string(i) + "]");
      bool same = Elem::equal(a[i], b[i], c, binds);
      if (!same) c.differ("");
      c.pop();
      if (!same) return false;
    }
    return true;
  }
  static uint64_t hash(const std::vector<T>& v, HashContext& c, bool binds) {
    uint64_t h = hash_combine(0x6c697374ULL, v.size());
    for (const auto& e : v) h = hash_combine(h, Elem::hash(e, c, binds));
    return h;
  }
  static void copy(std::vector<T>& d, const std::vector<T>& s, CopyContext& c) {
    d.resize(s.size());
    for (size_t i = 0; i < s.size(); ++i) Elem::copy(d[i], s[i], c);
  }
  static void print(const std::vector<T>& v, PrintContext& p) {
    p.text("[");
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) p.text(", ");
      Elem::print(v[i], p);
    }
    p.text("]");
  }
  static void children(const std::vector<T>& v, const detail::ChildFn& f) {
    for (const auto& e : v) Elem::children(e, f);
  }
};

/// A pair, saved as a two-element list (an environment variable's name and
/// value, say).
template <class A, class B>
struct FieldTraits<std::pair<A, B>> {
  using First = FieldTraits<A>;
  using Second = FieldTraits<B>;
  static std::string type_name() {
    return "pair of " + First::type_name() + " and " + Second::type_name();
  }
  static detail::json save(const std::pair<A, B>& v, SaveContext& c) {
    return detail::json::array({First::save(v.first, c), Second::save(v.second, c)});
  }
  static void write(const std::pair<A, B>& v, std::string& out, SaveContext& c) {
    out += '[';
    First::write(v.first, out, c);
    out += ',';
    Second::write(v.second, out, c);
    out += ']';
  }
  static bool read(std::pair<A, B>& v, JsonReader& r, LoadContext& c) {
    return r.begin_array() && r.next_element() && First::read(v.first, r, c) && r.next_element() &&
           Second::read(v.second, r, c) && !r.next_element();
  }
  static void load(std::pair<A, B>& v, const detail::json& j, LoadContext& c) {
    if (!j.is_array() || j.size() != 2) detail::type_mismatch(type_name(), j);
    First::load(v.first, j[0], c);
    Second::load(v.second, j[1], c);
  }
  static bool equal(const std::pair<A, B>& a, const std::pair<A, B>& b, EqualContext& c,
                    bool binds) {
    return First::equal(a.first, b.first, c, binds) && Second::equal(a.second, b.second, c, binds);
  }
  static uint64_t hash(const std::pair<A, B>& v, HashContext& c, bool binds) {
    return hash_combine(First::hash(v.first, c, binds), Second::hash(v.second, c, binds));
  }
  static void copy(std::pair<A, B>& d, const std::pair<A, B>& s, CopyContext& c) {
    First::copy(d.first, s.first, c);
    Second::copy(d.second, s.second, c);
  }
  static void print(const std::pair<A, B>& v, PrintContext& p) {
    p.text("(");
    First::print(v.first, p);
    p.text(", ");
    Second::print(v.second, p);
    p.text(")");
  }
  static void children(const std::pair<A, B>& v, const detail::ChildFn& f) {
    First::children(v.first, f);
    Second::children(v.second, f);
  }
};

/// An optional value: null when empty, else the value's own form. The value
/// itself must not save as null (a nested optional, a null node reference),
/// or empty and present would read back alike; def() rejects such a type.
template <class T>
struct FieldTraits<std::optional<T>> {
  using Elem = FieldTraits<T>;
  static_assert(!detail::RefType<T>, "a node reference is already nullable: use Ref<T>");
  static std::string type_name() { return "optional " + Elem::type_name(); }
  static detail::json save(const std::optional<T>& v, SaveContext& c) {
    if (!v) return nullptr;
    return Elem::save(*v, c);
  }
  static void write(const std::optional<T>& v, std::string& out, SaveContext& c) {
    if (!v) {
      out += "null";
    } else {
      Elem::write(*v, out, c);
    }
  }
  static bool read(std::optional<T>& v, JsonReader& r, LoadContext& c) {
    if (r.peek() == JsonReader::Kind::kNull) {
      v.reset();
      return r.read_null();
    }
    v.emplace();
    return Elem::read(*v, r, c);
  }
  static void load(std::optional<T>& v, const detail::json& j, LoadContext& c) {
    if (j.is_null()) {
      v.reset();
      return;
    }
    v.emplace();
    Elem::load(*v, j, c);
  }
  static bool equal(const std::optional<T>& a, const std::optional<T>& b, EqualContext& c,
                    bool binds) {
    if (!a || !b) return !a && !b;
    return Elem::equal(*a, *b, c, binds);
  }
  static uint64_t hash(const std::optional<T>& v, HashContext& c, bool binds) {
    return v ? hash_combine(0x6f7074ULL, Elem::hash(*v, c, binds)) : 0x6e6f6e65ULL;
  }
  static void copy(std::optional<T>& d, const std::optional<T>& s, CopyContext& c) {
    if (!s) {
      d.reset();
      return;
    }
    d.emplace();
    Elem::copy(*d, *s, c);
  }
  static void print(const std::optional<T>& v, PrintContext& p) {
    if (!v) {
      p.text("null");
    } else {
      Elem::print(*v, p);
    }
  }
  static void children(const std::optional<T>& v, const detail::ChildFn& f) {
    if (v) Elem::children(*v, f);
  }
};

/// The one field declaration of a node type: `list.def("a", &AddNode::a)`.
template <class Node>
class FieldList {
 public:
  explicit FieldList(NodeTypeInfo* info) : info_(info) {}

  /// Declares one field; `member` may belong to a base class of Node.
  template <class T, class Owner>
  FieldList& def(std::string name, T Owner::*member, uint32_t flags = kFieldPlain) {
    static_assert(std::is_base_of_v<Owner, Node>, "field of an unrelated class");
    using Traits = FieldTraits<T>;
    // "type" holds the type key in the saved form, so no field may take the name.
    TT_ICHECK(name != "type", info_->key, ": a field may not be called 'type'");
    const bool binds = flags & kBinds;
    FieldInfo f;
    f.name = std::move(name);
    f.flags = flags;
    f.type_name = Traits::type_name();
    {
      Node probe;
      f.offset = static_cast<size_t>(reinterpret_cast<const char*>(&(probe.*member)) -
                                     reinterpret_cast<const char*>(&probe));
      f.size = sizeof(T);
      f.align = alignof(T);
    }
    f.save = [member](const Object& o, SaveContext& c) {
      return Traits::save(static_cast<const Node&>(o).*member, c);
    };
    f.load = [member](Object& o, const nlohmann::json& j, LoadContext& c) {
      Traits::load(static_cast<Node&>(o).*member, j, c);
    };
    f.write = [member](const Object& o, std::string& out, SaveContext& c) {
      Traits::write(static_cast<const Node&>(o).*member, out, c);
    };
    f.read = [member](Object& o, JsonReader& r, LoadContext& c) {
      return Traits::read(static_cast<Node&>(o).*member, r, c);
    };
    f.equal = [member, binds](const Object& a, const Object& b, EqualContext& c) {
      return Traits::equal(static_cast<const Node&>(a).*member, static_cast<const Node&>(b).*member,
                           c, binds);
    };
    f.hash = [member, binds](const Object& o, HashContext& c) {
      return Traits::hash(static_cast<const Node&>(o).*member, c, binds);
    };
    f.copy = [member](Object& d, const Object& s, CopyContext& c) {
      Traits::copy(static_cast<Node&>(d).*member, static_cast<const Node&>(s).*member, c);
    };
    f.print = [member](const Object& o, PrintContext& p) {
      Traits::print(static_cast<const Node&>(o).*member, p);
    };
    f.children = [member](const Object& o, const detail::ChildFn& fn) {
      Traits::children(static_cast<const Node&>(o).*member, fn);
    };
    if constexpr (requires(const T& v) { Traits::number(v); }) {
      f.number = [member](const Object& o) {
        return Traits::number(static_cast<const Node&>(o).*member);
      };
    }
    TT_ICHECK(!(flags & kAddedLater), info_->key, ": declare field '", f.name,
              "' with def_added_later");
    info_->fields.push_back(std::move(f));
    return *this;
  }

  /// Declares a field added after graphs were first saved (kAddedLater): a
  /// saved node without it loads with T{}, and it is hashed only when it
  /// differs from T{}.
  template <class T, class Owner>
  FieldList& def_added_later(std::string name, T Owner::*member, uint32_t flags = kFieldPlain) {
    def(std::move(name), member, flags);
    FieldInfo& f = info_->fields.back();
    f.flags |= kAddedLater;
    f.is_default = [member](const Object& o) { return static_cast<const Node&>(o).*member == T{}; };
    return *this;
  }

  /// Marks the type as a variable, matched through bindings (see object.h).
  FieldList& variable() {
    info_->is_variable = true;
    return *this;
  }

  /// Makes the last declared field a command-line option: `--flag`, with one
  /// line of help (the default is the field's value in the node bound).
  FieldList& option(std::string flag, std::string help) {
    TT_ICHECK(!info_->fields.empty(), info_->key, ": option() before any field");
    FieldInfo& f = info_->fields.back();
    f.flag = std::move(flag);
    f.help = std::move(help);
    return *this;
  }

  /// The inclusive range of the last declared field, a number: checked on
  /// every load and validate() of a node of this type.
  FieldList& range(double min, double max) {
    TT_ICHECK(!info_->fields.empty() && info_->fields.back().number, info_->key,
              ": range() needs a numeric field");
    info_->fields.back().min = min;
    info_->fields.back().max = max;
    return *this;
  }

  /// A check run on every loaded node of this type; throw a user error to reject it.
  FieldList& validate(std::function<void(const Node&)> check) {
    info_->validate = [check = std::move(check)](const Object& o) {
      check(static_cast<const Node&>(o));
    };
    return *this;
  }

 private:
  NodeTypeInfo* info_;
};

namespace detail {
/// Puts the declared ranges' checks in front of the type's validate().
void add_range_checks(NodeTypeInfo& info);

template <class Node>
bool register_node() {
  auto info = std::make_unique<NodeTypeInfo>();
  info->key = Node::kTypeKey;
  info->size = sizeof(Node);
  info->align = alignof(Node);
  info->create = [] { return std::static_pointer_cast<Object>(std::make_shared<Node>()); };
  FieldList<Node> list(info.get());
  Node::declare(list);
  add_range_checks(*info);
  NodeRegistry::global().add(std::move(info));
  return true;
}
}  // namespace detail

}  // namespace tensortune
