#include "common/graph_node_samples.h"

#include "tensortune/graph/graph.h"

namespace tensortune::testing {
namespace {

using namespace graph;  // NOLINT: sample builders

template <class R>
ObjectPtr obj(const R& r) {
  return ObjectPtr(r.ptr());
}

template <class N, class F>
ObjectPtr attrs(F set) {
  auto n = make_node<N>();
  set(*n);
  return obj(Ref<N>(n));
}

// x -> conv2d(w) -> relu -> {out}, with the conv's attributes away from defaults.
Graph sample_graph() {
  auto x = input("x", {1, 3, 8, 8}, ir::DataType::float32());
  Value w = constant(te::NDArray::random(ir::DataType::float32(), {4, 3, 3, 3}, 7), "w");
  auto conv = make_node<te::Conv2dAttrsNode>();
  conv->padding = {1, 1, 1, 1};
  conv->strides = {2, 2};
  Value y = call("nn.conv2d", {x, w}, te::Attrs(conv), "conv_0");
  Value z = call("relu", {y}, te::Attrs(), "relu_0");
  return Graph::make({x}, {z}, {"out"});
}

}  // namespace

void add_graph_node_samples(std::map<std::string, std::function<ObjectPtr()>>& s) {
  s["graph.Conv2dAttrs"] = [] {
    return attrs<te::Conv2dAttrsNode>([](auto& a) {
      a.strides = {2, 1};
      a.padding = {1, 0, 1, 2};
      a.dilation = {1, 2};
      a.groups = 2;
      a.data_layout = "NHWC";
    });
  };
  s["graph.Conv2dTransposeAttrs"] = [] {
    return attrs<te::Conv2dTransposeAttrsNode>([](auto& a) {
      a.strides = {2, 2};
      a.padding = {1, 1, 0, 0};
      a.output_padding = {1, 0};
    });
  };
  s["graph.WinogradAttrs"] = [] {
    return attrs<te::WinogradAttrsNode>([](auto& a) {
      a.tile = 2;
      a.padding = {1, 0, 2, 1};
      a.output_size = {7, 5};
    });
  };
  s["graph.Pool2dAttrs"] = [] {
    return attrs<te::Pool2dAttrsNode>([](auto& a) {
      a.kernel = {3, 3};
      a.strides = {2, 2};
      a.padding = {1, 1, 1, 1};
      a.ceil_mode = true;
      a.count_include_pad = true;
      a.layout = "NHWC";
    });
  };
  s["graph.LayoutAttrs"] = [] {
    return attrs<te::LayoutAttrsNode>([](auto& a) { a.layout = "NHWC"; });
  };
  s["graph.AxisAttrs"] = [] { return attrs<te::AxisAttrsNode>([](auto& a) { a.axis = -1; }); };
  s["graph.NormAttrs"] = [] {
    return attrs<te::NormAttrsNode>([](auto& a) {
      a.axis = -1;
      a.epsilon = 1e-12;
    });
  };
  s["graph.ReshapeAttrs"] = [] {
    return attrs<te::ReshapeAttrsNode>([](auto& a) { a.shape = {2, -1}; });
  };
  s["graph.TransposeAttrs"] = [] {
    return attrs<te::TransposeAttrsNode>([](auto& a) { a.perm = {0, 2, 3, 1}; });
  };
  s["graph.SliceAttrs"] = [] {
    return attrs<te::SliceAttrsNode>([](auto& a) {
      a.begin = {0, 1};
      a.end = {4, -1};
      a.strides = {1, 2};
    });
  };
  s["graph.PadAttrs"] = [] {
    return attrs<te::PadAttrsNode>([](auto& a) {
      a.before = {0, 1};
      a.after = {2, 0};
      a.value = -0.5;
    });
  };
  s["graph.ReduceAttrs"] = [] {
    return attrs<te::ReduceAttrsNode>([](auto& a) {
      a.axes = {1, 2};
      a.keepdims = false;
    });
  };
  s["graph.ScalarAttrs"] = [] {
    return attrs<te::ScalarAttrsNode>([](auto& a) {
      a.alpha = 0.2;
      a.beta = 0.5;
    });
  };
  s["graph.CastAttrs"] = [] {
    return attrs<te::CastAttrsNode>([](auto& a) { a.dtype = ir::DataType::int64(); });
  };
  s["graph.TileAttrs"] = [] {
    return attrs<te::TileAttrsNode>([](auto& a) { a.repeats = {2, 1, 3}; });
  };
  s["graph.CumSumAttrs"] = [] {
    return attrs<te::CumSumAttrsNode>([](auto& a) {
      a.axis = -1;
      a.exclusive = true;
      a.reverse = true;
    });
  };
  s["graph.OneHotAttrs"] = [] {
    return attrs<te::OneHotAttrsNode>([](auto& a) {
      a.depth = 7;
      a.on_value = 3;
      a.off_value = -1;
      a.dtype = ir::DataType::int64();
      a.axis = 0;
    });
  };
  s["graph.ArgReduceAttrs"] = [] {
    return attrs<te::ArgReduceAttrsNode>([](auto& a) {
      a.axis = 2;
      a.keepdims = false;
      a.select_last = true;
    });
  };
  s["graph.TopKAttrs"] = [] {
    return attrs<te::TopKAttrsNode>([](auto& a) {
      a.k = 3;
      a.axis = 1;
      a.largest = false;
    });
  };
  s["graph.ScatterAttrs"] = [] {
    return attrs<te::ScatterAttrsNode>([](auto& a) {
      a.axis = 1;
      a.reduction = "mul";
    });
  };
  s["graph.LrnAttrs"] = [] {
    return attrs<te::LrnAttrsNode>([](auto& a) {
      a.size = 5;
      a.alpha = 2e-4;
      a.beta = 0.5;
      a.bias = 2;
    });
  };
  s["graph.ResizeAttrs"] = [] {
    return attrs<te::ResizeAttrsNode>([](auto& a) {
      a.size = {16, 12};
      a.method = "linear";
      a.coordinate_mode = "align_corners";
    });
  };
  s["graph.Graph"] = [] { return obj(sample_graph()); };
  s["graph.Input"] = [] { return obj(sample_graph().inputs()[0]); };
  s["graph.Call"] = [] { return obj(sample_graph().outputs()[0]); };
  s["graph.Constant"] = [] {
    auto relu = sample_graph().outputs()[0].as<CallNode>();
    auto conv = relu->args[0].as<CallNode>();
    return obj(conv->args[1]);
  };
}

}  // namespace tensortune::testing
