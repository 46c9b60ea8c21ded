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
