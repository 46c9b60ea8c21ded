/// \file
/// Structural equality, hashing, deep copy and printing, all driven by the
/// field declarations of object.h.
///
/// Equality compares types and declared fields recursively; variables defined
/// at a binding site (kBinds) are matched up to renaming, free variables by
/// their fields, names included. Identity is only a fast path. structural_hash
/// is consistent with it: equal graphs hash equal, in every process and run.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensortune/object/object.h"

namespace tensortune {

/// True if the two graphs are structurally equal (bound variables up to renaming).
bool structural_equal(const ObjectPtr& a, const ObjectPtr& b);

/// Like structural_equal, except that a free variable equals only itself (the
/// same node): what in-process rewrites need, where two distinct variables
/// may share a name. Bound variables still match up to renaming.
bool equal_with_free_vars_by_identity(const ObjectPtr& a, const ObjectPtr& b);

/// Where the graphs first differ, as a path like "root.body.b[2].value: 3 and 4";
/// std::nullopt when they are equal.
std::optional<std::string> first_difference(const ObjectPtr& a, const ObjectPtr& b);

/// A hash consistent with structural_equal; stable across processes and runs.
uint64_t structural_hash(const ObjectPtr& root);

/// A copy of the graph sharing no node with the original, sharing preserved inside it.
ObjectPtr deep_copy(const ObjectPtr& root);

/// Every node reachable from `root`, each once, children before parents.
std::vector<ObjectPtr> post_order(const ObjectPtr& root);

/// True if the two graphs share nodes alike: walking both in step, field by
/// field, meets a node of `a` again exactly where it meets the same node of
/// `b` again, so that a node shared by two parents in one is shared in the
/// other. Structural equality cannot tell a shared placeholder from two equal
/// ones (C = A.A^T from C = A.B^T with B equal to A); use the two together
/// to check that sharing survived a save, a load or a process boundary.
bool same_sharing(const ObjectPtr& a, const ObjectPtr& b);

/// A readable multi-line rendering; nodes used more than once are named %N and printed once.
std::string print_graph(const ObjectPtr& root);

template <class A, class B>
bool structural_equal(const Ref<A>& a, const Ref<B>& b) {
  return structural_equal(ObjectPtr(a.ptr()), ObjectPtr(b.ptr()));
}
template <class A, class B>
bool equal_with_free_vars_by_identity(const Ref<A>& a, const Ref<B>& b) {
  return equal_with_free_vars_by_identity(ObjectPtr(a.ptr()), ObjectPtr(b.ptr()));
}
template <class A, class B>
std::optional<std::string> first_difference(const Ref<A>& a, const Ref<B>& b) {
  return first_difference(ObjectPtr(a.ptr()), ObjectPtr(b.ptr()));
}
template <class T>
std::vector<ObjectPtr> post_order(const Ref<T>& root) {
  return post_order(ObjectPtr(root.ptr()));
}
template <class A, class B>
bool same_sharing(const Ref<A>& a, const Ref<B>& b) {
  return same_sharing(ObjectPtr(a.ptr()), ObjectPtr(b.ptr()));
}
template <class T>
uint64_t structural_hash(const Ref<T>& root) {
  return structural_hash(ObjectPtr(root.ptr()));
}
template <class T>
Ref<T> deep_copy(const Ref<T>& root) {
  return Ref<T>(std::static_pointer_cast<const T>(deep_copy(ObjectPtr(root.ptr()))));
}

}  // namespace tensortune
