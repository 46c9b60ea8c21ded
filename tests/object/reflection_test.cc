// Reflection helpers beside save and load: optional fields, the saved values
// of a node's fields, and the sharing-aware comparison of two graphs.
#include <gtest/gtest.h>

#include <optional>

#include "common/test_util.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"

namespace tensortune {
namespace {

struct LeafNode : Object {
  std::string name;
  std::optional<int64_t> size;
  std::optional<std::string> note;
  TT_NODE(LeafNode, "test.ReflectLeaf")
  static void declare(FieldList<LeafNode>& f) {
    f.def("name", &LeafNode::name).def("size", &LeafNode::size).def("note", &LeafNode::note);
  }
};
using Leaf = Ref<LeafNode>;

struct PairNode : Object {
  Leaf a, b;
  TT_NODE(PairNode, "test.ReflectPair")
  static void declare(FieldList<PairNode>& f) { f.def("a", &PairNode::a).def("b", &PairNode::b); }
};
using Pair = Ref<PairNode>;

// An option set as a tool declares one: ranges, flags, and a nested set held by value.
struct InnerOptions : Object {
  double share = 0.5;
  TT_NODE(InnerOptions, "test.InnerOptions")
  static void declare(FieldList<InnerOptions>& f) {
    f.def("share", &InnerOptions::share).option("share", "a share").range(0, 1);
  }
};

struct OuterOptions : Object {
  int count = 3;
  std::string label = "x";
  InnerOptions inner;
  TT_NODE(OuterOptions, "test.OuterOptions")
  static void declare(FieldList<OuterOptions>& f) {
    f.def("count", &OuterOptions::count)
        .option("count", "how many")
        .range(1, 10)
        .def("label", &OuterOptions::label)
        .def("inner", &OuterOptions::inner);
  }
};

TT_REGISTER_NODE(LeafNode);
TT_REGISTER_NODE(PairNode);
TT_REGISTER_NODE(InnerOptions);
TT_REGISTER_NODE(OuterOptions);

TEST(OptionNodes, RangesAreCheckedOnLoadAndBySetField) {
  auto options = make_node<OuterOptions>();
  options->inner.share = 0.25;
  Ref<OuterOptions> saved(options);
  std::string text = save_string(saved);
  EXPECT_NE(text.find(R"("inner":{"share":0.25,"type":"test.InnerOptions"})"), std::string::npos)
      << text;
  Ref<OuterOptions> back(std::dynamic_pointer_cast<const OuterOptions>(load_string(text)));
  EXPECT_TRUE(structural_equal(back, saved));
  EXPECT_EQ(back->inner.share, 0.25);
  options->inner.share = 0.5;
  EXPECT_FALSE(structural_equal(back, saved));
  EXPECT_NE(structural_hash(back), structural_hash(saved));

  // A saved value out of range is refused by both loaders, naming the field and its range.
  std::string bad_count = text;
  bad_count.replace(bad_count.find("\"count\":3"), 9, "\"count\":0");
  EXPECT_TT_ERROR(load_string(bad_count), kInvalidArgument, "count is 0; it must be from 1 to 10");
  EXPECT_TT_ERROR(load_json(nlohmann::json::parse(bad_count)), kInvalidArgument,
                  "count is 0; it must be from 1 to 10");
  std::string bad_share = text;
  bad_share.replace(bad_share.find("0.25"), 4, "1.5");
  EXPECT_TT_ERROR(load_string(bad_share), kInvalidArgument, "share is 1.5; it must be from 0 to 1");

  OuterOptions set;
  set_field(set, "count", 7);
  EXPECT_EQ(set.count, 7);
  EXPECT_TT_ERROR(set_field(set, "count", 11), kInvalidArgument,
                  "11 is out of range: it must be from 1 to 10");
  EXPECT_TT_ERROR(set_field(set, "count", "seven"), kTypeMismatch, "expected int");
  EXPECT_EQ(set.count, 7);
  set.count = 0;  // built in code: validate() is the same check
  EXPECT_TT_ERROR(validate(set), kInvalidArgument, "count is 0");
  const FieldInfo* count = set.type_info().field("count");
  EXPECT_EQ(count->flag, "count");
  EXPECT_EQ(count->help, "how many");
  EXPECT_TRUE(set.type_info().field("label")->flag.empty());
}

Leaf leaf(std::string name, std::optional<int64_t> size = std::nullopt) {
  auto n = make_node<LeafNode>();
  n->name = std::move(name);
  n->size = size;
  return Leaf(n);
}
Pair pair(Leaf a, Leaf b) {
  auto n = make_node<PairNode>();
  n->a = std::move(a);
  n->b = std::move(b);
  return Pair(n);
}

TEST(Reflection, OptionalFieldsRoundTripEmptyAndSet) {
  Leaf empty = leaf("x");
  Leaf zero = leaf("x", 0);
  Leaf set = leaf("x", 12);
  EXPECT_EQ(save_json(empty)["nodes"][0]["size"], nullptr);
  EXPECT_EQ(save_json(zero)["nodes"][0]["size"], 0);
  // Empty and zero are different values: equality and hash tell them apart.
  EXPECT_FALSE(structural_equal(empty, zero));
  EXPECT_NE(structural_hash(empty), structural_hash(zero));
  for (const Leaf& l : {empty, zero, set}) {
    Leaf back = load_json_as<Leaf>(save_json(l));
    EXPECT_TRUE(structural_equal(back, l)) << save_string(l);
    Leaf text = Leaf(std::dynamic_pointer_cast<const LeafNode>(load_string(save_string(l))));
    ASSERT_TRUE(text);
    EXPECT_EQ(text->size, l->size);
    EXPECT_EQ(text->note, l->note);
  }
  EXPECT_TT_ERROR(
      load_string(R"({"format":"tensortune.graph","version":1,"root":0,"nodes":[)"
                  R"({"type":"test.ReflectLeaf","name":"x","size":"big","note":null}]})"),
      kTypeMismatch, "field 'size': expected integer");
}

TEST(Reflection, FieldValuesAreWhatAGraphSavesForTheNode) {
  auto n = make_node<LeafNode>(*leaf("w", 4));
  n->note = "hi";
  nlohmann::json values = field_values(*n);
  EXPECT_EQ(values, (nlohmann::json{{"name", "w"}, {"size", 4}, {"note", "hi"}}));
  nlohmann::json saved = save_json(Leaf(n))["nodes"][0];
  saved.erase("type");
  EXPECT_EQ(values, saved);
  // A reference only means something inside a whole graph.
  EXPECT_TT_ERROR(field_values(*pair(leaf("a"), leaf("b"))), kInvalidArgument,
                  "field 'a' of test.ReflectPair holds a node reference");
}

TEST(Reflection, SameSharingTellsASharedNodeFromTwoEqualOnes) {
  Leaf x = leaf("x");
  Pair shared = pair(x, x);
  Pair twins = pair(x, leaf("x"));
  // Structural equality cannot see the difference...
  EXPECT_TRUE(structural_equal(shared, twins));
  // ...sharing can, both ways round.
  EXPECT_FALSE(same_sharing(shared, twins));
  EXPECT_FALSE(same_sharing(twins, shared));
  EXPECT_TRUE(same_sharing(shared, shared));
  EXPECT_TRUE(same_sharing(twins, pair(leaf("x"), leaf("x"))));
  // What a save and load gives back is shared alike.
  EXPECT_TRUE(same_sharing(ObjectPtr(shared.ptr()), load_string(save_string(shared))));
  EXPECT_TRUE(same_sharing(ObjectPtr(twins.ptr()), load_string(save_string(twins))));
  EXPECT_FALSE(same_sharing(ObjectPtr(shared.ptr()), load_string(save_string(twins))));
  // A null where the other has a node differs.
  EXPECT_FALSE(same_sharing(pair(x, Leaf()), shared));
}

}  // namespace
}  // namespace tensortune
