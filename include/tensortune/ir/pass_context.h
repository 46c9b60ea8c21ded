/// \file
/// The PassContext: the optimisation level, registered config options,
/// disabled and required passes, and instruments in force while IR is lowered.
///
/// A PassContext is an immutable node, so it is a plain value: it is saved
/// with the build request, loaded in the worker and put in force there, which
/// is what makes docs/architecture.md invariant 6 ("the context travels") hold.
/// Instruments are never objects inside the context, only specs (a registered
/// name plus JSON parameters); a PassContextGuard creates the instrument
/// objects from the specs in whichever process it runs, and their results()
/// are plain JSON that can be sent back. Validation (unknown or badly typed
/// config options, unknown instruments or bad parameters, a pass both
/// disabled and required) runs in make() and again whenever a context is
/// loaded, so a worker rejects exactly what the tuner would.
/// docs/targets_and_pass_context.md describes what a worker inherits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tensortune/object/object.h"

namespace tensortune::ir {

/// Type of a config option's value.
enum class ConfigType { kBool, kInt, kFloat, kString };

/// A registered config option.
struct ConfigOptionInfo {
  std::string key;  ///< "layer.name", e.g. "tir.disable_vectorize"
  ConfigType type = ConfigType::kBool;
  nlohmann::json default_value;
  std::string doc;                   ///< one line
  std::vector<std::string> choices;  ///< for strings: the valid values; empty means any
};

/// Registers an option (at static initialisation); a duplicate key is an internal error.
void register_config_option(std::string key, ConfigType type, nlohmann::json default_value,
                            std::string doc, std::vector<std::string> choices = {});
/// The option with `key`, or nullptr.
const ConfigOptionInfo* find_config_option(std::string_view key);
/// Every registered option, sorted by key.
std::vector<ConfigOptionInfo> config_options();
/// "bool", "int", "float" or "string".
std::string_view config_type_name(ConfigType type);

/// An instrument by name and parameters; the instrument object is made from it where it runs.
struct InstrumentSpecNode : Object {
  std::string name;
  nlohmann::json params = nlohmann::json::object();
  TT_NODE(InstrumentSpecNode, "ir.InstrumentSpec")
  static void declare(FieldList<InstrumentSpecNode>& f);
};

/// Handle to an InstrumentSpecNode.
class InstrumentSpec : public Ref<InstrumentSpecNode> {
 public:
  using Ref::Ref;
  InstrumentSpec() = default;
  /// A validated spec: the name must be registered and accept `params` (null means {}).
  static InstrumentSpec make(std::string name, nlohmann::json params = nlohmann::json::object());
};

/// The pass context node; build it with PassContext::make.
struct PassContextNode : Object {
  int64_t opt_level = 2;
  nlohmann::json config = nlohmann::json::object();  ///< option key -> value (set options only)
  std::vector<std::string> disabled_passes;          ///< sorted, no duplicates
  std::vector<std::string> required_passes;          ///< sorted, no duplicates
  std::vector<InstrumentSpec> instruments;
  TT_NODE(PassContextNode, "ir.PassContext")
  static void declare(FieldList<PassContextNode>& f);

  /// The option's value or its registered default; T is bool, int64_t, double
  /// or std::string. An unknown key is a kNotFound error, a wrong T a kTypeMismatch.
  template <class T>
  T get_config(std::string_view key) const;
  /// True if `pass` is in disabled_passes.
  bool is_disabled(std::string_view pass) const;
  /// True if `pass` is in required_passes.
  bool is_required(std::string_view pass) const;
};

/// What PassContext::make takes. Chain the setters
/// (`PassContextOptions().with_opt_level(3).with_disabled("unroll")`): GCC 12
/// warns about designated initialisers that leave members out.
struct PassContextOptions {
  int64_t opt_level = 2;  ///< 0 to 3
  nlohmann::json config = nlohmann::json::object();
  std::vector<std::string> disabled_passes;
  std::vector<std::string> required_passes;
  std::vector<InstrumentSpec> instruments;

  /// Sets opt_level.
  PassContextOptions& with_opt_level(int64_t level);
  /// Sets config option `key` to `value`.
  PassContextOptions& with_config(const std::string& key, nlohmann::json value);
  /// Adds a disabled pass.
  PassContextOptions& with_disabled(std::string pass);
  /// Adds a required pass.
  PassContextOptions& with_required(std::string pass);
  /// Adds an instrument.
  PassContextOptions& with_instrument(InstrumentSpec spec);
};

/// Handle to a PassContextNode.
class PassContext : public Ref<PassContextNode> {
 public:
  using Ref::Ref;
  PassContext() = default;
  PassContext(const Ref<PassContextNode>& ref) : Ref(ref) {}  // NOLINT: same node

  /// A validated context in canonical form (pass lists sorted, ints given for
  /// float options converted); see the file comment for what is checked.
  static PassContext make(PassContextOptions options = {});
  /// The innermost context put in force by a PassContextGuard on this thread,
  /// or the default context (make({})) when there is none.
  static PassContext current();
  /// structural_hash of the context; stable across processes (records keep it).
  uint64_t hash() const;
  /// Structural equality.
  bool operator==(const PassContext& other) const;
};

/// Watches the passes run under a PassContextGuard. Made from an InstrumentSpec
/// in the process where the passes run; shares nothing with the process that
/// made the spec. Every hook may throw a user error.
class Instrument {
 public:
  virtual ~Instrument() = default;
  /// Called when the guard puts the context in force.
  virtual void enter_context() {}
  /// Called when the guard ends.
  virtual void exit_context() {}
  /// False skips the pass; not asked for required passes.
  virtual bool should_run(std::string_view pass) { return true; }
  /// Called with the IR a pass receives.
  virtual void before_pass(std::string_view pass, const ObjectPtr& ir) {}
  /// Called with the IR a pass returned.
  virtual void after_pass(std::string_view pass, const ObjectPtr& ir) {}
  /// What the instrument observed so far, as plain data that can cross a process boundary.
  virtual nlohmann::json results() const = 0;
};

/// Makes an instrument from its parameters; throws a user error for bad ones.
using InstrumentFactory = std::function<std::unique_ptr<Instrument>(const nlohmann::json& params)>;

/// A registered instrument.
struct InstrumentInfo {
  std::string name;
  std::string doc;  ///< one line, including the parameters
  InstrumentFactory factory;
};

/// Registers an instrument (at static initialisation); a duplicate name is an internal error.
void register_instrument(InstrumentInfo info);
/// The instrument called `name`, or nullptr.
const InstrumentInfo* find_instrument(std::string_view name);
/// Every registered instrument name, sorted.
std::vector<std::string> instrument_names();
/// A new instrument object for `spec`.
std::unique_ptr<Instrument> make_instrument(const InstrumentSpec& spec);

/// Runs `pass` on `ir` under the current context and returns its result, or
/// returns `ir` unchanged when the pass is skipped: a pass is skipped when it
/// is disabled, when opt_level < min_opt_level, or when an instrument's
/// should_run says no; a required pass is never skipped. Instruments of the
/// innermost guard see before_pass and after_pass.
ObjectPtr run_pass(std::string_view name, const ObjectPtr& ir,
                   const std::function<ObjectPtr(const ObjectPtr&)>& pass,
                   int64_t min_opt_level = 0);

/// Puts a context in force on this thread for its lifetime (RAII). Guards nest
/// and must end in reverse order; ending restores the outer context. Creates
/// the context's instruments from their specs and calls enter_context on
/// them, and exit_context when it ends (an exception there is reported on
/// stderr, since a destructor cannot throw).
class PassContextGuard {
 public:
  explicit PassContextGuard(PassContext context);
  ~PassContextGuard();
  PassContextGuard(const PassContextGuard&) = delete;
  PassContextGuard& operator=(const PassContextGuard&) = delete;

  /// The context this guard put in force.
  const PassContext& context() const { return context_; }
  /// Instrument name -> its results(), for sending back from a worker.
  nlohmann::json instrument_results() const;

 private:
  friend ObjectPtr run_pass(std::string_view, const ObjectPtr&,
                            const std::function<ObjectPtr(const ObjectPtr&)>&, int64_t);
  PassContext context_;
  std::vector<std::unique_ptr<Instrument>> instruments_;
};

/// run_pass on typed IR: `pass` takes and returns an R (a Ref type).
template <class R, class F>
requires std::is_base_of_v<RefBase, R> R run_pass(std::string_view name, const R& ir, F&& pass,
                                                  int64_t min_opt_level = 0) {
  using Node = typename R::NodeType;
  ObjectPtr out = run_pass(
      name, ObjectPtr(ir.ptr()),
      [&](const ObjectPtr& in) -> ObjectPtr {
        // `in` is `ir` itself: instruments observe the IR, they cannot replace it.
        return ObjectPtr(R(pass(R(std::static_pointer_cast<const Node>(in)))).ptr());
      },
      min_opt_level);
  return R(std::static_pointer_cast<const Node>(out));
}

extern template bool PassContextNode::get_config<bool>(std::string_view) const;
extern template int64_t PassContextNode::get_config<int64_t>(std::string_view) const;
extern template double PassContextNode::get_config<double>(std::string_view) const;
extern template std::string PassContextNode::get_config<std::string>(std::string_view) const;

}  // namespace tensortune::ir

/// In one .cc file: registers a config option (the arguments of register_config_option).
#define TT_REGISTER_CONFIG_OPTION(...)                                     \
  static const bool TT_CONCAT(tt_config_option_registered_, __COUNTER__) = \
      (::tensortune::ir::register_config_option(__VA_ARGS__), true)

/// In one .cc file: registers an instrument by name, one-line doc and factory.
#define TT_REGISTER_INSTRUMENT(name, doc, factory)                      \
  static const bool TT_CONCAT(tt_instrument_registered_, __COUNTER__) = \
      (::tensortune::ir::register_instrument(                           \
           ::tensortune::ir::InstrumentInfo{name, doc, factory}),       \
       true)
