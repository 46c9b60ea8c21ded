// Targets: the string and JSON forms, equality with hosts, compatible(),
// native resolution, error messages and hardware parameters.
#include "tensortune/ir/target.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>
#include <set>
#include <sstream>

#include "common/test_util.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/strings.h"

namespace tensortune::ir {
namespace {

using json = nlohmann::json;

TEST(Target, ParseGivesCanonicalString) {
  Target t = Target::parse("c  -num-cores=4 -mattr=fma,avx2,fma   -cflags=\"-O3 -ffast-math\"");
  EXPECT_EQ(t->kind, "c");
  EXPECT_EQ(t.str(), "c -cflags=\"-O3 -ffast-math\" -mattr=avx2,fma -num-cores=4");
  EXPECT_EQ(t->attr<int64_t>("num-cores"), 4);
  EXPECT_EQ(t->attr<int64_t>("-num-cores"), 4);
  EXPECT_EQ(t->attr<std::vector<std::string>>("mattr"), (std::vector<std::string>{"avx2", "fma"}));
  EXPECT_EQ(t->attr<std::string>("cflags"), "-O3 -ffast-math");
  // Unset attributes read as their defaults.
  EXPECT_EQ(t->attr<int64_t>("cache-line"), 64);
  EXPECT_EQ(t->attr<std::string>("compiler"), "cc");
  EXPECT_FALSE(t->has_attr("cache-line"));
  EXPECT_TRUE(t->has_attr("-mattr"));
}

TEST(Target, ParseOfCanonicalIsEqual) {
  for (const char* text :
       {"c", "c -mcpu=skylake -mattr=avx512f,avx2 -vector-width=32 -l2-cache=2097152",
        "c -cflags=\"\" -compiler=\"/opt/my cc/bin/gcc\"",
        "c -mcpu=\"Intel(R) Xeon(R) \\\"Gold\\\" 6148\"", "cuda -arch=sm_86 -num-sms=84",
        "cuda -arch=sm_90a -host=\"c -mattr=avx2 -cflags=\\\"-O2 -g\\\"\"", "cuda -host=c"}) {
    Target t = Target::parse(text);
    Target back = Target::parse(t.str());
    EXPECT_TRUE(back == t) << text << " -> " << t.str() << " -> " << back.str();
    EXPECT_EQ(back.str(), t.str());
    EXPECT_EQ(structural_hash(back), structural_hash(t)) << text;
  }
  Target nested = Target::parse("cuda -host=\"c -cflags=\\\"-O2 -g\\\"\"");
  EXPECT_EQ(nested.host()->attr<std::string>("cflags"), "-O2 -g");
}

TEST(Target, EqualMeaningIsEqualValue) {
  // Attribute order, duplicate features and explicit defaults do not matter.
  EXPECT_TRUE(Target::parse("c -mattr=avx2,fma -num-cores=4") ==
              Target::parse("c -num-cores=4 -mattr=fma,avx2,fma"));
  Target with_default = Target::parse("c -cache-line=64 -mcpu=generic -cflags=-O3");
  EXPECT_TRUE(with_default == Target::parse("c"));
  EXPECT_EQ(with_default.str(), "c");
  EXPECT_FALSE(Target::parse("c -num-cores=4") == Target::parse("c -num-cores=8"));
  EXPECT_FALSE(Target::parse("c") == Target::parse("cuda"));
  EXPECT_TRUE(Target() == Target());
  EXPECT_FALSE(Target() == Target::parse("c"));
}

TEST(Target, JsonConfigRoundTrip) {
  Target t = Target::parse(
      "cuda -arch=sm_89 -max-shared-memory-per-block=101376 "
      "-host=\"c -mattr=avx2,fma -num-cores=16\"");
  json config = t.to_json();
  EXPECT_EQ(config["kind"], "cuda");
  EXPECT_EQ(config["arch"], "sm_89");
  EXPECT_EQ(config["host"]["mattr"], json({"avx2", "fma"}));
  EXPECT_EQ(config["host"]["num-cores"], 16);
  Target back = Target::from_json(json::parse(config.dump()));
  EXPECT_TRUE(back == t) << back.str();
  // A config may also be a target string, and keys may carry the '-'.
  EXPECT_TRUE(Target::from_json(t.str()) == t);
  Target dashed =
      Target::from_json({{"kind", "c"}, {"-num-cores", 16}, {"mattr", {"fma", "avx2"}}});
  EXPECT_TRUE(dashed == t.host());
  EXPECT_TRUE(Target::make("c", {{"num-cores", 16}, {"mattr", {"avx2", "fma"}}}) == t.host());
}

TEST(Target, SaveLoadRoundTrip) {
  Target t = Target::parse("cuda -arch=sm_80 -num-sms=108 -host=\"c -mattr=avx2 -num-cores=8\"");
  std::string text = save_string(t);
  Target back = load_json_as<Target>(parse_json_text(text));
  EXPECT_FALSE(back.same_as(t));
  EXPECT_FALSE(back.host().same_as(t.host()));
  EXPECT_TRUE(back == t);
  EXPECT_EQ(back.str(), t.str());
  EXPECT_EQ(structural_hash(back), structural_hash(t));
  EXPECT_EQ(save_string(back), text);
}

// Other nodes (a task, a record) hold targets and hardware parameters as fields.
struct TargetHolderNode : Object {
  Target target;
  HardwareParams hardware;
  TT_NODE(TargetHolderNode, "test.TargetHolder")
  static void declare(FieldList<TargetHolderNode>& f) {
    f.def("target", &TargetHolderNode::target).def("hardware", &TargetHolderNode::hardware);
  }
};
TT_REGISTER_NODE(TargetHolderNode);

TEST(Target, UsableAsAFieldOfAnotherNode) {
  auto holder = make_node<TargetHolderNode>();
  holder->target = Target::parse("cuda -arch=sm_86 -host=\"c -mattr=avx2\"");
  holder->hardware = hardware_params(holder->target);
  Ref<TargetHolderNode> saved(holder);
  auto back = load_json_as<Ref<TargetHolderNode>>(parse_json_text(save_string(saved)));
  EXPECT_TRUE(back->target == holder->target);
  EXPECT_TRUE(structural_equal(back->hardware, holder->hardware));
  EXPECT_TRUE(structural_equal(back, saved));
}

TEST(Target, LoadRejectsNonCanonicalOrUnknownAttributes) {
  json doc = save_json(Target::parse("c -mattr=avx2,fma -num-cores=4"));
  json bad = doc;
  bad["nodes"][0]["attrs"]["foo"] = 1;
  EXPECT_TT_ERROR(load_json(bad), kNotFound, "unknown attribute '-foo' for target kind 'c'");
  bad = doc;
  bad["nodes"][0]["attrs"]["mattr"] = {"fma", "avx2"};
  EXPECT_TT_ERROR(load_json(bad), kInvalidArgument, "not in canonical form");
  bad = doc;
  bad["nodes"][0]["attrs"]["cache-line"] = 64;
  EXPECT_TT_ERROR(load_json(bad), kInvalidArgument,
                  "'-cache-line' of target kind 'c' is set to its default");
  bad = doc;
  bad["nodes"][0]["attrs"]["num-cores"] = "4";
  EXPECT_TT_ERROR(load_json(bad), kTypeMismatch, "'-num-cores' of target kind 'c' expects int");
  bad = doc;
  bad["nodes"][0]["attrs"]["mcpu"] = "native";
  EXPECT_TT_ERROR(load_json(bad), kInvalidArgument, "-mcpu=native is unresolved");
  bad = doc;
  bad["nodes"][0]["kind"] = "opencl";
  EXPECT_TT_ERROR(load_json(bad), kNotFound, "unknown target kind 'opencl'; known kinds: c, cuda");
}

TEST(Target, EqualityIncludesHost) {
  Target a = Target::parse("cuda -host=\"c -mattr=avx2\"");
  Target b = Target::parse("cuda -host=c");
  Target plain = Target::parse("cuda");
  EXPECT_FALSE(a == b);
  EXPECT_FALSE(a == plain);
  EXPECT_TRUE(a.without_host() == plain);
  EXPECT_TRUE(a == Target::parse("cuda -host=\"c -mattr=avx2\""));
  EXPECT_NE(structural_hash(a), structural_hash(b));
  auto diff = first_difference(a, b);
  ASSERT_TRUE(diff);
  EXPECT_NE(diff->find("host"), std::string::npos) << *diff;
}

TEST(Target, WithHostAcceptsEqualHostObject) {
  Target t = Target::parse("cuda -arch=sm_80 -host=\"c -mattr=avx2 -num-cores=8\"");
  // The same host value, as another object: what a target looks like after
  // its host crossed a process boundary (docs/architecture.md, "Why the rules").
  Target same_host = load_json_as<Target>(save_json(t.host()));
  ASSERT_FALSE(same_host.same_as(t.host()));
  Target combined = t.with_host(same_host);
  EXPECT_TRUE(combined.same_as(t));
  EXPECT_TRUE(t.with_host(Target::parse("c -num-cores=8 -mattr=avx2")) == t);

  EXPECT_TT_ERROR(t.with_host(Target::parse("c -mattr=avx512f")), kInvalidArgument,
                  "already has host 'c -mattr=avx2 -num-cores=8', which differs from the new "
                  "host 'c -mattr=avx512f'");

  Target added = Target::parse("cuda -arch=sm_80").with_host(Target::parse("c -num-cores=8"));
  EXPECT_TRUE(added == Target::parse("cuda -arch=sm_80 -host=\"c -num-cores=8\""));
  EXPECT_TT_ERROR(Target::parse("c").with_host(Target::parse("cuda")), kInvalidArgument,
                  "target kind 'cuda' cannot be a host; host kinds: c");
  EXPECT_TT_ERROR(Target::parse("cuda").with_host(Target::parse("c -host=c")), kInvalidArgument,
                  "has a host of its own");
}

TEST(Target, CompatibleCpuRule) {
  Target tuned = Target::parse("c -mattr=avx2,fma -num-cores=8 -l2-cache=1310720");
  std::string why;
  // Cores, caches, compiler and flags change speed, not validity.
  EXPECT_TRUE(compatible(tuned, Target::parse("c -mattr=avx2,avx512f,fma -num-cores=2 "
                                              "-compiler=clang -cflags=-O2 -mcpu=other")));
  EXPECT_FALSE(compatible(tuned, Target::parse("c -mattr=avx2"), &why));
  EXPECT_EQ(why, "the target run on lacks -mattr feature 'fma'");
  EXPECT_FALSE(compatible(tuned, Target::parse("c"), &why));
  // Portable C tuned for no features runs anywhere.
  EXPECT_TRUE(compatible(Target::parse("c"), tuned));
  // Vector width: explicit, or what the features imply.
  EXPECT_FALSE(compatible(Target::parse("c -mattr=avx2 -vector-width=64"),
                          Target::parse("c -mattr=avx2"), &why));
  EXPECT_EQ(why,
            "the target run on has 32-byte vectors, the schedule was tuned for 64-byte vectors");
  EXPECT_TRUE(
      compatible(Target::parse("c -mattr=avx2 -vector-width=16"), Target::parse("c -mattr=avx2")));
  EXPECT_FALSE(compatible(Target::parse("c"), Target::parse("cuda"), &why));
  EXPECT_EQ(why, "the kinds differ ('c' and 'cuda')");
}

TEST(Target, CompatibleGpuRuleAndHosts) {
  std::string why;
  EXPECT_TRUE(
      compatible(Target::parse("cuda -arch=sm_80"), Target::parse("cuda -arch=sm_86 -num-sms=84")));
  EXPECT_FALSE(
      compatible(Target::parse("cuda -arch=sm_86"), Target::parse("cuda -arch=sm_80"), &why));
  EXPECT_EQ(why, "code for sm_86 does not run on sm_80");
  EXPECT_FALSE(compatible(Target::parse("cuda -arch=sm_80"), Target::parse("cuda -arch=sm_90")));
  EXPECT_TRUE(compatible(Target::parse("cuda -arch=sm_90a"), Target::parse("cuda -arch=sm_90a")));
  EXPECT_FALSE(compatible(Target::parse("cuda -arch=sm_90a"), Target::parse("cuda -arch=sm_90")));
  EXPECT_FALSE(compatible(Target::parse("cuda -max-shared-memory-per-block=65536"),
                          Target::parse("cuda"), &why));
  EXPECT_NE(why.find("-max-shared-memory-per-block (49152 < 65536)"), std::string::npos) << why;
  // Hosts are checked when both targets have one.
  Target tuned = Target::parse("cuda -host=\"c -mattr=avx2\"");
  EXPECT_TRUE(compatible(tuned, Target::parse("cuda")));
  EXPECT_TRUE(compatible(tuned, Target::parse("cuda -host=\"c -mattr=avx2,fma\"")));
  EXPECT_FALSE(compatible(tuned, Target::parse("cuda -host=c"), &why));
  EXPECT_EQ(why, "hosts: the target run on lacks -mattr feature 'avx2'");
}

// What /proc/cpuinfo says, read independently of the code under test.
std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::string w;
      while (words >> w) flags.insert(w);
      break;
    }
  }
  return flags;
}

TEST(Target, NativeResolvesToConcreteAttributes) {
  Target native = Target::parse("native");
  EXPECT_EQ(native->kind, "c");
  std::string mcpu = native->attr<std::string>("mcpu");
  EXPECT_NE(mcpu, "native");
  EXPECT_FALSE(mcpu.empty());
  EXPECT_EQ(native.str().find("native"), std::string::npos) << native.str();
  EXPECT_TRUE(Target::parse("c -mcpu=native") == native);
  // A plain value: it reads back equal, in this process or another one.
  EXPECT_TRUE(Target::parse(native.str()) == native) << native.str();
  EXPECT_TRUE(load_json_as<Target>(save_json(native)) == native);

  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(native->attr<int64_t>("num-cores"), CPU_COUNT(&set));

  auto features = native->attr<std::vector<std::string>>("mattr");
  std::set<std::string> flags = cpuinfo_flags();
  const std::vector<std::pair<std::string, std::string>> flag_to_feature = {{"avx2", "avx2"},
                                                                            {"fma", "fma"},
                                                                            {"sse4_2", "sse4.2"},
                                                                            {"avx512f", "avx512f"},
                                                                            {"asimd", "neon"}};
  for (const auto& [flag, feature] : flag_to_feature) {
    bool has = std::find(features.begin(), features.end(), feature) != features.end();
    EXPECT_EQ(has, flags.count(flag) > 0) << flag;
  }
  // Kernel bookkeeping flags are not instruction-set features.
  EXPECT_EQ(std::find(features.begin(), features.end(), "hypervisor"), features.end());

  std::ifstream l1_size("/sys/devices/system/cpu/cpu0/cache/index0/size");
  std::ifstream l1_type("/sys/devices/system/cpu/cpu0/cache/index0/type");
  std::string size, type;
  if (l1_size >> size && l1_type >> type && type == "Data" && size.back() == 'K') {
    EXPECT_EQ(native->attr<int64_t>("l1-cache"), std::stoll(size) * 1024);
  }
}

TEST(Target, NativeKeepsWhatTheUserSet) {
  Target native = Target::parse("native");
  Target t = Target::parse("c -mcpu=native -num-cores=2 -mattr=avx2,fma");
  EXPECT_EQ(t->attr<int64_t>("num-cores"), 2);
  EXPECT_EQ(t->attr<std::vector<std::string>>("mattr"), (std::vector<std::string>{"avx2", "fma"}));
  EXPECT_EQ(t->attr<std::string>("mcpu"), native->attr<std::string>("mcpu"));
  EXPECT_EQ(t->attr<int64_t>("l1-cache"), native->attr<int64_t>("l1-cache"));
  EXPECT_TRUE(Target::parse("native -num-cores=2 -mattr=fma,avx2") == t);
  EXPECT_TRUE(Target::from_json({{"kind", "c"}, {"mcpu", "native"}}) == native);
  EXPECT_TT_ERROR(Target::parse("native -mcpu=skylake"), kInvalidArgument,
                  "'native' means 'c -mcpu=native'");
}

TEST(Target, ErrorsNameWhatIsKnown) {
  EXPECT_TT_ERROR(Target::parse("opencl -device=mali"), kNotFound,
                  "target string 'opencl -device=mali': unknown target kind 'opencl'; known "
                  "kinds: c, cuda");
  EXPECT_TT_ERROR(Target::parse("c -foo=1"), kNotFound,
                  "unknown attribute '-foo' for target kind 'c'; known attributes: -cache-line, "
                  "-cflags, -compiler, -l1-cache, -l2-cache, -l3-cache, -mattr, -mcpu, "
                  "-num-cores, -vector-width");
  EXPECT_TT_ERROR(Target::make("cuda", {{"warp", 32}}), kNotFound,
                  "known attributes: -arch, -max-shared-memory-per-block, "
                  "-max-threads-per-block, -num-sms, -thread-warp-size");
  EXPECT_TT_ERROR(Target::parse("c -num-cores=two"), kTypeMismatch,
                  "attribute '-num-cores' of target kind 'c' expects int, got 'two'");
  EXPECT_TT_ERROR(Target::from_json({{"kind", "c"}, {"mattr", "avx2"}}), kTypeMismatch,
                  "attribute '-mattr' of target kind 'c' expects list of strings, got string");
  EXPECT_TT_ERROR(Target::from_json({{"kind", "cuda"}, {"num-sms", 1.5}}), kTypeMismatch,
                  "attribute '-num-sms' of target kind 'cuda' expects int");
  EXPECT_TT_ERROR(Target::parse("c -num-cores=0"), kInvalidArgument,
                  "attribute '-num-cores' of target kind 'c' must be at least 1, got 0");
  EXPECT_TT_ERROR(Target::parse("c -num-cores"), kParse, "needs a value: -num-cores=<int>");
  EXPECT_TT_ERROR(Target::parse("c -num-cores=2 -num-cores=3"), kInvalidArgument, "given twice");
  EXPECT_TT_ERROR(Target::parse("c -cflags=\"-O3"), kParse, "unterminated quote at byte offset 10");
  EXPECT_TT_ERROR(Target::parse("  "), kParse, "empty target string; known kinds: c, cuda");
  EXPECT_TT_ERROR(Target::parse("c num-cores=2"), kParse,
                  "expected -name=value, got 'num-cores=2'");
  EXPECT_TT_ERROR(Target::parse("c -mattr=AVX2"), kInvalidArgument, "is not a feature name");
  EXPECT_TT_ERROR(Target::parse("cuda -arch=80"), kInvalidArgument, "-arch must look like sm_80");
  EXPECT_TT_ERROR(Target::from_json(42), kTypeMismatch, "a string or an object");
  EXPECT_TT_ERROR(Target::from_json({{"arch", "sm_80"}}), kParse, "missing string 'kind'");
  EXPECT_TT_ERROR(Target::parse("c")->attr<bool>("num-cores"), kTypeMismatch,
                  "'-num-cores' of target kind 'c' is a int, not a bool");
}

TEST(Target, HardwareParamsDerive) {
  HardwareParams cpu = hardware_params(
      Target::parse("c -num-cores=8 -mattr=avx2,avx512f,fma -l1-cache=49152 -l2-cache=2097152"));
  EXPECT_EQ(cpu->num_cores, 8);
  EXPECT_EQ(cpu->vector_bytes, 64);
  EXPECT_EQ(cpu->cache_line_bytes, 64);
  EXPECT_EQ(cpu->l1_cache_bytes, 49152);
  EXPECT_EQ(cpu->l2_cache_bytes, 2097152);
  EXPECT_EQ(cpu->l3_cache_bytes, 8388608);
  EXPECT_EQ(cpu->warp_size, 0);
  EXPECT_EQ(hardware_params(Target::parse("c -mattr=avx2"))->vector_bytes, 32);
  EXPECT_EQ(hardware_params(Target::parse("c"))->vector_bytes, 16);
  EXPECT_EQ(hardware_params(Target::parse("c -mattr=avx512f -vector-width=32"))->vector_bytes, 32);

  HardwareParams gpu = hardware_params(
      Target::parse("cuda -arch=sm_86 -num-sms=84 -max-shared-memory-per-block=101376 -host=c"));
  EXPECT_EQ(gpu->num_cores, 84);
  EXPECT_EQ(gpu->max_threads_per_block, 1024);
  EXPECT_EQ(gpu->max_shared_memory_per_block, 101376);
  EXPECT_EQ(gpu->warp_size, 32);
  EXPECT_EQ(gpu->l1_cache_bytes, 0);

  // A saved task holds them as a node.
  HardwareParams back = load_json_as<HardwareParams>(parse_json_text(save_string(gpu)));
  EXPECT_TRUE(structural_equal(back, gpu));
  EXPECT_FALSE(structural_equal(back, cpu));
  json bad = save_json(gpu);
  bad["nodes"][0]["num_cores"] = 0;
  EXPECT_TT_ERROR(load_json(bad), kInvalidArgument, "must be positive");
}

// A kind registered outside the library, as a later layer or a user would.
TargetKindInfo test_kind() {
  TargetKindInfo k;
  k.name = "test_dev";
  k.doc = "a device for the target tests";
  k.attrs = {{"fast", TargetAttrType::kBool, false, "a flag", 0},
             {"lanes", TargetAttrType::kInt, 4, "vector lanes", 1}};
  return k;
}
TT_REGISTER_TARGET_KIND(test_kind());

TEST(Target, RegisteredKindsWorkWithoutHooks) {
  Target t = Target::parse("test_dev -fast -lanes=8");
  EXPECT_TRUE(t->attr<bool>("fast"));
  EXPECT_EQ(t.str(), "test_dev -fast=true -lanes=8");
  EXPECT_TRUE(Target::parse(t.str()) == t);
  EXPECT_TRUE(Target::parse("test_dev -fast=false") == Target::parse("test_dev"));
  EXPECT_TT_ERROR(Target::parse("test_dev -fast=yes"), kTypeMismatch,
                  "attribute '-fast' of target kind 'test_dev' expects bool (true or false)");
  // Without a rule of its own, a kind is compatible only with equal attributes.
  std::string why;
  EXPECT_TRUE(compatible(t, Target::parse("test_dev -lanes=8 -fast")));
  EXPECT_FALSE(compatible(t, Target::parse("test_dev -lanes=8"), &why));
  EXPECT_NE(why.find("the attributes differ"), std::string::npos);
  EXPECT_TT_ERROR(hardware_params(t), kInvalidArgument,
                  "target kind 'test_dev' does not describe hardware parameters");
  EXPECT_TT_ERROR(Target::parse("cuda").with_host(t), kInvalidArgument,
                  "target kind 'test_dev' cannot be a host");
}

}  // namespace
}  // namespace tensortune::ir
