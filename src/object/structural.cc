#include "tensortune/object/structural.h"

#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "tensortune/support/hash.h"
#include "tensortune/support/strings.h"

namespace tensortune {
namespace {

struct PairHash {
  size_t operator()(const std::pair<const Object*, const Object*>& p) const {
    return hash_combine(reinterpret_cast<uintptr_t>(p.first),
                        reinterpret_cast<uintptr_t>(p.second));
  }
};

void for_each_child(const Object& node, const std::function<void(const ObjectPtr&)>& visit) {
  for (const auto& f : node.type_info().fields) f.children(node, visit);
}

class Equal final : public EqualContext {
 public:
  explicit Equal(bool want_path, bool free_vars_by_identity = false)
      : want_path_(want_path), free_vars_by_identity_(free_vars_by_identity) {}

  bool nodes(const ObjectPtr& a, const ObjectPtr& b) override {
    if (a.get() == b.get() && lhs_to_rhs_.empty()) return true;
    const NodeTypeInfo& info = a->type_info();
    if (&info != &b->type_info()) {
      differ("types " + info.key + " and " + b->type_info().key);
      return false;
    }
    if (info.is_variable) {
      auto mapped = lhs_to_rhs_.find(a.get());
      if (mapped != lhs_to_rhs_.end()) {
        if (mapped->second == b.get()) return true;
        differ("bound variables do not correspond");
        return false;
      }
      if (rhs_to_lhs_.count(b.get())) {
        differ("a free variable and a bound variable");
        return false;
      }
      if (free_vars_by_identity_) return a.get() == b.get();
      return fields(a, b, /*names=*/true);
    }
    if (memo_.count({a.get(), b.get()})) return true;
    if (!fields(a, b, /*names=*/true)) return false;
    memo_.insert({a.get(), b.get()});
    return true;
  }

  bool bind(const ObjectPtr& a, const ObjectPtr& b) override {
    const NodeTypeInfo& info = a->type_info();
    if (!info.is_variable) return nodes(a, b);
    if (&info != &b->type_info()) {
      differ("types " + info.key + " and " + b->type_info().key);
      return false;
    }
    auto mapped = lhs_to_rhs_.find(a.get());
    if (mapped != lhs_to_rhs_.end()) return mapped->second == b.get();
    if (rhs_to_lhs_.count(b.get())) {
      differ("variable bound twice on one side only");
      return false;
    }
    if (!fields(a, b, /*names=*/false)) return false;
    lhs_to_rhs_.emplace(a.get(), b.get());
    rhs_to_lhs_.emplace(b.get(), a.get());
    return true;
  }

  void push(std::string step) override { path_.push_back(std::move(step)); }
  void pop() override { path_.pop_back(); }
  void differ(std::string why) override {
    if (!want_path_ || difference_) return;
    std::string where = "root";
    for (const auto& step : path_) where += step.front() == '[' ? step : "." + step;
    difference_ = why.empty() ? where : where + ": " + why;
  }

  const std::optional<std::string>& difference() const { return difference_; }

 private:
  bool fields(const ObjectPtr& a, const ObjectPtr& b, bool names) {
    for (const auto& f : a->type_info().fields) {
      if (f.flags & kIgnoredByEquality) continue;
      if (!names && (f.flags & kName)) continue;
      push(f.name);
      bool same = f.equal(*a, *b, *this);
      if (!same) {
        if (want_path_ && !difference_) {
          std::ostringstream why;
          PrintLeaf printer(why);
          f.print(*a, printer);
          why << " and ";
          f.print(*b, printer);
          differ(why.str().size() < 200 ? why.str() : std::string());
        }
      }
      pop();
      if (!same) return false;
    }
    return true;
  }

  // Prints leaf values for difference reports; nodes are shown by type only.
  class PrintLeaf final : public PrintContext {
   public:
    explicit PrintLeaf(std::ostream& os) : os_(os) {}
    void node(const ObjectPtr& n) override { os_ << n->type_key() << "(...)"; }
    void text(std::string_view t) override { os_ << t; }

   private:
    std::ostream& os_;
  };

  bool want_path_;
  bool free_vars_by_identity_;
  std::vector<std::string> path_;
  std::optional<std::string> difference_;
  std::unordered_map<const Object*, const Object*> lhs_to_rhs_;
  std::unordered_map<const Object*, const Object*> rhs_to_lhs_;
  std::unordered_set<std::pair<const Object*, const Object*>, PairHash> memo_;
};

class Hasher final : public HashContext {
 public:
  uint64_t node(const ObjectPtr& n) override {
    const NodeTypeInfo& info = n->type_info();
    if (info.is_variable) {
      auto bound = var_index_.find(n.get());
      if (bound != var_index_.end()) return bound_hash(n, bound->second);
      return fields(n, hash_string(info.key), /*names=*/true);
    }
    auto memo = memo_.find(n.get());
    if (memo != memo_.end()) return memo->second;
    uint64_t h = fields(n, hash_string(info.key), /*names=*/true);
    memo_.emplace(n.get(), h);
    return h;
  }

  uint64_t bind(const ObjectPtr& n) override {
    if (!n->type_info().is_variable) return node(n);
    auto [it, inserted] = var_index_.emplace(n.get(), var_index_.size());
    return bound_hash(n, it->second);
  }

 private:
  uint64_t bound_hash(const ObjectPtr& n, uint64_t index) {
    return fields(n, hash_combine(0x626f756e64ULL, index), /*names=*/false);
  }
  uint64_t fields(const ObjectPtr& n, uint64_t seed, bool names) {
    uint64_t h = seed;
    for (const auto& f : n->type_info().fields) {
      if (f.flags & kIgnoredByEquality) continue;
      if (!names && (f.flags & kName)) continue;
      if ((f.flags & kAddedLater) && f.is_default(*n)) continue;
      h = hash_combine(h, f.hash(*n, *this));
    }
    return h;
  }

  std::unordered_map<const Object*, uint64_t> memo_;
  std::unordered_map<const Object*, uint64_t> var_index_;
};

class Copier final : public CopyContext {
 public:
  ObjectPtr node(const ObjectPtr& n) override {
    auto it = copies_.find(n.get());
    if (it != copies_.end()) return it->second;
    const NodeTypeInfo& info = n->type_info();
    std::shared_ptr<Object> copy = info.create();
    for (const auto& f : info.fields) f.copy(*copy, *n, *this);
    copies_.emplace(n.get(), copy);
    return copy;
  }

 private:
  std::unordered_map<const Object*, ObjectPtr> copies_;
};

}  // namespace

bool structural_equal(const ObjectPtr& a, const ObjectPtr& b) {
  if (!a || !b) return !a && !b;
  Equal eq(/*want_path=*/false);
  return eq.nodes(a, b);
}

bool equal_with_free_vars_by_identity(const ObjectPtr& a, const ObjectPtr& b) {
  if (!a || !b) return !a && !b;
  Equal eq(/*want_path=*/false, /*free_vars_by_identity=*/true);
  return eq.nodes(a, b);
}

std::optional<std::string> first_difference(const ObjectPtr& a, const ObjectPtr& b) {
  if (!a || !b) {
    if (!a && !b) return std::nullopt;
    return std::string("root: one side is null");
  }
  Equal eq(/*want_path=*/true);
  if (eq.nodes(a, b)) return std::nullopt;
  return eq.difference().value_or("root");
}

uint64_t structural_hash(const ObjectPtr& root) {
  if (!root) return 0;
  Hasher h;
  return h.node(root);
}

ObjectPtr deep_copy(const ObjectPtr& root) {
  if (!root) return nullptr;
  Copier c;
  return c.node(root);
}

bool same_sharing(const ObjectPtr& a, const ObjectPtr& b) {
  // A bijection between the nodes met so far; iterative, like post_order.
  std::unordered_map<const Object*, const Object*> a_to_b, b_to_a;
  std::vector<std::pair<const Object*, const Object*>> pending = {{a.get(), b.get()}};
  while (!pending.empty()) {
    auto [x, y] = pending.back();
    pending.pop_back();
    if (!x || !y) {
      if (x || y) return false;
      continue;
    }
    auto fx = a_to_b.find(x);
    auto fy = b_to_a.find(y);
    if (fx != a_to_b.end() || fy != b_to_a.end()) {
      // Met before: it must be met again as the same pair.
      if (fx == a_to_b.end() || fy == b_to_a.end() || fx->second != y || fy->second != x) {
        return false;
      }
      continue;
    }
    if (&x->type_info() != &y->type_info()) return false;
    a_to_b.emplace(x, y);
    b_to_a.emplace(y, x);
    std::vector<const Object*> xs, ys;
    for_each_child(*x, [&](const ObjectPtr& c) { xs.push_back(c.get()); });
    for_each_child(*y, [&](const ObjectPtr& c) { ys.push_back(c.get()); });
    if (xs.size() != ys.size()) return false;
    for (size_t i = xs.size(); i-- > 0;) pending.emplace_back(xs[i], ys[i]);
  }
  return true;
}

std::vector<ObjectPtr> post_order(const ObjectPtr& root) {
  std::vector<ObjectPtr> order;
  if (!root) return order;
  // Iterative, so deep graphs cannot overflow the stack here.
  struct Frame {
    ObjectPtr node;
    std::vector<ObjectPtr> children;
    size_t next = 0;
  };
  std::unordered_set<const Object*> done;
  std::unordered_set<const Object*> open;
  std::vector<Frame> stack;
  auto enter = [&](const ObjectPtr& n) {
    Frame frame{n, {}, 0};
    for_each_child(*n, [&](const ObjectPtr& c) { frame.children.push_back(c); });
    open.insert(n.get());
    stack.push_back(std::move(frame));
  };
  enter(root);
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next < top.children.size()) {
      ObjectPtr child = top.children[top.next++];
      if (done.count(child.get())) continue;
      TT_ICHECK(!open.count(child.get()), "cycle in node graph at ", child->type_key());
      enter(child);
      continue;
    }
    open.erase(top.node.get());
    done.insert(top.node.get());
    order.push_back(std::move(top.node));
    stack.pop_back();
  }
  return order;
}

namespace {

class GraphPrinter final : public PrintContext {
 public:
  GraphPrinter(std::ostream& os, const std::unordered_map<const Object*, int>& names)
      : os_(os), names_(names) {}
  void node(const ObjectPtr& n) override {
    auto it = names_.find(n.get());
    if (it != names_.end()) {
      os_ << "%" << it->second;
      return;
    }
    body(*n);
  }
  void text(std::string_view t) override { os_ << t; }
  void body(const Object& n) {
    os_ << n.type_key() << "(";
    bool first = true;
    for (const auto& f : n.type_info().fields) {
      if (!first) os_ << ", ";
      first = false;
      os_ << f.name << "=";
      f.print(n, *this);
    }
    os_ << ")";
  }

 private:
  std::ostream& os_;
  const std::unordered_map<const Object*, int>& names_;
};

}  // namespace

std::string print_graph(const ObjectPtr& root) {
  if (!root) return "null\n";
  std::vector<ObjectPtr> order = post_order(root);
  std::unordered_map<const Object*, int> uses;
  for (const auto& n : order) {
    for_each_child(*n, [&](const ObjectPtr& c) { ++uses[c.get()]; });
  }
  std::unordered_map<const Object*, int> names;
  std::ostringstream os;
  GraphPrinter printer(os, names);
  for (const auto& n : order) {
    if (n == root || uses[n.get()] < 2) continue;
    int id = static_cast<int>(names.size());
    os << "%" << id << " = ";
    printer.body(*n);
    os << "\n";
    names.emplace(n.get(), id);
  }
  printer.body(*root);
  os << "\n";
  return os.str();
}

}  // namespace tensortune
