#include "tensortune/object/serialize.h"

#include <array>
#include <bitset>
#include <charconv>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "tensortune/object/structural.h"
#include "tensortune/support/strings.h"

namespace tensortune {
namespace {

using json = nlohmann::json;
constexpr const char* kFormat = "tensortune.graph";
constexpr int kVersion = kGraphFormatVersion;

class IndexSaver final : public SaveContext {
 public:
  explicit IndexSaver(const std::unordered_map<const Object*, int64_t>& index) : index_(index) {}
  int64_t ref(const ObjectPtr& node) override {
    if (!node) return -1;
    auto it = index_.find(node.get());
    TT_ICHECK(it != index_.end(), "node saved before its children");
    return it->second;
  }

 private:
  const std::unordered_map<const Object*, int64_t>& index_;
};

class IndexLoader final : public LoadContext {
 public:
  explicit IndexLoader(const std::vector<ObjectPtr>& loaded) : loaded_(loaded) {}
  ObjectPtr node(int64_t index) override {
    if (index < 0 || index >= static_cast<int64_t>(loaded_.size())) {
      fail(ErrorKind::kParse, "reference to node ", index,
           ", which is not an earlier node (a dangling reference or a cycle)");
    }
    return loaded_[index];
  }

 private:
  const std::vector<ObjectPtr>& loaded_;
};

std::string known_fields(const NodeTypeInfo& info) {
  std::vector<std::string> names;
  for (const auto& f : info.fields) names.push_back(f.name);
  return names.empty() ? "(none)" : join(names, ", ");
}

ObjectPtr load_node(const json& node_json, size_t i, const std::vector<ObjectPtr>& loaded) {
  auto where = [&](const NodeTypeInfo* info) {
    return "node " + std::to_string(i) + (info ? " (" + info->key + ")" : std::string());
  };
  if (!node_json.is_object()) fail(ErrorKind::kParse, where(nullptr), ": expected a JSON object");
  auto type_it = node_json.find("type");
  if (type_it == node_json.end() || !type_it->is_string()) {
    fail(ErrorKind::kParse, where(nullptr), ": missing string field 'type'");
  }
  const NodeTypeInfo* info = NodeRegistry::global().find(type_it->get<std::string>());
  if (!info) {
    fail(ErrorKind::kNotFound, where(nullptr), ": unknown type key '", type_it->get<std::string>(),
         "'; known types: ", join(NodeRegistry::global().keys(), ", "));
  }
  for (const auto& [key, value] : node_json.items()) {
    if (key != "type" && !info->field(key)) {
      fail(ErrorKind::kParse, where(info), ": unknown field '", key, "'; fields of ", info->key,
           " are: ", known_fields(*info));
    }
  }
  std::shared_ptr<Object> node = info->create();
  IndexLoader loader(loaded);
  for (const auto& f : info->fields) {
    auto it = node_json.find(f.name);
    if (it == node_json.end()) {
      if (f.flags & kAddedLater) continue;  // saved before the field existed: its default
      fail(ErrorKind::kParse, where(info), ": missing field '", f.name, "' (", f.type_name, ")");
    }
    try {
      f.load(*node, *it, loader);
    } catch (const UserError& e) {
      fail(e.kind(), where(info), ", field '", f.name, "': ", e.what());
    }
  }
  if (info->validate) {
    try {
      info->validate(*node);
    } catch (const UserError& e) {
      fail(e.kind(), where(info), ": ", e.what());
    }
  }
  return node;
}

// nlohmann's parser is iterative, but copying, comparing, hashing and
// printing a value recurse once per level, so hostile input nested a million
// levels deep would overflow the stack long after parsing. A linear pre-scan
// rejects it up front; malformed text is left to the parser to report.
void check_nesting(std::string_view text, std::string_view what) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonNesting) {
        fail(ErrorKind::kParse, "invalid ", what, " at byte offset ", i, ": nested deeper than ",
             kMaxJsonNesting, " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

// ---------------------------------------------------------------------------
// save_string: JSON text written straight from the fields, no DOM.

/// The length of the well-formed UTF-8 sequence that starts at `p` (a byte of
/// 0x80 or more), or 0 if there is none. The table of RFC 3629, which both
/// nlohmann's lexer and its dump() enforce: no overlong forms, no surrogates,
/// nothing above U+10FFFF.
size_t utf8_sequence_length(const char* p, const char* end) {
  auto at = [&](size_t k, unsigned lo, unsigned hi) {
    if (end - p <= static_cast<ptrdiff_t>(k)) return false;
    auto c = static_cast<unsigned char>(p[k]);
    return c >= lo && c <= hi;
  };
  auto c = static_cast<unsigned char>(p[0]);
  if (c >= 0xc2 && c <= 0xdf) return at(1, 0x80, 0xbf) ? 2 : 0;
  if (c == 0xe0) return at(1, 0xa0, 0xbf) && at(2, 0x80, 0xbf) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) {
    return at(1, 0x80, 0xbf) && at(2, 0x80, 0xbf) ? 3 : 0;
  }
  if (c == 0xed) return at(1, 0x80, 0x9f) && at(2, 0x80, 0xbf) ? 3 : 0;
  if (c == 0xf0) return at(1, 0x90, 0xbf) && at(2, 0x80, 0xbf) && at(3, 0x80, 0xbf) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) {
    return at(1, 0x80, 0xbf) && at(2, 0x80, 0xbf) && at(3, 0x80, 0xbf) ? 4 : 0;
  }
  if (c == 0xf4) return at(1, 0x80, 0x8f) && at(2, 0x80, 0xbf) && at(3, 0x80, 0xbf) ? 4 : 0;
  return 0;
}

/// The bytes a JSON string holds as they are: printable ASCII but '"' and '\\'.
/// A table, so the scanners test each byte once instead of four times.
constexpr std::array<bool, 256> kPlainStringByte = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[c] = c != '"' && c != '\\';
  return plain;
}();

/// a == b, inlined: std::string_view's == calls memcmp, which costs more than
/// comparing the few bytes of a key or type name.
inline bool same_text(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

/// Node addresses to their indices in the saved "nodes" (or kOpen while the
/// node's children are being saved): open addressing with linear probing,
/// because std::unordered_map's allocation per node cost more than writing.
class NodeIndex {
 public:
  static constexpr int64_t kAbsent = -2;
  static constexpr int64_t kOpen = -1;

  NodeIndex() { resize(10); }

  int64_t get(const Object* key) const {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].value;
      if (!slots_[i].key) return kAbsent;
    }
  }

  void set(const Object* key, int64_t value) {
    if ((used_ + 1) * 2 > slots_.size()) resize(bits_ + 1);
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (!slots_[i].key) {
        slots_[i] = {key, value};
        ++used_;
        return;
      }
      if (slots_[i].key == key) {
        slots_[i].value = value;
        return;
      }
    }
  }

 private:
  struct Slot {
    const Object* key = nullptr;
    int64_t value = kAbsent;
  };

  // Fibonacci hashing: the high bits of the product mix every address bit.
  size_t slot(const Object* key) const {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(key) * 0x9e3779b97f4a7c15ULL) >>
                               (64 - bits_));
  }

  void resize(int bits) {
    std::vector<Slot> old = std::move(slots_);
    bits_ = bits;
    slots_.assign(size_t{1} << bits, Slot{});
    mask_ = slots_.size() - 1;
    used_ = 0;
    for (const Slot& s : old) {
      if (s.key) set(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t used_ = 0;
  int bits_ = 0;
};

/// References of the node being written, resolved from the children the walk
/// of save_text has just numbered (a handful, so a scan beats a hash probe).
class TextSaver final : public SaveContext {
 public:
  explicit TextSaver(const NodeIndex& index) : index_(index) {}

  void set_children(const Object* const* nodes, const int64_t* indices, size_t count) {
    nodes_ = nodes;
    indices_ = indices;
    count_ = count;
  }

  int64_t ref(const ObjectPtr& node) override {
    if (!node) return -1;
    if (count_ <= kScanLimit) {
      for (size_t i = 0; i < count_; ++i) {
        if (nodes_[i] == node.get()) return indices_[i];
      }
    }
    int64_t i = index_.get(node.get());
    TT_ICHECK(i >= 0, "node saved before its children");
    return i;
  }

 private:
  static constexpr size_t kScanLimit = 16;
  const NodeIndex& index_;
  const Object* const* nodes_ = nullptr;
  const int64_t* indices_ = nullptr;
  size_t count_ = 0;
};

/// One node as save_json(...).dump() writes it (see NodeTypeInfo::saved_layout).
void write_node(const Object& node, std::string& out, SaveContext& saver) {
  const NodeTypeInfo& info = node.type_info();
  TT_ICHECK(info.saved_layout.size() == info.fields.size() + 1, info.key, " is not registered");
  for (const auto& piece : info.saved_layout) {
    out += piece.text;
    if (piece.field >= 0) info.fields[piece.field].write(node, out, saver);
  }
}

/// The text of save_json(root).dump(). Nodes are written in the order of
/// post_order (so the indices, and the bytes, are the same), each as soon as
/// the depth-first walk finishes it; one walk both numbers and writes them.
std::string save_text(const ObjectPtr& root) {
  std::string out = "{\"format\":";
  detail::append_json_string(out, kFormat);
  out += ",\"nodes\":[";
  NodeIndex index;
  if (root) {
    TextSaver saver(index);
    // The children of every open node, in field order, in one stack-like
    // vector: a frame owns [begin, end) and drops it when it closes. Beside
    // each child, its index once known, for the references of write_node.
    std::vector<const Object*> pending;
    std::vector<int64_t> pending_index;
    struct Frame {
      const Object* node;
      size_t begin, next, end;
    };
    std::vector<Frame> stack;
    detail::ChildFn push_child = [&pending](const ObjectPtr& c) { pending.push_back(c.get()); };
    auto enter = [&](const Object* n) {
      size_t begin = pending.size();
      for (const auto& f : n->type_info().fields) f.children(*n, push_child);
      pending_index.resize(pending.size(), NodeIndex::kAbsent);
      index.set(n, NodeIndex::kOpen);
      stack.push_back({n, begin, begin, pending.size()});
    };
    int64_t count = 0;
    enter(root.get());
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next < top.end) {
        const Object* child = pending[top.next];
        int64_t state = index.get(child);
        if (state >= 0) {
          pending_index[top.next++] = state;
          continue;
        }
        TT_ICHECK(state != NodeIndex::kOpen, "cycle in node graph at ", child->type_key());
        ++top.next;  // the slot top.next - 1 gets the child's index when it closes
        enter(child);
        continue;
      }
      const Object* n = top.node;
      if (count) out += ',';
      saver.set_children(pending.data() + top.begin, pending_index.data() + top.begin,
                         top.end - top.begin);
      write_node(*n, out, saver);
      pending.resize(top.begin);
      pending_index.resize(top.begin);
      stack.pop_back();
      index.set(n, count);
      if (!stack.empty()) pending_index[stack.back().next - 1] = count;
      ++count;
    }
  }
  out += "],\"root\":";
  if (root) {
    detail::append_json_int(out, index.get(root.get()));
  } else {
    out += "null";
  }
  out += ",\"version\":";
  detail::append_json_int(out, kVersion);
  out += '}';
  return out;
}

// ---------------------------------------------------------------------------
// load_string: the fast path.

/// Resolves references for TextLoader and tracks each node's depth as its
/// references are read (a node's children are exactly the nodes it refers to).
class TextIndexLoader final : public LoadContext {
 public:
  ObjectPtr node(int64_t index) override {
    if (index < 0 || index >= static_cast<int64_t>(loaded.size())) {
      // Not reported: TextLoader gives up and the DOM path words the error.
      fail(ErrorKind::kParse, "reference to node ", index, ", which is not an earlier node");
    }
    node_depth = std::max(node_depth, depth[index] + 1);
    return loaded[index];
  }

  std::vector<ObjectPtr> loaded;
  std::vector<int> depth;
  int node_depth = 1;
};

/// The fast path of load_string: a strict JSON reader that walks the known
/// structure of a saved graph and hands each field's value to FieldInfo::read,
/// building no DOM. It accepts a subset of what parse_json_text + load_json
/// accept and gives the same graph for it. On anything else (malformed text, a
/// failed check, or a form it leaves to the DOM path, such as escapes in keys,
/// duplicate keys, or numbers that over- or underflow) it gives up, and
/// load_string takes the DOM path, which reports the error exactly as before.
/// So errors cost a second parse, and only error reporting has one implementation.
class TextLoader final : public JsonReader {
 public:
  explicit TextLoader(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {
    // About 70 bytes per node in practice; a guess only saves reallocation.
    ctx_.loaded.reserve(text.size() / 64);
    ctx_.depth.reserve(text.size() / 64);
  }

  /// The saved graph in `root`, or false to take the DOM path.
  bool load(ObjectPtr& root) {
    if (!consume('{')) return false;
    depth_ = 1;
    bool seen_format = false, seen_version = false, seen_root = false, seen_nodes = false;
    bool root_null = false;
    JsonInt root_index;
    while (true) {
      std::string_view key;
      if (!read_key(key)) return false;
      if (key == "format" && !seen_format) {
        seen_format = true;
        std::string_view format;
        if (!read_string(format) || format != kFormat) return false;
      } else if (key == "version" && !seen_version) {
        seen_version = true;
        JsonInt version;
        if (!read_int(version) || !version.is_unsigned ||
            version.u != static_cast<uint64_t>(kVersion)) {
          return false;
        }
      } else if (key == "root" && !seen_root) {
        seen_root = true;
        root_null = peek() == Kind::kNull;
        if (!(root_null ? read_null() : read_int(root_index))) return false;
      } else if (key == "nodes" && !seen_nodes) {
        seen_nodes = true;
        if (!load_nodes()) return false;
      } else {
        return false;
      }
      if (consume(',')) continue;
      if (consume('}')) break;
      return false;
    }
    skip_ws();
    if (p_ != end_ || !seen_format || !seen_version || !seen_root || !seen_nodes) return false;
    if (root_null) {
      root = nullptr;
      return true;
    }
    if (!root_index.is_unsigned || root_index.u >= ctx_.loaded.size()) return false;
    root = ctx_.loaded[root_index.u];
    return true;
  }

  Kind peek() override {
    skip_ws();
    if (p_ == end_) return Kind::kInvalid;
    switch (*p_) {
      case 'n': return Kind::kNull;
      case 't':
      case 'f': return Kind::kBool;
      case '"': return Kind::kString;
      case '[': return Kind::kArray;
      case '{': return Kind::kObject;
      case '-': return Kind::kNumber;
      default: return *p_ >= '0' && *p_ <= '9' ? Kind::kNumber : Kind::kInvalid;
    }
  }

  bool read_null() override {
    skip_ws();
    return literal("null");
  }

  bool read_bool(bool& v) override {
    skip_ws();
    if (literal("true")) {
      v = true;
      return true;
    }
    v = false;
    return literal("false");
  }

  bool read_int(JsonInt& v) override {
    Number n;
    return scan_number(n) && n.integer && to_int(n, v);
  }

  bool read_number(double& v) override {
    Number n;
    if (!scan_number(n)) return false;
    return to_double(n, v);
  }

  bool read_string(std::string_view& v) override {
    skip_ws();
    return scan_string(v);
  }

  bool begin_array() override {
    skip_ws();
    if (p_ == end_ || *p_ != '[' || depth_ >= kMaxJsonNesting) return false;
    ++p_;
    ++depth_;
    first_element_[depth_] = true;
    return true;
  }

  bool next_element() override {
    skip_ws();
    if (p_ == end_) return fail_read();
    if (*p_ == ']') {
      ++p_;
      --depth_;
      return false;
    }
    if (first_element_[depth_]) {
      first_element_[depth_] = false;
      return true;
    }
    if (*p_ != ',') return fail_read();
    ++p_;
    return true;
  }

  bool read_json(nlohmann::json& v) override {
    switch (peek()) {
      case Kind::kNull: v = nullptr; return read_null();
      case Kind::kBool: {
        bool b;
        if (!read_bool(b)) return false;
        v = b;
        return true;
      }
      case Kind::kString: {
        std::string_view s;
        if (!read_string(s)) return false;
        v = std::string(s);
        return true;
      }
      case Kind::kNumber: {
        // As nlohmann stores them: unsigned, signed (negative) or float.
        Number n;
        if (!scan_number(n)) return false;
        JsonInt i;
        if (n.integer && to_int(n, i)) {
          if (i.is_unsigned) {
            v = i.u;
          } else {
            v = i.s;
          }
          return true;
        }
        double d;
        if (!to_double(n, d)) return false;
        v = d;
        return true;
      }
      case Kind::kArray:
      case Kind::kObject: {
        // Checked (and its depth bounded) by skip_value, then built by nlohmann
        // from that span: the same subtree a parse of the whole text builds.
        const char* start = p_;
        if (!skip_value()) return false;
        try {
          v = json::parse(start, p_);
        } catch (const json::exception&) {
          return false;
        }
        return true;
      }
      case Kind::kInvalid: return false;
    }
    return false;
  }

  bool read_text(std::string_view& text) override {
    skip_ws();
    const char* start = p_;
    if (!skip_value()) return false;
    text = std::string_view(start, static_cast<size_t>(p_ - start));
    return true;
  }

 private:
  struct Number {
    const char* begin;
    const char* end;
    bool integer;  ///< no fraction, no exponent
  };

  struct Entry {
    std::string_view key;
    const char* begin;  ///< the value's text
    const char* end;
  };

  bool fail_read() {
    failed_ = true;
    return false;
  }

  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool consume(char c) {
    skip_ws();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return false;
    }
    p_ += word.size();
    return true;
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  /// A number token by JSON's grammar (what follows it is the caller's concern).
  bool scan_number(Number& n) {
    skip_ws();
    const char* q = p_;
    if (q != end_ && *q == '-') ++q;
    if (q == end_ || !is_digit(*q)) return false;
    if (*q == '0') {
      ++q;
    } else {
      while (q != end_ && is_digit(*q)) ++q;
    }
    n.integer = true;
    if (q != end_ && *q == '.') {
      ++q;
      n.integer = false;
      if (q == end_ || !is_digit(*q)) return false;
      while (q != end_ && is_digit(*q)) ++q;
    }
    if (q != end_ && (*q == 'e' || *q == 'E')) {
      ++q;
      n.integer = false;
      if (q != end_ && (*q == '+' || *q == '-')) ++q;
      if (q == end_ || !is_digit(*q)) return false;
      while (q != end_ && is_digit(*q)) ++q;
    }
    n.begin = p_;
    n.end = q;
    p_ = q;
    return true;
  }

  /// An integer token that fits 64 bits, as nlohmann stores it; false for
  /// larger ones (which nlohmann turns into floats).
  static bool to_int(const Number& n, JsonInt& v) {
    if (!n.integer) return false;
    bool negative = *n.begin == '-';
    uint64_t m = 0;
    for (const char* q = n.begin + negative; q != n.end; ++q) {
      auto d = static_cast<uint64_t>(*q - '0');
      if (m > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
      m = m * 10 + d;
    }
    if (!negative) {
      v = {true, m, 0};
      return true;
    }
    if (m > uint64_t{1} << 63) return false;
    v = {false, 0, static_cast<int64_t>(0 - m)};  // modular, so -2^63 works too
    return true;
  }

  /// A number as get<double>() gives it: integers converted, floats correctly
  /// rounded (as strtod does); false on overflow and underflow, which the DOM
  /// path handles in its own way.
  static bool to_double(const Number& n, double& v) {
    JsonInt i;
    if (n.integer && to_int(n, i)) {
      v = i.is_unsigned ? static_cast<double>(i.u) : static_cast<double>(i.s);
      return true;
    }
    auto [end, ec] = std::from_chars(n.begin, n.end, v);
    return ec == std::errc() && end == n.end && std::isfinite(v);
  }

  bool hex4(uint32_t& v) {
    if (end_ - p_ < 4) return false;
    v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = *p_++;
      uint32_t d;
      if (is_digit(c)) {
        d = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
      v = v * 16 + d;
    }
    return true;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  /// A string token, unescaped: a view of the text when it has no escapes
  /// (escaped_ false), else of scratch_. Rejects what nlohmann's lexer
  /// rejects: raw control characters, bad escapes, lone surrogates, bad UTF-8.
  bool scan_string(std::string_view& v) {
    escaped_ = false;
    if (p_ == end_ || *p_ != '"') return false;
    const char* start = p_ + 1;
    // A local cursor: stores to p_ in the loop would not be kept in a register.
    const char* q = start;
    while (true) {
      while (q != end_ && kPlainStringByte[static_cast<unsigned char>(*q)]) ++q;
      if (q == end_) return false;
      auto c = static_cast<unsigned char>(*q);
      if (c == '"') {
        v = std::string_view(start, static_cast<size_t>(q - start));
        p_ = q + 1;
        return true;
      }
      if (c == '\\') break;
      if (c < 0x80) return false;  // a control character
      size_t n = utf8_sequence_length(q, end_);
      if (!n) return false;
      q += n;
    }
    p_ = q;
    escaped_ = true;
    scratch_.assign(start, p_);
    while (true) {
      if (p_ == end_) return false;
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        v = scratch_;
        return true;
      }
      if (c < 0x20) return false;
      if (c >= 0x80) {
        size_t n = utf8_sequence_length(p_, end_);
        if (!n) return false;
        scratch_.append(p_, n);
        p_ += n;
        continue;
      }
      ++p_;
      if (c != '\\') {
        scratch_ += static_cast<char>(c);
        continue;
      }
      if (p_ == end_) return false;
      switch (*p_++) {
        case '"': scratch_ += '"'; break;
        case '\\': scratch_ += '\\'; break;
        case '/': scratch_ += '/'; break;
        case 'b': scratch_ += '\b'; break;
        case 'f': scratch_ += '\f'; break;
        case 'n': scratch_ += '\n'; break;
        case 'r': scratch_ += '\r'; break;
        case 't': scratch_ += '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xd800 && cp <= 0xdbff) {
            // A high surrogate must be followed by an escaped low one.
            uint32_t low;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
            p_ += 2;
            if (!hex4(low) || low < 0xdc00 || low > 0xdfff) return false;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return false;
          }
          append_utf8(scratch_, cp);
          break;
        }
        default: return false;
      }
    }
  }

  /// An object key and its ':'. Keys with escapes are left to the DOM path.
  bool read_key(std::string_view& key) {
    skip_ws();
    return scan_string(key) && !escaped_ && consume(':');
  }

  /// Checks one value of any kind and moves past it.
  bool skip_value() {
    skip_ws();
    if (p_ == end_) return false;
    switch (*p_) {
      case '"': {
        std::string_view s;
        return scan_string(s);
      }
      case 'n': return literal("null");
      case 't': return literal("true");
      case 'f': return literal("false");
      case '[':
      case '{': {
        const char close = *p_ == '[' ? ']' : '}';
        if (depth_ >= kMaxJsonNesting) return false;
        ++depth_;
        ++p_;
        if (consume(close)) {
          --depth_;
          return true;
        }
        while (true) {
          if (close == '}') {
            std::string_view key;
            skip_ws();
            if (!scan_string(key) || !consume(':')) return false;
          }
          if (!skip_value()) return false;
          if (consume(',')) continue;
          if (consume(close)) break;
          return false;
        }
        --depth_;
        return true;
      }
      default: {
        Number n;
        return scan_number(n);
      }
    }
  }

  bool load_nodes() {
    if (!begin_array()) return false;
    while (next_element()) {
      if (!load_node()) return false;
    }
    return !failed_;
  }

  /// One node: its keys first (the type key may come last, as it does in the
  /// saved form, whose keys are sorted), then each field's value from its text.
  bool load_node() {
    if (!consume('{')) return false;
    ++depth_;  // 3: never near kMaxJsonNesting
    entries_.clear();
    std::string_view type;
    bool has_type = false;
    while (true) {
      std::string_view key;
      if (!read_key(key)) return false;
      skip_ws();
      if (same_text(key, "type")) {
        if (has_type || !scan_string(type) || escaped_) return false;
        has_type = true;
      } else {
        const char* begin = p_;
        if (!skip_value()) return false;
        entries_.push_back({key, begin, p_});
      }
      if (consume(',')) continue;
      if (consume('}')) break;
      return false;
    }
    --depth_;
    const char* after = p_;
    if (!has_type) return false;
    const NodeTypeInfo* info = find_type(type);
    // Each declared field exactly once (a field added later may be missing),
    // none repeated.
    if (!info || entries_.size() > info->fields.size()) return false;
    seen_.assign(info->fields.size(), false);
    std::shared_ptr<Object> node = info->create();
    ctx_.node_depth = 1;
    for (size_t j = 0; j < entries_.size(); ++j) {
      const Entry& e = entries_[j];
      // Saved text lists the keys in saved_layout's order: try that field first.
      int k = info->saved_layout[j].field;
      if (!same_text(info->fields[k].name, e.key)) {
        const FieldInfo* f = info->field(e.key);
        if (!f) return false;
        k = static_cast<int>(f - info->fields.data());
      }
      const FieldInfo* f = &info->fields[k];
      if (seen_[k]) return false;
      seen_[k] = true;
      p_ = e.begin;
      if (!f->read(*node, *this, ctx_) || failed_ || p_ != e.end) return false;
    }
    for (size_t k = 0; k < info->fields.size(); ++k) {
      if (!seen_[k] && !(info->fields[k].flags & kAddedLater)) return false;
    }
    p_ = after;
    if (info->validate) info->validate(*node);  // throws on a bad node: the DOM path reports it
    if (ctx_.node_depth > kMaxGraphDepth) return false;
    ctx_.loaded.push_back(std::move(node));
    ctx_.depth.push_back(ctx_.node_depth);
    return true;
  }

  /// The registered type `key`, through a small cache: a graph has few types.
  const NodeTypeInfo* find_type(std::string_view key) {
    for (const auto& [cached_key, info] : type_cache_) {
      if (same_text(cached_key, key)) return info;
    }
    const NodeTypeInfo* info = NodeRegistry::global().find(key);
    if (info) type_cache_[next_cache_slot_++ % type_cache_.size()] = {info->key, info};
    return info;
  }

  const char* p_;
  const char* end_;
  std::array<std::pair<std::string_view, const NodeTypeInfo*>, 8> type_cache_{};
  size_t next_cache_slot_ = 0;
  int depth_ = 0;
  bool failed_ = false;
  bool escaped_ = false;                            ///< whether the last scan_string met an escape
  std::string scratch_;                             ///< the last escaped string, unescaped
  std::bitset<kMaxJsonNesting + 1> first_element_;  ///< per open array: no element read yet
  std::vector<Entry> entries_;
  std::vector<bool> seen_;
  TextIndexLoader ctx_;
};

}  // namespace

namespace detail {

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  const char* p = s.data();
  const char* end = p + s.size();
  const char* run = p;  // the start of bytes not yet copied
  while (p != end) {
    auto c = static_cast<unsigned char>(*p);
    if (kPlainStringByte[c]) {
      ++p;
      continue;
    }
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(p, end);
      if (!n) {
        // Not representable in JSON: throw what dump() throws for it, as before.
        (void)json(std::string(s)).dump();
        TT_ICHECK(false, "dump() accepted a string with invalid UTF-8");
      }
      p += n;
      continue;
    }
    out.append(run, p);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";  // dump() writes lowercase
        char u[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out.append(u, sizeof u);
      }
    }
    run = ++p;
  }
  out.append(run, end);
  out += '"';
}

void append_json_double(std::string& out, double v) {
  // nlohmann's own formatter (Grisu2, printf-%g-like layout, ".0" for integral
  // values), not std::to_chars: their digits differ now and then, and
  // save_string promises the bytes of save_json(...).dump().
  char buf[64];
  char* end = nlohmann::detail::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

void append_json_value(std::string& out, const json& v) {
  switch (v.type()) {
    case json::value_t::null: out += "null"; break;
    case json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case json::value_t::number_integer: append_json_int(out, v.get<int64_t>()); break;
    case json::value_t::number_unsigned: append_json_int(out, v.get<uint64_t>()); break;
    case json::value_t::number_float: {
      double d = v.get<double>();
      if (std::isfinite(d)) {
        append_json_double(out, d);
      } else {
        out += "null";  // as dump() writes non-finite numbers
      }
      break;
    }
    case json::value_t::string: append_json_string(out, v.get_ref<const std::string&>()); break;
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ',';
        first = false;
        append_json_value(out, e);
      }
      out += ']';
      break;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, it.key());
        out += ':';
        append_json_value(out, it.value());
      }
      out += '}';
      break;
    }
    default: out += v.dump();  // binary values and the like: never loaded, rare
  }
}

}  // namespace detail

json field_values(const Object& node) {
  // References have no value outside a graph: refuse them, naming the field.
  class NoReferences final : public SaveContext {
   public:
    int64_t ref(const ObjectPtr& child) override {
      if (!child) return -1;
      fail(ErrorKind::kInvalidArgument, "field '", field, "' of ", type, " holds a node reference");
    }
    std::string_view type, field;
  } saver;
  const NodeTypeInfo& info = node.type_info();
  saver.type = info.key;
  json out = json::object();
  for (const auto& f : info.fields) {
    saver.field = f.name;
    out[f.name] = f.save(node, saver);
  }
  return out;
}

json save_json(const ObjectPtr& root) {
  std::vector<ObjectPtr> order = post_order(root);
  std::unordered_map<const Object*, int64_t> index;
  index.reserve(order.size());
  json nodes = json::array();
  IndexSaver saver(index);
  for (const auto& node : order) {
    const NodeTypeInfo& info = node->type_info();
    json out = json::object();
    out["type"] = info.key;
    for (const auto& f : info.fields) out[f.name] = f.save(*node, saver);
    index.emplace(node.get(), static_cast<int64_t>(nodes.size()));
    nodes.push_back(std::move(out));
  }
  json doc = json::object();
  doc["format"] = kFormat;
  doc["version"] = kVersion;
  doc["root"] = root ? json(index.at(root.get())) : json(nullptr);
  doc["nodes"] = std::move(nodes);
  return doc;
}

ObjectPtr load_json(const json& doc) {
  if (!doc.is_object()) fail(ErrorKind::kParse, "saved graph: expected a JSON object");
  for (const auto& [key, value] : doc.items()) {
    if (key != "format" && key != "version" && key != "root" && key != "nodes") {
      fail(ErrorKind::kParse, "saved graph: unknown top-level key '", key,
           "'; expected format, version, root, nodes");
    }
  }
  auto format = doc.find("format");
  if (format == doc.end() || *format != kFormat) {
    fail(ErrorKind::kParse, "saved graph: 'format' must be \"", kFormat, "\"");
  }
  auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer()) {
    fail(ErrorKind::kParse, "saved graph: missing integer 'version'");
  }
  if (*version != kVersion) {
    fail(ErrorKind::kParse, "saved graph: version ", version->dump(),
         " is not supported; this build reads version ", kVersion);
  }
  auto nodes = doc.find("nodes");
  if (nodes == doc.end() || !nodes->is_array()) {
    fail(ErrorKind::kParse, "saved graph: missing array 'nodes'");
  }
  auto root = doc.find("root");
  if (root == doc.end()) fail(ErrorKind::kParse, "saved graph: missing 'root'");
  if (root->is_null()) return nullptr;
  if (!root->is_number_integer() || root->get<int64_t>() < 0 ||
      root->get<int64_t>() >= static_cast<int64_t>(nodes->size())) {
    fail(ErrorKind::kParse, "saved graph: 'root' must be a node index below ", nodes->size(),
         ", got ", detail::json_excerpt(*root));
  }

  std::vector<ObjectPtr> loaded;
  loaded.reserve(nodes->size());
  std::unordered_map<const Object*, int> depth;
  depth.reserve(nodes->size());
  for (size_t i = 0; i < nodes->size(); ++i) {
    ObjectPtr node = load_node((*nodes)[i], i, loaded);
    int d = 1;
    for (const auto& f : node->type_info().fields) {
      f.children(*node,
                 [&](const ObjectPtr& child) { d = std::max(d, depth.at(child.get()) + 1); });
    }
    if (d > kMaxGraphDepth) {
      fail(ErrorKind::kParse, "node ", i, " (", node->type_key(), "): graph is deeper than ",
           kMaxGraphDepth, " nodes");
    }
    depth.emplace(node.get(), d);
    loaded.push_back(std::move(node));
  }
  return loaded[root->get<int64_t>()];
}

std::string save_string(const ObjectPtr& root, int indent) {
  // Indented text is for people, and rare: the DOM path prints it.
  return indent < 0 ? save_text(root) : save_json(root).dump(indent);
}

json parse_json_text(std::string_view text, std::string_view what) {
  check_nesting(text, what);
  // nlohmann's messages start with "[json.exception.parse_error.101] "; keep the rest.
  auto message = [](const json::exception& e) {
    std::string m = e.what();
    auto pos = m.find("] ");
    return pos == std::string::npos ? m : m.substr(pos + 2);
  };
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    fail(ErrorKind::kParse, "invalid ", what, " at byte offset ", e.byte, ": ", message(e));
  } catch (const json::exception& e) {
    // The parser throws other kinds too, e.g. out_of_range for a number like 1e999.
    fail(ErrorKind::kParse, "invalid ", what, ": ", message(e));
  }
}

namespace detail {
std::optional<ObjectPtr> load_text_directly(std::string_view text) {
  ObjectPtr root;
  try {
    if (TextLoader(text).load(root)) return root;
  } catch (...) {
    // A field or a node check rejected a value; the DOM path says why.
  }
  return std::nullopt;
}
}  // namespace detail

ObjectPtr load_string(std::string_view text) {
  if (auto root = detail::load_text_directly(text)) return *std::move(root);
  return load_json(parse_json_text(text));
}

}  // namespace tensortune
