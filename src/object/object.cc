#include "tensortune/object/object.h"

#include <algorithm>

#include "tensortune/support/strings.h"

namespace tensortune {

std::string_view Object::type_key() const { return type_info().key; }

const FieldInfo* NodeTypeInfo::field(std::string_view name) const {
  for (const auto& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

NodeRegistry& NodeRegistry::global() {
  static NodeRegistry registry;
  return registry;
}

void NodeRegistry::add(std::unique_ptr<NodeTypeInfo> info) {
  TT_ICHECK(find(info->key) == nullptr, "node type '", info->key, "' registered twice");
  // std::string's operator< compares bytewise, as the std::map of a json object does.
  std::vector<int> order(info->fields.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return info->fields[a].name < info->fields[b].name; });
  for (size_t i = 1; i < order.size(); ++i) {
    // A JSON object holds each key once: a second field of the same name would be lost.
    TT_ICHECK(info->fields[order[i - 1]].name != info->fields[order[i]].name, info->key,
              ": two fields called '", info->fields[order[i]].name, "'");
  }
  std::string text = "{";
  bool type_written = false;
  auto write_type = [&] {
    if (text != "{") text += ',';
    detail::append_json_string(text, "type");
    text += ':';
    detail::append_json_string(text, info->key);
    type_written = true;
  };
  for (int i : order) {
    if (!type_written && info->fields[i].name > std::string_view("type")) write_type();
    if (text != "{") text += ',';
    detail::append_json_string(text, info->fields[i].name);
    text += ':';
    info->saved_layout.push_back({std::move(text), i});
    text.clear();
  }
  if (!type_written) write_type();
  text += '}';
  info->saved_layout.push_back({std::move(text), -1});
  auto pos = std::lower_bound(types_.begin(), types_.end(), info->key,
                              [](const auto& t, const std::string& k) { return t->key < k; });
  types_.insert(pos, std::move(info));
}

const NodeTypeInfo* NodeRegistry::find(std::string_view key) const {
  auto pos = std::lower_bound(types_.begin(), types_.end(), key,
                              [](const auto& t, std::string_view k) { return t->key < k; });
  if (pos == types_.end() || (*pos)->key != key) return nullptr;
  return pos->get();
}

const NodeTypeInfo& NodeRegistry::get(std::string_view key) const {
  const NodeTypeInfo* info = find(key);
  if (!info) {
    fail(ErrorKind::kNotFound, "unknown node type '", key, "'; known types: ", join(keys(), ", "));
  }
  return *info;
}

std::vector<std::string> NodeRegistry::keys() const {
  std::vector<std::string> out;
  out.reserve(types_.size());
  for (const auto& t : types_) out.push_back(t->key);
  return out;
}

}  // namespace tensortune
