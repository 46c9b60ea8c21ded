#include "tensortune/object/serialize.h"

#include <array>
#include <bitset>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "object/json_text.h"
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

/// Checks a saved node's keys against `info` and loads its fields into
/// `node`, then runs the type's validate(); errors name `where`.
void load_fields(Object& node, const NodeTypeInfo& info, const json& node_json, LoadContext& c,
                 const std::string& where) {
  for (const auto& [key, value] : node_json.items()) {
    if (key != "type" && !info.field(key)) {
      fail(ErrorKind::kParse, where, ": unknown field '", key, "'; fields of ", info.key,
           " are: ", known_fields(info));
    }
  }
  for (const auto& f : info.fields) {
    auto it = node_json.find(f.name);
    if (it == node_json.end()) {
      if (f.flags & kAddedLater) continue;  // saved before the field existed: its default
      fail(ErrorKind::kParse, where, ": missing field '", f.name, "' (", f.type_name, ")");
    }
    try {
      f.load(node, *it, c);
    } catch (const UserError& e) {
      fail(e.kind(), where, ", field '", f.name, "': ", e.what());
    }
  }
  if (info.validate) {
    try {
      info.validate(node);
    } catch (const UserError& e) {
      fail(e.kind(), where, ": ", e.what());
    }
  }
}

bool in_range(const FieldInfo& f, double v) {
  return !std::isnan(v) && (!f.min || v >= *f.min) && (!f.max || v <= *f.max);
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
  std::shared_ptr<Object> node = info->create();
  IndexLoader loader(loaded);
  load_fields(*node, *info, node_json, loader, where(info));
  return node;
}

// ---------------------------------------------------------------------------
// save_string: JSON text written straight from the fields, no DOM.

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

/// The fast path of load_string: walks the known structure of a saved graph
/// with the JSON reader and hands each field's value to FieldInfo::read,
/// building no DOM. It accepts a subset of what parse_json_text + load_json
/// accept and gives the same graph for it. On anything else (malformed text, a
/// failed check, or a form it leaves to the DOM path, such as escapes in keys)
/// it gives up, and load_string takes the DOM path, which says what is wrong.
/// So errors cost a second parse, and only error reporting has one implementation.
class TextLoader final : public detail::JsonText {
 public:
  explicit TextLoader(std::string_view text) : JsonText(text) {
    // About 70 bytes per node in practice; a guess only saves reallocation.
    ctx_.loaded.reserve(text.size() / 64);
    ctx_.depth.reserve(text.size() / 64);
  }

  /// The saved graph in `root`, or false to take the DOM path.
  bool load(ObjectPtr& root) {
    if (!consume('{')) return false;
    set_depth(1);
    bool seen_format = false, seen_version = false, seen_root = false, seen_nodes = false;
    bool root_null = false;
    JsonInt root_index;
    while (true) {
      std::string_view key;
      if (!read_key(key, /*plain_only=*/true)) return false;
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
    if (!at_end() || !seen_format || !seen_version || !seen_root || !seen_nodes) return false;
    if (root_null) {
      root = nullptr;
      return true;
    }
    if (!root_index.is_unsigned || root_index.u >= ctx_.loaded.size()) return false;
    root = ctx_.loaded[root_index.u];
    return true;
  }

 private:
  struct Entry {
    std::string_view key;
    const char* begin;  ///< the value's text
    const char* end;
  };

  bool load_nodes() {
    if (!begin_array()) return false;
    while (next_element()) {
      if (!load_node()) return false;
    }
    return !failed();
  }

  /// One node: its keys first (the type key may come last, as it does in the
  /// saved form, whose keys are sorted), then each field's value from its text.
  bool load_node() {
    if (!consume('{')) return false;
    set_depth(depth() + 1);  // 3: never near kMaxJsonNesting
    entries_.clear();
    std::string_view type;
    bool has_type = false;
    while (true) {
      std::string_view key;
      if (!read_key(key, /*plain_only=*/true)) return false;
      if (detail::same_text(key, "type")) {
        if (has_type || !read_string(type) || escaped()) return false;
        has_type = true;
      } else {
        // The key is a view of the text (no escapes), so it outlives the walk.
        if (peek() == Kind::kInvalid) return false;
        const char* begin = position();
        if (!skip_value()) return false;
        entries_.push_back({key, begin, position()});
      }
      if (consume(',')) continue;
      if (consume('}')) break;
      return false;
    }
    set_depth(depth() - 1);
    const char* after = position();
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
      if (!detail::same_text(info->fields[k].name, e.key)) {
        const FieldInfo* f = info->field(e.key);
        if (!f) return false;
        k = static_cast<int>(f - info->fields.data());
      }
      const FieldInfo* f = &info->fields[k];
      if (seen_[k]) return false;
      seen_[k] = true;
      seek(e.begin);
      if (!f->read(*node, *this, ctx_) || failed() || position() != e.end) return false;
    }
    for (size_t k = 0; k < info->fields.size(); ++k) {
      if (!seen_[k] && !(info->fields[k].flags & kAddedLater)) return false;
    }
    seek(after);
    if (info->validate) info->validate(*node);  // throws on a bad node: the DOM path reports it
    if (ctx_.node_depth > kMaxGraphDepth) return false;
    ctx_.loaded.push_back(std::move(node));
    ctx_.depth.push_back(ctx_.node_depth);
    return true;
  }

  /// The registered type `key`, through a small cache: a graph has few types.
  const NodeTypeInfo* find_type(std::string_view key) {
    for (const auto& [cached_key, info] : type_cache_) {
      if (detail::same_text(cached_key, key)) return info;
    }
    const NodeTypeInfo* info = NodeRegistry::global().find(key);
    if (info) type_cache_[next_cache_slot_++ % type_cache_.size()] = {info->key, info};
    return info;
  }

  std::array<std::pair<std::string_view, const NodeTypeInfo*>, 8> type_cache_{};
  size_t next_cache_slot_ = 0;
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
    if (detail::kPlainStringByte[c]) {
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

json save_inline_node(const Object& node, SaveContext& c) {
  const NodeTypeInfo& info = node.type_info();
  json out = json::object();
  out["type"] = info.key;
  for (const auto& f : info.fields) out[f.name] = f.save(node, c);
  return out;
}

void load_inline_node(Object& node, const json& j, LoadContext& c) {
  const NodeTypeInfo& info = node.type_info();
  if (!j.is_object()) type_mismatch("a " + info.key + " object", j);
  auto type = j.find("type");
  if (type == j.end() || *type != info.key) {
    fail(ErrorKind::kTypeMismatch, "expected a ", info.key, " object (\"type\": \"", info.key,
         "\"), got ", json_excerpt(j));
  }
  load_fields(node, info, j, c, info.key);
}

void add_range_checks(NodeTypeInfo& info) {
  std::vector<const FieldInfo*> ranged;
  for (const auto& f : info.fields) {
    if (f.min || f.max) ranged.push_back(&f);
  }
  if (ranged.empty()) return;
  // `info` moves into the registry after this; its fields vector does not
  // change again, so the pointers stay valid.
  info.validate = [ranged, then = std::move(info.validate)](const Object& node) {
    for (const FieldInfo* f : ranged) {
      double v = f->number(node);
      if (!in_range(*f, v)) {
        fail(ErrorKind::kInvalidArgument, f->name, " is ", number_text(v), "; it must be ",
             range_text(*f));
      }
    }
    if (then) then(node);
  };
}

}  // namespace detail

std::string number_text(double v) {
  // Whole numbers without a fraction, for float fields too: "from 0 to 1".
  if (std::abs(v) < 9e15 && v == std::floor(v)) return std::to_string(static_cast<int64_t>(v));
  return json(v).dump();
}

std::string range_text(const FieldInfo& field) {
  if (field.min && field.max) {
    return "from " + number_text(*field.min) + " to " + number_text(*field.max);
  }
  if (field.min) return "at least " + number_text(*field.min);
  if (field.max) return "at most " + number_text(*field.max);
  return "any " + field.type_name;
}

void validate(const Object& node) {
  const NodeTypeInfo& info = node.type_info();
  if (info.validate) info.validate(node);
}

void set_field(Object& node, std::string_view name, const json& value) {
  const NodeTypeInfo& info = node.type_info();
  const FieldInfo* f = info.field(name);
  TT_ICHECK(f, info.key, " has no field '", name, "'");
  class NoNodes final : public LoadContext {
   public:
    ObjectPtr node(int64_t) override {
      fail(ErrorKind::kInvalidArgument, "a node reference is not a value here");
    }
  } loader;
  // Checked on a scratch node first, so that a refused value changes nothing.
  std::shared_ptr<Object> scratch = info.create();
  f->load(*scratch, value, loader);
  if ((f->min || f->max) && f->number) {
    double v = f->number(*scratch);
    if (!in_range(*f, v)) {
      fail(ErrorKind::kInvalidArgument, number_text(v), " is out of range: it must be ",
           range_text(*f));
    }
  }
  f->load(node, value, loader);
}

json field_value(const Object& node, const FieldInfo& field) {
  // References have no value outside a graph: refuse them, naming the field.
  class NoReferences final : public SaveContext {
   public:
    int64_t ref(const ObjectPtr& child) override {
      if (!child) return -1;
      fail(ErrorKind::kInvalidArgument, "field '", field, "' of ", type, " holds a node reference");
    }
    std::string_view type, field;
  } saver;
  saver.type = node.type_info().key;
  saver.field = field.name;
  return field.save(node, saver);
}

json field_values(const Object& node) {
  json out = json::object();
  for (const auto& f : node.type_info().fields) out[f.name] = field_value(node, f);
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
  detail::JsonText reader(text);
  json value;
  if (!reader.read_json(value) || !reader.at_end()) {
    fail(ErrorKind::kParse, "invalid ", what, " ", reader.error());
  }
  return value;
}

namespace detail {
json parse_json_value(std::string_view text) { return parse_json_text(text); }
}  // namespace detail

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
