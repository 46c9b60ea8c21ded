/// \file
/// Immutable, reflected IR nodes with shared ownership.
///
/// Every node type derives from Object and declares its fields exactly once,
/// in a static `declare(FieldList<Self>&)` function. That single list drives
/// JSON save and load, structural equality, structural hash, printing and deep
/// copy (see serialize.h and structural.h), so no operation can forget a field.
///
/// Nodes are built mutable (make_node), filled in, and from then on only
/// reached through `Ref<const T>`: nobody can change a node another part of
/// the program holds. Passes build new nodes and share the unchanged ones.
///
/// Field semantics that the declaration carries:
///  - kBinds: the field defines the variable(s) it holds; structural equality
///    maps them between the two sides instead of comparing them, so two
///    programs that differ only in bound variable names are equal.
///  - kIgnoredByEquality: saved and printed, not compared or hashed.
///  - kName: a variable's name; part of a free variable's identity only.
///  - kAddedLater: a field added after graphs were first saved: a saved node
///    without it loads with the field's default, and the field adds to the
///    structural hash only when it differs from the default, so hashes (and
///    the keys made from them) of graphs that do not use it stay as they were.
/// A node type marked "variable" (NodeTypeInfo::is_variable) is matched
/// through those bindings when bound, and by its fields when free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensortune/support/error.h"

namespace tensortune {

struct NodeTypeInfo;

/// Base of every IR node.
class Object {
 public:
  virtual ~Object() = default;
  /// The registered description of this node's type.
  virtual const NodeTypeInfo& type_info() const = 0;
  /// The stable type key, such as "ir.Add".
  std::string_view type_key() const;
};

using ObjectPtr = std::shared_ptr<const Object>;

/// Tag base so field traits can recognise every Ref<T> (and subclasses like Expr).
struct RefBase {};

/// A shared, immutable reference to a node of type T (or a subclass); may be null.
template <class T>
class Ref : public RefBase {
 public:
  using NodeType = T;
  Ref() = default;
  Ref(std::nullptr_t) {}  // NOLINT: null is a valid, implicit Ref
  explicit Ref(std::shared_ptr<const T> ptr) : ptr_(std::move(ptr)) {}
  template <class U, class = std::enable_if_t<std::is_base_of_v<T, U>>>
  Ref(const Ref<U>& other) : ptr_(other.ptr()) {}  // NOLINT: upcast

  const T* get() const { return ptr_.get(); }
  const T* operator->() const { return ptr_.get(); }
  const T& operator*() const { return *ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  const std::shared_ptr<const T>& ptr() const { return ptr_; }

  /// True if both refer to the very same node (identity, not structure).
  template <class U>
  bool same_as(const Ref<U>& other) const {
    return static_cast<const Object*>(get()) == static_cast<const Object*>(other.get());
  }
  /// This node as a U, or null if it is not one.
  template <class U>
  Ref<U> as() const {
    return Ref<U>(std::dynamic_pointer_cast<const U>(ptr_));
  }

 protected:
  std::shared_ptr<const T> ptr_;
};

/// Allocates a node for filling in; wrap it in a Ref once complete.
template <class T, class... Args>
std::shared_ptr<T> make_node(Args&&... args) {
  return std::make_shared<T>(std::forward<Args>(args)...);
}

/// Field flags, see the file comment.
enum FieldFlags : uint32_t {
  kFieldPlain = 0,
  kBinds = 1u << 0,
  kIgnoredByEquality = 1u << 1,
  kName = 1u << 2,        ///< a variable's name: compared when the variable is free, not when bound
  kAddedLater = 1u << 3,  ///< may be missing from a saved node; hashed only when not default
};

// Type-erased services the reflected field operations call back into. They
// are implemented by serialize.cc and structural.cc; node code never sees them.
class SaveContext;
class LoadContext;
class JsonReader;
class EqualContext;
class HashContext;
class CopyContext;
class PrintContext;

/// One declared field of a node type, with every operation on it.
struct FieldInfo {
  std::string name;
  uint32_t flags = kFieldPlain;
  std::string type_name;  ///< for error messages, e.g. "int", "list of ir.Expr"
  size_t offset = 0;      ///< where the member lies in the node, with its size and
  size_t size = 0;        ///< alignment: lets a test prove that every member is
  size_t align = 0;       ///< declared (see tests/object/registry_test.cc)
  std::function<nlohmann::json(const Object&, SaveContext&)> save;
  std::function<void(Object&, const nlohmann::json&, LoadContext&)> load;
  /// save as JSON text appended to `out`: the same value, without a DOM (save_string).
  std::function<void(const Object&, std::string&, SaveContext&)> write;
  /// load from JSON text (load_string); false means "take the checked DOM path".
  std::function<bool(Object&, JsonReader&, LoadContext&)> read;
  std::function<bool(const Object&, const Object&, EqualContext&)> equal;
  std::function<uint64_t(const Object&, HashContext&)> hash;
  std::function<void(Object&, const Object&, CopyContext&)> copy;
  std::function<void(const Object&, PrintContext&)> print;
  /// Calls `visit` on every node directly held by this field, in order.
  std::function<void(const Object&, const std::function<void(const ObjectPtr&)>&)> children;
  /// True when the field holds its type's default value (kAddedLater fields).
  std::function<bool(const Object&)> is_default;
  /// The field's value as a number, for range checks; empty for fields that
  /// are not numbers (strings, lists, nodes, bools).
  std::function<double(const Object&)> number;

  /// Option sets (FieldList::option, FieldList::range): a user-facing field
  /// has a flag name (without "--") and one line of help, and a numeric one
  /// may have an inclusive range, checked whenever a node of the type is
  /// loaded or validate()d. Command lines are generated from these.
  std::string flag;
  std::string help;
  std::optional<double> min, max;
};

/// The registered description of a node type.
struct NodeTypeInfo {
  std::string key;
  std::vector<FieldInfo> fields;
  bool is_variable = false;
  size_t size = 0;                                  ///< sizeof the node type
  size_t align = 0;                                 ///< alignof the node type
  std::function<std::shared_ptr<Object>()> create;  ///< a blank node, for load and copy
  std::function<void(const Object&)> validate;      ///< checks a loaded node; may be empty
  /// How save_string writes a node of this type: each piece's text, then the
  /// value of its field (none after the last piece). The keys, "type" among
  /// them, come in the order a saved JSON object lists them (bytewise, as
  /// nlohmann::json's std::map keeps them), so save_string writes the bytes of
  /// save_json(...).dump() without sorting or escaping keys per node. The first
  /// fields.size() pieces name the fields in that order. Set by NodeRegistry::add.
  struct SavedPiece {
    std::string text;  ///< e.g. `{"a":` or `,"type":"ir.Add"}`
    int field = -1;    ///< index into `fields`, or -1 after the last piece
  };
  std::vector<SavedPiece> saved_layout;
  const FieldInfo* field(std::string_view name) const;
};

/// All registered node types, by key. Registration happens at static
/// initialisation (TT_REGISTER_NODE); lookups afterwards are read-only.
class NodeRegistry {
 public:
  static NodeRegistry& global();
  /// Registers a type; a duplicate key is an internal error.
  void add(std::unique_ptr<NodeTypeInfo> info);
  /// The type with `key`, or nullptr.
  const NodeTypeInfo* find(std::string_view key) const;
  /// The type with `key`; an unknown key is a kNotFound error listing the known ones.
  const NodeTypeInfo& get(std::string_view key) const;
  /// Every registered key, sorted.
  std::vector<std::string> keys() const;

 private:
  std::vector<std::unique_ptr<NodeTypeInfo>> types_;
};

template <class Node>
class FieldList;

namespace detail {
template <class Node>
const NodeTypeInfo& node_type_info() {
  static const NodeTypeInfo& info = NodeRegistry::global().get(Node::kTypeKey);
  return info;
}
}  // namespace detail

}  // namespace tensortune

/// Inside a node struct: its type key and the type_info override.
#define TT_NODE(Type, key_literal)                               \
 public:                                                         \
  static constexpr const char* kTypeKey = key_literal;           \
  const ::tensortune::NodeTypeInfo& type_info() const override { \
    return ::tensortune::detail::node_type_info<Type>();         \
  }

#define TT_CONCAT_INNER(a, b) a##b
#define TT_CONCAT(a, b) TT_CONCAT_INNER(a, b)

/// In one .cc file: registers a node type that has `static void declare(FieldList<Type>&)`.
#define TT_REGISTER_NODE(Type)                                    \
  static const bool TT_CONCAT(tt_node_registered_, __COUNTER__) = \
      ::tensortune::detail::register_node<Type>()

#include "tensortune/object/field_traits.h"  // IWYU pragma: export
