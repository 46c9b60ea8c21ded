/// \file
/// Workloads: the tensor programs that tasks tune.
///
/// A workload is either a registered name plus typed arguments — re-created by
/// calling the registered function in whichever process loads it — or an
/// explicit DAG of tensors, saved as one graph. Its key is a stable string:
/// `name(arg,arg,...)` with every argument canonical and defaults filled in, or
/// `dag:<16 hex digits of the structural hash>`; the same workload has the
/// same key in every process and on every run.
///
/// Canonical arguments (in the JSON of a NamedWorkload and in keys): ints are
/// JSON integers (written in decimal), floats JSON numbers (written in the
/// shortest form that reads back exactly, e.g. 1e-05), shapes arrays of
/// integers (written [1,3,224,224], no spaces), dtypes their canonical names
/// (float32; accepted as any spelling ir::DataType::parse takes), strings
/// JSON strings (written JSON-quoted). Optional arguments are trailing and
/// positional: giving a later one means giving the ones before it, e.g.
/// `conv2d_nchw 1,3,224,224,64,7,7,2,3,1,1,float16`. So `matmul(64,64,64)`
/// becomes `matmul(64,64,64,float32)`, and so does
/// `matmul 64,64,64,float32`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensortune/te/tensor.h"

namespace tensortune::te {

/// The type of one workload argument.
enum class ArgType { kInt, kFloat, kShape, kDType, kString };

/// One parameter of a workload's signature.
struct ArgSpec {
  std::string name;
  ArgType type = ArgType::kInt;
  /// Default for a trailing optional argument; null when required.
  nlohmann::json default_value = nullptr;
};

/// What a workload function returns: the inputs (placeholders) and outputs,
/// and which inputs are constants in a model (the weights of a convolution
/// or a dense layer): a schedule may ask for those to be pre-packed in the
/// layout it reads them in (schedule::layout_rewrite).
struct WorkloadTensors {
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::vector<int> constant_inputs;  ///< indices into `inputs`, ascending

  WorkloadTensors() = default;
  WorkloadTensors(std::vector<Tensor> in, std::vector<Tensor> out, std::vector<int> constants = {})
      : inputs(std::move(in)), outputs(std::move(out)), constant_inputs(std::move(constants)) {}
};

/// A registered workload family.
struct WorkloadDef {
  std::string name;
  std::string doc;
  std::vector<ArgSpec> args;
  /// Builds the tensors from canonical arguments (a JSON array matching `args`).
  std::function<WorkloadTensors(const nlohmann::json& args)> build;
  /// Small arguments in text form ("7,5,9") for which the reference evaluator
  /// is quick: tests evaluate every registered workload with them.
  std::string example_args;
};

/// Registers a workload family; a duplicate name, or a required argument
/// after an optional one, is an internal error.
void register_workload(WorkloadDef def);

/// Every registered workload, sorted by name.
std::vector<const WorkloadDef*> registered_workloads();

/// The definition for `name`; an unknown name is kNotFound listing the registered ones.
const WorkloadDef& find_workload(std::string_view name);

/// "M:int, N:int, K:int[, dtype:dtype=float32]" for listings and errors.
std::string signature(const WorkloadDef& def);

/// Base of the two workload forms.
struct WorkloadNode : Object {};
using Workload = Ref<WorkloadNode>;

/// A workload by registered name and canonical arguments.
struct NamedWorkloadNode : WorkloadNode {
  std::string name;
  nlohmann::json args = nlohmann::json::array();
  TT_NODE(NamedWorkloadNode, "te.NamedWorkload")
  static void declare(FieldList<NamedWorkloadNode>& f);
};

/// A workload given as its tensors.
struct DagWorkloadNode : WorkloadNode {
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  /// Indices of the inputs that are constants (weights), ascending; a field
  /// added later: logs written before it read back with none.
  std::vector<int64_t> constant_inputs;
  TT_NODE(DagWorkloadNode, "te.DagWorkload")
  static void declare(FieldList<DagWorkloadNode>& f);
};

/// A named workload from arguments in any accepted form (JSON numbers/strings, or
/// text "64,64,64,float32" split by make_named_workload_from_text); the
/// arguments are checked against the signature and made canonical.
Workload make_named_workload(std::string_view name, const nlohmann::json& args);

/// Parses "A,B,..." against `name`'s signature: shapes as AxBxC or [A,B,C],
/// strings bare or JSON-quoted; an empty text is no arguments.
Workload make_named_workload_from_text(std::string_view name, std::string_view args);

/// The named workload a key `name(arg,...)` stands for (the inverse of
/// workload_key for named workloads). A "dag:" key names a hash, not a
/// workload, and is kInvalidArgument; so is text that is not a key.
Workload parse_workload_key(std::string_view key);

/// A workload holding the given tensors: every placeholder the outputs read
/// must be among `inputs` (placeholders, each once; unused ones are allowed),
/// and there must be at least one output; `constant_inputs` index inputs,
/// ascending. Otherwise kInvalidArgument.
Workload make_dag_workload(std::vector<Tensor> inputs, std::vector<Tensor> outputs,
                           std::vector<int> constant_inputs = {});

/// The tensors of a workload (calls the registered function for named ones).
WorkloadTensors workload_tensors(const Workload& w);

/// The stable key described in the file comment.
std::string workload_key(const Workload& w);

/// The structural hash of the program a workload stands for: its tensors
/// (inputs and outputs) as one DAG. A named workload's hash changes when its
/// registered definition does, so two processes can tell whether they build
/// the same program from the same key.
uint64_t workload_dag_hash(const Workload& w);

}  // namespace tensortune::te

namespace tensortune {
template <>
struct EnumNames<te::ArgType> {
  static constexpr std::array<std::string_view, 5> names = {"int", "float", "shape", "dtype",
                                                            "string"};
};
}  // namespace tensortune
