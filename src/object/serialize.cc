#include "tensortune/object/serialize.h"

#include <unordered_map>

#include "tensortune/object/structural.h"
#include "tensortune/support/strings.h"

namespace tensortune {
namespace {

using json = nlohmann::json;
constexpr const char* kFormat = "tensortune.graph";
constexpr int kVersion = 1;

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
      fail(ErrorKind::kParse, where(info), ": missing field '", f.name, "' (", f.type_name, ")");
    }
    try {
      f.load(*node, *it, loader);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInternal) throw;
      fail(e.kind(), where(info), ", field '", f.name, "': ", e.what());
    }
  }
  if (info->validate) {
    try {
      info->validate(*node);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInternal) throw;
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

}  // namespace

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
      f.children(*node, [&](const ObjectPtr& child) { d = std::max(d, depth.at(child.get()) + 1); });
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

std::string save_string(const ObjectPtr& root, int indent) { return save_json(root).dump(indent); }

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

ObjectPtr load_string(std::string_view text) { return load_json(parse_json_text(text)); }

}  // namespace tensortune
