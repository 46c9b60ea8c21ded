// Every registered node type, enumerated from the registry: each has a sample
// that round-trips equal through save/load, and each declares every member it
// has (a member left out of `declare` leaves a hole in the field layout, which
// this test finds, so a new node type whose fields are not all declared fails).
#include <gtest/gtest.h>

#include <algorithm>

#include "common/node_samples.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"

namespace tensortune {
namespace {

TEST(Registry, EveryNodeTypeHasASampleThatRoundTrips) {
  const auto& samples = testing::node_samples();
  for (const auto& key : NodeRegistry::global().keys()) {
    if (key.rfind("test.", 0) == 0) continue;  // toy types of toy_nodes_test.cc check themselves
    auto it = samples.find(key);
    ASSERT_NE(it, samples.end()) << "node type " << key
                                 << " has no sample: add one to tests/common/node_samples.cc";
    ObjectPtr sample = it->second();
    ASSERT_TRUE(sample);
    ASSERT_EQ(sample->type_key(), key);
    std::string text = save_string(sample);
    ObjectPtr loaded = load_string(text);
    auto diff = first_difference(sample, loaded);
    EXPECT_FALSE(diff) << key << ": " << *diff;
    EXPECT_EQ(structural_hash(sample), structural_hash(loaded)) << key;
    EXPECT_EQ(save_string(loaded), text) << key;
    ObjectPtr copy = deep_copy(sample);
    EXPECT_TRUE(structural_equal(sample, copy)) << key;
    EXPECT_NE(copy.get(), sample.get());
  }
}

TEST(Registry, EveryMemberOfEveryNodeTypeIsDeclared) {
  for (const auto& key : NodeRegistry::global().keys()) {
    const NodeTypeInfo& info = NodeRegistry::global().get(key);
    std::vector<const FieldInfo*> fields;
    for (const auto& f : info.fields) fields.push_back(&f);
    std::sort(fields.begin(), fields.end(),
              [](const FieldInfo* a, const FieldInfo* b) { return a->offset < b->offset; });
    // Members start right after Object's own (its vtable pointer).
    size_t end = sizeof(void*);
    for (const FieldInfo* f : fields) {
      ASSERT_GE(f->offset, end) << key << ": field '" << f->name << "' overlaps another";
      EXPECT_LT(f->offset - end, f->align)
          << key << ": " << (f->offset - end) << " undeclared byte(s) before field '" << f->name
          << "' — is a member missing from declare()?";
      end = f->offset + f->size;
    }
    EXPECT_LT(info.size - end, info.align)
        << key << ": " << (info.size - end)
        << " undeclared byte(s) after the last field — is a member missing from declare()?";
  }
}

}  // namespace
}  // namespace tensortune
