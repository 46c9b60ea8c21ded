#include "common/te_node_samples.h"

#include "tensortune/te/ops.h"
#include "tensortune/te/workload.h"

namespace tensortune::testing {
namespace {

template <class R>
ObjectPtr obj(const R& r) {
  return ObjectPtr(r.ptr());
}

// A small DAG with sharing, a padded stage, a reduction and non-trivial attrs.
te::Tensor sample_output() {
  te::Tensor x = te::placeholder({1, 2, 5, 5}, ir::DataType::float16(), "x");
  te::Tensor w = te::placeholder({3, 2, 3, 3}, ir::DataType::float16(), "w");
  return te::relu(te::conv2d_nchw(x, w, te::Conv2dAttrsNode::uniform(2, 1)));
}

}  // namespace

void add_te_node_samples(std::map<std::string, std::function<ObjectPtr()>>& s) {
  s["te.PlaceholderOp"] = [] {
    return obj(te::placeholder({4, 3}, ir::DataType::int_(8), "p")->op);
  };
  s["te.ComputeOp"] = [] { return obj(sample_output()->op); };
  s["te.Tensor"] = [] { return obj(sample_output()); };
  s["te.NamedWorkload"] = [] {
    return obj(te::make_named_workload_from_text("conv2d_nchw", "1,4,9,9,6,3,3,2,1,1,2"));
  };
  s["te.DagWorkload"] = [] {
    te::Tensor a = te::placeholder({5, 3}, ir::DataType::float32(), "A");
    te::Tensor w = te::placeholder({3, 3}, ir::DataType::float32(), "W");
    // W a constant input: the field added to DagWorkload after its first release.
    return obj(
        te::make_dag_workload({a, w}, {te::matmul(te::matmul(a, w), te::transpose(a))}, {1}));
  };
}

}  // namespace tensortune::testing
