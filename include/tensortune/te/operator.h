/// \file
/// The operators a model's graph is made of, each defined once, here: its
/// arity, the type of its attributes, how it fuses with its neighbours, the
/// checks of its arguments and attributes, and its computation as tensor
/// expressions, from which its result's shape and dtype come (infer_type):
/// there is no second shape function to keep in agreement. Attributes are
/// reflected nodes like everything else (te/attrs.h), so that they save,
/// compare and hash with a graph and no field can be forgotten by any of
/// those.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "tensortune/te/attrs.h"
#include "tensortune/te/tensor.h"

namespace tensortune::te {

/// How an operator combines with its neighbours into tuning tasks.
enum class OpPattern {
  kElemwise,   ///< out[i] = f(in[i]): fuses into anything before it
  kBroadcast,  ///< elementwise with numpy broadcasting
  kInjective,  ///< each output element from a fixed input element (reshape, transpose, pad)
  kReduction,  ///< reduces axes (softmax, norms, pools)
  kAnchor,  ///< data reuse worth tiling (conv, dense, matmul): elementwise followers fuse into it
};

/// A value's type.
struct TensorType {
  std::vector<int64_t> shape;
  ir::DataType dtype;
};

/// One registered operator.
struct OpInfo {
  std::string name;
  std::string doc;  ///< one line
  int min_args = 1, max_args = 1;
  std::string attrs_type;  ///< the attributes node's type key; "" for none
  OpPattern pattern = OpPattern::kInjective;
  /// The checks the computation does not make itself (attribute values, a
  /// layout): a kInvalidArgument error saying what is wrong; may be empty.
  std::function<void(const std::vector<TensorType>& args, const AttrsNode* attrs)> check;
  /// The computation over `args`; checks the operands' ranks, shapes and
  /// dtypes as every te operator does.
  std::function<Tensor(const std::vector<Tensor>& args, const AttrsNode* attrs)> compute;
};

/// Registers an operator (at static initialisation); a duplicate is an internal error.
void register_op(OpInfo info);
/// The operator `name`; kNotFound listing the registered ones otherwise.
const OpInfo& find_op(std::string_view name);
/// Every registered operator name, sorted.
std::vector<std::string> op_names();

/// The result type of `op` on arguments of `args` types: the arity and the
/// attributes' type checked, then op.check, then the shape and dtype of
/// op.compute over placeholders. A user error saying what is wrong
/// otherwise.
TensorType infer_type(const OpInfo& op, const std::vector<TensorType>& args,
                      const AttrsNode* attrs);

}  // namespace tensortune::te
