/// \file
/// Targets: what code is generated for (a kind plus typed attributes and an
/// optional host), and the hardware parameters derived from it.
///
/// A Target is an immutable value. Every way of building one (a string such as
/// `c -mcpu=native -num-cores=2 -mattr=avx2,fma`, a JSON config, make()) goes
/// through one normaliser, so the node always holds the canonical form:
///  - only attributes that differ from their registered default are stored;
///  - lists of strings (-mattr) are sets: sorted, without duplicates;
///  - symbolic values are resolved (`-mcpu=native`, and the bare target
///    `native`, become the local CPU's name, features, core count and caches),
///    so a target means the same in every process that reads it.
/// Hence `==` (exact structural equality, host included) is also equality of
/// meaning, equal targets print equal, and `parse(t.str()) == t`.
/// docs/targets_and_pass_context.md lists the kinds, attributes and rules.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/ir/dtype.h"
#include "tensortune/object/object.h"

namespace tensortune::ir {

/// Machine parameters the schedule search and the cost model use; 0 means
/// "not described by this kind of target" (caches of a GPU, block limits of a CPU).
struct HardwareParamsNode : Object {
  int64_t num_cores = 1;          ///< CPU cores to use, or streaming multiprocessors of a GPU
  int64_t vector_bytes = 16;      ///< widest SIMD register / vector access the code may use
  int64_t cache_line_bytes = 64;  ///< cache line (CPU) or memory transaction (GPU) size
  int64_t l1_cache_bytes = 0;
  int64_t l2_cache_bytes = 0;
  int64_t l3_cache_bytes = 0;
  int64_t max_threads_per_block = 0;
  int64_t max_shared_memory_per_block = 0;
  int64_t warp_size = 0;
  TT_NODE(HardwareParamsNode, "ir.HardwareParams")
  static void declare(FieldList<HardwareParamsNode>& f);
};

/// Handle to a HardwareParamsNode.
class HardwareParams : public Ref<HardwareParamsNode> {
 public:
  using Ref::Ref;
  HardwareParams() = default;
  HardwareParams(const Ref<HardwareParamsNode>& ref) : Ref(ref) {}  // NOLINT: same node
};

/// Vector registers the code may keep live, derived from the vector width:
/// 32 with 64-byte vectors (AVX-512), 16 otherwise (AVX2, SSE, and a safe
/// bound for others).
int64_t vector_registers(const HardwareParamsNode& hw);

/// Lanes of a vector of `dtype` elements (at least 1).
int64_t vector_lanes(const HardwareParamsNode& hw, DataType dtype);

/// A target node: its kind, its non-default attributes and its host (may be null).
struct TargetNode : Object {
  std::string kind;
  /// Attribute name (without the leading '-') -> typed JSON value; see the file comment.
  nlohmann::json attrs = nlohmann::json::object();
  Ref<TargetNode> host;
  TT_NODE(TargetNode, "ir.Target")
  static void declare(FieldList<TargetNode>& f);

  /// True if `name` ("num-cores" or "-num-cores") is set to a non-default value.
  bool has_attr(std::string_view name) const;
  /// The attribute's value or its registered default; T is int64_t, bool,
  /// std::string or std::vector<std::string>. Unknown names are kNotFound errors.
  template <class T>
  T attr(std::string_view name) const;
};

/// Handle to a TargetNode with value semantics (see the file comment).
class Target : public Ref<TargetNode> {
 public:
  using Ref::Ref;
  Target() = default;
  Target(const Ref<TargetNode>& ref) : Ref(ref) {}  // NOLINT: same node

  /// Parses `kind -attr=value ...`, or `native` (= `c -mcpu=native`). String
  /// values with spaces are double-quoted (\" and \\ escape inside quotes);
  /// lists are comma-separated; `-host=<quoted target string>` sets the host.
  static Target parse(std::string_view text);
  /// Builds from a target string or a config object
  /// `{"kind": "c", "num-cores": 4, "mattr": ["avx2"], "host": <string or object>}`.
  static Target from_json(const nlohmann::json& config);
  /// Builds from a kind, typed attribute values (keys with or without '-') and a host.
  static Target make(std::string_view kind, const nlohmann::json& attrs = nlohmann::json::object(),
                     const Target& host = Target());

  /// The canonical string: kind, set attributes sorted by name, then -host.
  std::string str() const;
  /// The config object accepted by from_json (set attributes only).
  nlohmann::json to_json() const;
  /// The host, or a null target.
  Target host() const;
  /// This target with `host`: an equal host (even another object) returns this
  /// target unchanged; a different existing host is a kInvalidArgument error naming both.
  Target with_host(const Target& host) const;
  /// This target without its host.
  Target without_host() const;
  /// Exact structural equality, host included; two null targets are equal.
  /// (Hash with structural_hash. Target deliberately has no hash() member:
  /// with one it would also look like a value type to field_traits.h, and a
  /// Target field of a node would be ambiguous.)
  bool operator==(const Target& other) const;
};

/// Prints Target::str() ("null" for a null target).
std::ostream& operator<<(std::ostream& os, const Target& target);

/// Whether a schedule tuned for `tuned_for` is valid (compiles and computes
/// the same answer) on `run_on`; speed may differ. Same kind is required, then
/// the kind's rule applies (docs/targets_and_pass_context.md), then hosts are
/// checked recursively when both have one. When false and `why` is given, it
/// receives the reason.
bool compatible(const Target& tuned_for, const Target& run_on, std::string* why = nullptr);

/// The hardware parameters a target describes.
HardwareParams hardware_params(const Target& target);

/// The attributes of `target` (and of its host) that name a program to run
/// or its arguments, set to other than their defaults, as "-name=value": a
/// target read from a task file or a log must have none, since a file is
/// data and running the tool on it must not run a program the file chose.
std::vector<std::string> program_attributes(const Target& target);

/// Type of a target attribute.
enum class TargetAttrType { kInt, kBool, kString, kStringList };

/// A registered attribute of a target kind.
struct TargetAttrInfo {
  std::string name;  ///< without the leading '-'
  TargetAttrType type = TargetAttrType::kString;
  nlohmann::json default_value;
  std::string doc;        ///< one line
  int64_t min_value = 0;  ///< smallest valid value of an int attribute
  /// Names a program to run or its arguments (-compiler, -cflags): a target
  /// read from a file may not set it (see program_attributes).
  bool names_program = false;
};

/// A registered target kind; the hooks may be empty.
struct TargetKindInfo {
  std::string name;
  std::string doc;  ///< one line
  bool can_be_host = false;
  std::vector<TargetAttrInfo> attrs;
  /// Replaces symbolic values (such as -mcpu=native) in normalised attrs by concrete ones.
  std::function<void(nlohmann::json& attrs)> resolve;
  /// Checks relations between attributes; throws a user error to reject the target.
  std::function<void(const TargetNode&)> validate;
  /// The kind's compatibility rule; empty means "every attribute equal".
  std::function<bool(const TargetNode& tuned_for, const TargetNode& run_on, std::string* why)>
      compatible;
  /// Derives hardware parameters; empty means the kind describes none.
  std::function<HardwareParams(const TargetNode&)> hardware_params;

  /// The attribute called `name` (with or without '-'), or nullptr.
  const TargetAttrInfo* attr(std::string_view name) const;
};

/// Registers a kind (at static initialisation); a duplicate name is an internal error.
void register_target_kind(TargetKindInfo info);
/// The kind called `name`; an unknown name is a kNotFound error listing the known kinds.
const TargetKindInfo& target_kind(std::string_view name);
/// Every registered kind name, sorted.
std::vector<std::string> target_kind_names();
/// Name of an attribute type as errors and docs print it ("int", "list of strings").
std::string_view target_attr_type_name(TargetAttrType type);

extern template int64_t TargetNode::attr<int64_t>(std::string_view) const;
extern template bool TargetNode::attr<bool>(std::string_view) const;
extern template std::string TargetNode::attr<std::string>(std::string_view) const;
extern template std::vector<std::string> TargetNode::attr<std::vector<std::string>>(
    std::string_view) const;

}  // namespace tensortune::ir

/// In one .cc file: registers a target kind built by the expression `make_info`.
#define TT_REGISTER_TARGET_KIND(make_info)                               \
  static const bool TT_CONCAT(tt_target_kind_registered_, __COUNTER__) = \
      (::tensortune::ir::register_target_kind(make_info), true)
