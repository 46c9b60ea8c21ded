// The object system on small node types defined here, independent of the IR.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"

namespace tensortune {
namespace {

struct ToyNode : Object {};
using Toy = Ref<ToyNode>;

struct ToyVarNode : ToyNode {
  std::string name;
  int64_t bits = 32;
  TT_NODE(ToyVarNode, "test.ToyVar")
  static void declare(FieldList<ToyVarNode>& f) {
    f.def("name", &ToyVarNode::name, kName).def("bits", &ToyVarNode::bits).variable();
  }
};

struct ToyAddNode : ToyNode {
  Toy a, b;
  TT_NODE(ToyAddNode, "test.ToyAdd")
  static void declare(FieldList<ToyAddNode>& f) {
    f.def("a", &ToyAddNode::a).def("b", &ToyAddNode::b);
  }
};

struct ToyLetNode : ToyNode {
  Toy var;
  std::vector<double> values;
  Toy body;
  TT_NODE(ToyLetNode, "test.ToyLet")
  static void declare(FieldList<ToyLetNode>& f) {
    f.def("var", &ToyLetNode::var, kBinds)
        .def("values", &ToyLetNode::values)
        .def("body", &ToyLetNode::body);
  }
};

TT_REGISTER_NODE(ToyVarNode);
TT_REGISTER_NODE(ToyAddNode);
TT_REGISTER_NODE(ToyLetNode);

Toy var(std::string name) {
  auto n = make_node<ToyVarNode>();
  n->name = std::move(name);
  return Toy(n);
}
Toy add(Toy a, Toy b) {
  auto n = make_node<ToyAddNode>();
  n->a = std::move(a);
  n->b = std::move(b);
  return Toy(n);
}
Toy let(Toy v, Toy body) {
  auto n = make_node<ToyLetNode>();
  n->var = std::move(v);
  n->values = {1.5, -0.0};
  n->body = std::move(body);
  return Toy(n);
}

TEST(ToyNodes, SharingSurvivesRoundTrip) {
  Toy x = var("x");
  Toy shared = add(x, x);
  Toy root = add(shared, shared);
  auto doc = save_json(root);
  EXPECT_EQ(doc["nodes"].size(), 3u);
  auto back = load_json_as<Toy>(doc);
  auto top = back.as<ToyAddNode>();
  ASSERT_TRUE(top);
  EXPECT_TRUE(top->a.same_as(top->b));
  EXPECT_TRUE(structural_equal(root, back));
  EXPECT_EQ(structural_hash(root), structural_hash(back));
}

TEST(ToyNodes, BoundVariablesMatchUpToRenaming) {
  Toy x = var("x"), y = var("y"), free = var("z");
  Toy a = let(x, add(x, free));
  Toy b = let(y, add(y, free));
  EXPECT_TRUE(structural_equal(a, b));
  EXPECT_EQ(structural_hash(a), structural_hash(b));
  Toy c = let(y, add(free, y));
  EXPECT_FALSE(structural_equal(a, c));
  auto diff = first_difference(a, c);
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->substr(0, 11), "root.body.a") << *diff;
  // Free variables are compared by name.
  EXPECT_FALSE(structural_equal(add(var("p"), var("q")), add(var("p"), var("r"))));
  EXPECT_TRUE(structural_equal(add(var("p"), var("q")), add(var("p"), var("q"))));
}

TEST(ToyNodes, DeepCopySharesNothing) {
  Toy x = var("x");
  Toy root = let(x, add(x, x));
  Toy copy = deep_copy(root);
  EXPECT_FALSE(copy.same_as(root));
  EXPECT_TRUE(structural_equal(root, copy));
  auto let_copy = copy.as<ToyLetNode>();
  auto body = let_copy->body.as<ToyAddNode>();
  EXPECT_TRUE(body->a.same_as(let_copy->var));
}

TEST(ToyNodes, BadJsonNamesTypeAndField) {
  auto good = save_json(add(var("x"), var("y")));
  auto bad = good;
  bad["nodes"][2]["c"] = 1;
  EXPECT_TT_ERROR(load_json(bad), kParse, "unknown field 'c'; fields of test.ToyAdd are: a, b");
  bad = good;
  bad["nodes"][2].erase("b");
  EXPECT_TT_ERROR(load_json(bad), kParse, "node 2 (test.ToyAdd): missing field 'b'");
  bad = good;
  bad["nodes"][2]["a"] = 2;
  EXPECT_TT_ERROR(load_json(bad), kParse, "not an earlier node");
  bad = good;
  bad["nodes"][2]["a"] = "x";
  EXPECT_TT_ERROR(load_json(bad), kTypeMismatch, "field 'a'");
  bad = good;
  bad["nodes"][0]["type"] = "test.Nope";
  EXPECT_TT_ERROR(load_json(bad), kNotFound, "unknown type key 'test.Nope'");
  bad = good;
  bad["nodes"][0]["bits"] = 1.5;
  EXPECT_TT_ERROR(load_json(bad), kTypeMismatch, "node 0 (test.ToyVar), field 'bits'");
  EXPECT_TT_ERROR(load_string("{\"a\": }"), kParse, "byte offset 7");
}

}  // namespace
}  // namespace tensortune
