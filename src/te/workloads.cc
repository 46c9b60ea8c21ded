// The registered workload families: the operators tasks are made of. Each is
// float32 unless its trailing dtype argument says otherwise.
#include "tensortune/te/ops.h"
#include "tensortune/te/workload.h"

namespace tensortune::te {
namespace {

using json = nlohmann::json;

ArgSpec int_arg(std::string name) { return {std::move(name), ArgType::kInt, nullptr}; }
ArgSpec int_arg(std::string name, int64_t default_value) {
  return {std::move(name), ArgType::kInt, default_value};
}
ArgSpec dtype_arg() { return {"dtype", ArgType::kDType, "float32"}; }

int64_t arg(const json& args, size_t i) { return args.at(i).get<int64_t>(); }
DataType dtype_at(const json& args, size_t i) {
  return DataType::parse(args.at(i).get<std::string>());
}

// conv2d's arguments: N,C,H,W,K,R,S,stride,pad[,dilation,groups][,dtype].
std::vector<ArgSpec> conv2d_args() {
  return {int_arg("N"),   int_arg("C"),           int_arg("H"),         int_arg("W"),
          int_arg("K"),   int_arg("R"),           int_arg("S"),         int_arg("stride"),
          int_arg("pad"), int_arg("dilation", 1), int_arg("groups", 1), dtype_arg()};
}

struct Conv2dArgs {
  int64_t n, c, h, w, k, r, s;
  Conv2dAttrsNode attrs;
  DataType dtype;
};

Conv2dArgs conv2d_from(const json& a) {
  Conv2dArgs c{
      arg(a, 0),      arg(a, 1),
      arg(a, 2),      arg(a, 3),
      arg(a, 4),      arg(a, 5),
      arg(a, 6),      Conv2dAttrsNode::uniform(arg(a, 7), arg(a, 8), arg(a, 9), arg(a, 10)),
      dtype_at(a, 11)};
  if (c.attrs.groups < 1) {
    fail(ErrorKind::kInvalidArgument, "groups must be >= 1, got ", c.attrs.groups);
  }
  return c;
}

// Pooling's arguments: N,C,H,W,R,S,stride,pad[,dtype].
std::vector<ArgSpec> pool_args() {
  return {int_arg("N"), int_arg("C"),      int_arg("H"),   int_arg("W"), int_arg("R"),
          int_arg("S"), int_arg("stride"), int_arg("pad"), dtype_arg()};
}

Pool2dAttrsNode pool_from(const json& a) {
  Pool2dAttrsNode p;
  p.kernel = {arg(a, 4), arg(a, 5)};
  p.strides = {arg(a, 6), arg(a, 6)};
  p.padding = {arg(a, 7), arg(a, 7), arg(a, 7), arg(a, 7)};
  return p;
}

bool register_all() {
  register_workload({"matmul",
                     "C[M, N] = A[M, K] . B[K, N]",
                     {int_arg("M"), int_arg("N"), int_arg("K"), dtype_arg()},
                     [](const json& a) -> WorkloadTensors {
                       DataType t = dtype_at(a, 3);
                       Tensor x = placeholder({arg(a, 0), arg(a, 2)}, t, "A");
                       Tensor y = placeholder({arg(a, 2), arg(a, 1)}, t, "B");
                       return {{x, y}, {matmul(x, y)}};
                     },
                     "7,5,9"});

  register_workload({"dense",
                     "out[M, N] = data[M, K] . weight[N, K]^T",
                     {int_arg("M"), int_arg("N"), int_arg("K"), dtype_arg()},
                     [](const json& a) -> WorkloadTensors {
                       DataType t = dtype_at(a, 3);
                       Tensor x = placeholder({arg(a, 0), arg(a, 2)}, t, "data");
                       Tensor w = placeholder({arg(a, 1), arg(a, 2)}, t, "weight");
                       return {{x, w}, {dense(x, w)}, {1}};
                     },
                     "6,7,5"});

  register_workload({"batch_matmul",
                     "C[B, M, N] = A[B, M, K] . B[B, K, N]",
                     {int_arg("B"), int_arg("M"), int_arg("N"), int_arg("K"), dtype_arg()},
                     [](const json& a) -> WorkloadTensors {
                       DataType t = dtype_at(a, 4);
                       Tensor x = placeholder({arg(a, 0), arg(a, 1), arg(a, 3)}, t, "A");
                       Tensor y = placeholder({arg(a, 0), arg(a, 3), arg(a, 2)}, t, "B");
                       return {{x, y}, {batch_matmul(x, y)}};
                     },
                     "3,5,4,6"});

  register_workload(
      {"conv2d_nchw", "out[N, K, OH, OW] = conv(data[N, C, H, W], kernel[K, C/groups, R, S])",
       conv2d_args(),
       [](const json& a) -> WorkloadTensors {
         Conv2dArgs c = conv2d_from(a);
         Tensor x = placeholder({c.n, c.c, c.h, c.w}, c.dtype, "data");
         Tensor w = placeholder({c.k, c.c / c.attrs.groups, c.r, c.s}, c.dtype, "kernel");
         return {{x, w}, {conv2d_nchw(x, w, c.attrs)}, {1}};
       },
       "1,4,9,9,6,3,3,2,1,1,2"});

  register_workload(
      {"conv2d_nhwc", "out[N, OH, OW, K] = conv(data[N, H, W, C], kernel[R, S, C/groups, K])",
       conv2d_args(),
       [](const json& a) -> WorkloadTensors {
         Conv2dArgs c = conv2d_from(a);
         Tensor x = placeholder({c.n, c.h, c.w, c.c}, c.dtype, "data");
         Tensor w = placeholder({c.r, c.s, c.c / c.attrs.groups, c.k}, c.dtype, "kernel");
         return {{x, w}, {conv2d_nhwc(x, w, c.attrs)}, {1}};
       },
       "1,8,8,4,5,3,3,1,1,2,1"});

  register_workload(
      {"conv2d_bias_relu_nchw",
       "relu(conv2d_nchw(data, kernel) + bias[K]), three stages as one task", conv2d_args(),
       [](const json& a) -> WorkloadTensors {
         Conv2dArgs c = conv2d_from(a);
         Tensor x = placeholder({c.n, c.c, c.h, c.w}, c.dtype, "data");
         Tensor w = placeholder({c.k, c.c / c.attrs.groups, c.r, c.s}, c.dtype, "kernel");
         Tensor b = placeholder({c.k}, c.dtype, "bias");
         return {{x, w, b}, {relu(bias_add(conv2d_nchw(x, w, c.attrs), b, 1))}, {1, 2}};
       },
       "1,3,8,8,4,3,3,1,1"});

  register_workload(
      {"depthwise_conv2d_nchw",
       "out[N, C, OH, OW] = depthwise conv(data[N, C, H, W], kernel[C, 1, R, S])",
       {int_arg("N"), int_arg("C"), int_arg("H"), int_arg("W"), int_arg("R"), int_arg("S"),
        int_arg("stride"), int_arg("pad"), dtype_arg()},
       [](const json& a) -> WorkloadTensors {
         DataType t = dtype_at(a, 8);
         Tensor x = placeholder({arg(a, 0), arg(a, 1), arg(a, 2), arg(a, 3)}, t, "data");
         Tensor w = placeholder({arg(a, 1), 1, arg(a, 4), arg(a, 5)}, t, "kernel");
         return {{x, w},
                 {depthwise_conv2d_nchw(x, w, Conv2dAttrsNode::uniform(arg(a, 6), arg(a, 7)))},
                 {1}};
       },
       "2,3,9,9,3,3,2,1"});

  register_workload(
      {"conv2d_transpose_nchw",
       "out[N, K, OH, OW] = transposed conv(data[N, C, H, W], kernel[C, K, R, S])",
       {int_arg("N"), int_arg("C"), int_arg("H"), int_arg("W"), int_arg("K"), int_arg("R"),
        int_arg("S"), int_arg("stride"), int_arg("pad"), int_arg("output_pad", 0), dtype_arg()},
       [](const json& a) -> WorkloadTensors {
         DataType t = dtype_at(a, 10);
         Tensor x = placeholder({arg(a, 0), arg(a, 1), arg(a, 2), arg(a, 3)}, t, "data");
         Tensor w = placeholder({arg(a, 1), arg(a, 4), arg(a, 5), arg(a, 6)}, t, "kernel");
         Conv2dTransposeAttrsNode attrs;
         attrs.strides = {arg(a, 7), arg(a, 7)};
         attrs.padding = {arg(a, 8), arg(a, 8), arg(a, 8), arg(a, 8)};
         attrs.output_padding = {arg(a, 9), arg(a, 9)};
         return {{x, w}, {conv2d_transpose_nchw(x, w, attrs)}, {1}};
       },
       "1,3,5,5,4,3,3,2,1,1"});

  register_workload({"max_pool2d_nchw", "max over R x S windows of data[N, C, H, W]", pool_args(),
                     [](const json& a) -> WorkloadTensors {
                       Tensor x = placeholder({arg(a, 0), arg(a, 1), arg(a, 2), arg(a, 3)},
                                              dtype_at(a, 8), "data");
                       return {{x}, {max_pool2d_nchw(x, pool_from(a))}};
                     },
                     "1,3,9,9,3,3,2,1"});

  register_workload(
      {"avg_pool2d_nchw", "mean over R x S windows of data[N, C, H, W], padding not counted",
       pool_args(),
       [](const json& a) -> WorkloadTensors {
         Tensor x =
             placeholder({arg(a, 0), arg(a, 1), arg(a, 2), arg(a, 3)}, dtype_at(a, 8), "data");
         return {{x}, {avg_pool2d_nchw(x, pool_from(a))}};
       },
       "1,3,9,9,3,3,2,1"});

  register_workload({"global_avg_pool2d_nchw",
                     "mean over H and W of data[N, C, H, W]",
                     {int_arg("N"), int_arg("C"), int_arg("H"), int_arg("W"), dtype_arg()},
                     [](const json& a) -> WorkloadTensors {
                       Tensor x = placeholder({arg(a, 0), arg(a, 1), arg(a, 2), arg(a, 3)},
                                              dtype_at(a, 4), "data");
                       return {{x}, {global_avg_pool2d_nchw(x)}};
                     },
                     "2,3,5,7"});

  register_workload({"softmax",
                     "softmax over the last axis of x[M, N]",
                     {int_arg("M"), int_arg("N"), dtype_arg()},
                     [](const json& a) -> WorkloadTensors {
                       Tensor x = placeholder({arg(a, 0), arg(a, 1)}, dtype_at(a, 2), "x");
                       return {{x}, {softmax(x, -1)}};
                     },
                     "5,11"});

  register_workload(
      {"layer_norm",
       "layer normalisation of x[M, N] over N, with gamma[N] and beta[N] (epsilon 1e-5)",
       {int_arg("M"), int_arg("N"), dtype_arg()},
       [](const json& a) -> WorkloadTensors {
         DataType t = dtype_at(a, 2);
         Tensor x = placeholder({arg(a, 0), arg(a, 1)}, t, "x");
         Tensor g = placeholder({arg(a, 1)}, t, "gamma");
         Tensor b = placeholder({arg(a, 1)}, t, "beta");
         return {{x, g, b}, {layer_norm(x, g, b)}, {1, 2}};
       },
       "5,11"});

  register_workload({"relu",
                     "max(x[N], 0)",
                     {int_arg("N"), dtype_arg()},
                     [](const json& a) -> WorkloadTensors {
                       Tensor x = placeholder({arg(a, 0)}, dtype_at(a, 1), "x");
                       return {{x}, {relu(x)}};
                     },
                     "17"});

  register_workload({"add",
                     "a[M, N] + b[M, N]",
                     {int_arg("M"), int_arg("N"), dtype_arg()},
                     [](const json& a) -> WorkloadTensors {
                       DataType t = dtype_at(a, 2);
                       Tensor x = placeholder({arg(a, 0), arg(a, 1)}, t, "a");
                       Tensor y = placeholder({arg(a, 0), arg(a, 1)}, t, "b");
                       return {{x, y}, {add(x, y)}};
                     },
                     "4,7"});

  register_workload({"gelu",
                     "gelu(x[M, N]), the erf form",
                     {int_arg("M"), int_arg("N"), dtype_arg()},
                     [](const json& a) -> WorkloadTensors {
                       Tensor x = placeholder({arg(a, 0), arg(a, 1)}, dtype_at(a, 2), "x");
                       return {{x}, {gelu(x)}};
                     },
                     "4,7"});
  return true;
}

[[maybe_unused]] const bool kRegistered = register_all();

}  // namespace
}  // namespace tensortune::te
