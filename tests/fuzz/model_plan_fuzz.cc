// libFuzzer harness for the compiled-model loader: the bytes are a plan.json,
// put into a real compiled model (a relu, compiled once at start) with a manifest made to agree
// with it, so that only the plan's own checks stand between the bytes and the runtime. Loading must
// succeed or throw a user error; a model that loads is run, under AddressSanitizer: a plan that
// loads must not make the runtime read or write outside a buffer. A crash, a sanitizer report or an
// internal error is a finding.
//
//   scripts/fuzz.sh [seconds]
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tensortune/graph/compile.h"
#include "tensortune/object/serialize.h"
#include "tensortune/runtime/compiled_model.h"
#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"

namespace {

namespace fs = std::filesystem;
namespace rt = tensortune::runtime;

[[noreturn]] void finding(const char* what, const char* detail) {
  std::fprintf(stderr, "model_plan_fuzz: %s: %s\n", what, detail);
  std::abort();
}

struct Fixture {
  std::string dir;    // a private folder of this process
  std::string model;  // dir/model.tt, whose plan.json each input replaces
  std::string library, weights;
};

Fixture& fixture() {
  static Fixture f = [] {
    Fixture f;
    std::string tmpl = (fs::temp_directory_path() / "tt_model_plan_fuzz_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) finding("setup", "mkdtemp failed");
    f.dir = tmpl;
    namespace graph = tensortune::graph;
    const auto f32 = tensortune::ir::DataType::float32();
    // The model of tests/models/make_op_models.py's odd_output_name, whose
    // plan (compiled for target c) is the seed in tests/fuzz/corpus/model_plan.
    auto x = graph::input("x", {3}, f32);
    graph::Value y = graph::call("relu", {x}, graph::Attrs(), "Relu_0");
    graph::CompileOptions o;
    o.target = tensortune::ir::Target::parse("c");
    o.module_options.cache_dir = f.dir + "/cache";
    f.model = f.dir + "/model.tt";
    graph::compile_model(graph::Graph::make({x}, {y}, {"scores:0/final"}), o, f.model);
    f.library = *tensortune::read_file_if_exists(f.model + "/model.so");
    f.weights = *tensortune::read_file_if_exists(f.model + "/weights.bin");
    std::fprintf(stderr, "model_plan_fuzz: a seed plan is %s/plan.json\n", f.model.c_str());
    return f;
  }();
  return f;
}

/// The manifest that makes the folder's files agree with it.
std::string manifest_for(const std::string& plan) {
  auto m = tensortune::make_node<rt::ManifestNode>();
  const Fixture& f = fixture();
  for (auto [name, bytes] : {std::pair<const char*, const std::string*>{"plan.json", &plan},
                             {"model.so", &f.library},
                             {"weights.bin", &f.weights}}) {
    auto file = tensortune::make_node<rt::ManifestFileNode>();
    file->name = name;
    file->bytes = static_cast<int64_t>(bytes->size());
    file->sha256 = tensortune::sha256_hex(*bytes);
    m->files.emplace_back(std::move(file));
  }
  return tensortune::save_string(rt::Manifest(m));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& f = fixture();
  std::string plan(reinterpret_cast<const char*>(data), size);
  tensortune::write_file_atomically(f.model + "/plan.json", plan);
  tensortune::write_file_atomically(f.model + "/manifest.json", manifest_for(plan));
  rt::CompiledModel m;
  try {
    m = rt::CompiledModel::load(f.model);
  } catch (const tensortune::Error& e) {
    if (e.kind() == tensortune::ErrorKind::kInternal) finding("internal error", e.what());
    return 0;
  }
  try {
    std::vector<tensortune::te::NDArray> inputs;
    for (size_t i = 0; i < m.inputs().size(); ++i) {
      inputs.push_back(
          tensortune::te::NDArray::random(m.inputs()[i].dtype, m.inputs()[i].shape, i));
    }
    (void)m.run(inputs);
  } catch (const tensortune::Error& e) {
    if (e.kind() == tensortune::ErrorKind::kInternal) finding("internal error", e.what());
  }
  return 0;
}
