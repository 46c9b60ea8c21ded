#include "codegen/fault_injection.h"

#include <string>
#include <vector>

#include "tensortune/codegen/c_codegen.h"
#include "tensortune/ir/pass_context.h"

namespace tensortune::codegen::detail {
namespace {

/// The C type a kernel stores `t` as, for changing an output element:
/// float and double as themselves, everything else (integers, bool, the
/// half types, kept as integer bits) as an unsigned integer of its width.
std::string element_type(ir::DataType t) {
  if (t.code() == ir::DataType::Code::kFloat && (t.bits() == 32 || t.bits() == 64)) {
    return t.bits() == 32 ? "float" : "double";
  }
  return "uint" + std::to_string(std::max(8, t.bits())) + "_t";
}

/// The statements that plant `fault` around `call` (the kernel's own entry),
/// as the body of the exported function. Faults are planted with volatile
/// accesses so that the C compiler cannot prove them undefined and turn them
/// into something else (a null store into a trap instruction, a spin loop
/// into nothing).
std::string faulted_body(const std::string& fault, const lower::PrimFunc& f,
                         const std::string& call) {
  std::string plain = "  return " + call + ";\n";
  std::string note = "  /* injected fault (testing.inject_fault=" + fault + ") */\n";
  if (fault == "segv") {
    return note + "  volatile uintptr_t address = 0;\n  *(volatile int*)address = 1;\n" + plain;
  }
  if (fault == "abort") return note + "  abort();\n" + plain;
  if (fault == "fpe") {
    // Both operands volatile: GCC rewrites 1 / x as a compare, which does not trap.
    return note +
           "  volatile int32_t zero = 0, one = 1;\n  volatile int32_t quotient = one / zero;\n" +
           "  (void)quotient;\n" + plain;
  }
  if (fault == "hang") return note + "  for (volatile int spin = 1; spin;) {\n  }\n" + plain;
  if (fault == "oom") {
    return note +
           "  for (;;) {\n"
           "    volatile char* block = (volatile char*)malloc((size_t)64 << 20);\n"
           "    if (block == NULL) {\n"
           "      fputs(\"tensortune kernel: out of memory (malloc of 64 MiB failed)\\n\", "
           "stderr);\n"
           "      abort();\n"
           "    }\n"
           "    for (size_t i = 0; i < ((size_t)64 << 20); i += 4096) block[i] = 1;\n"
           "  }\n" +
           plain;
  }
  if (fault == "wrong_answer") {
    // The first element of the last output: v + 1 + |v| differs from v for
    // every finite v; integers (and the bits of half types) get their lowest
    // bit flipped, with no overflow and no conversion out of range.
    size_t out = f->params.size() - 1;
    std::string type = element_type(f->params[out]->dtype);
    std::string element = "((" + type + "*)args[" + std::to_string(out) + "])[0]";
    bool real = type == "float" || type == "double";
    std::string change = real ? element + " = (" + type + ")((double)" + element +
                                    " + 1.0 + fabs((double)" + element + "))"
                              : element + " ^= 1";
    return note + "  int32_t status = " + call + ";\n  " + change + ";\n  return status;\n";
  }
  fail(ErrorKind::kInvalidArgument, "unknown fault '", fault, "' in testing.inject_fault");
}

class FaultInjectingSources final : public KernelSources {
 public:
  explicit FaultInjectingSources(std::unique_ptr<KernelSources> inner) : inner_(std::move(inner)) {}

  size_t add(const lower::PrimFunc& f) override {
    std::string fault = ir::PassContext::current()->get_config<std::string>("testing.inject_fault");
    TT_ICHECK(fault != "internal_error", "injected fault: an internal error generating ",
              f ? f->name : "a null function");
    if (!fault.empty() && fault != "compile_error") {
      (void)faulted_body(fault, f, "");  // an unknown fault fails here, adding nothing
    }
    size_t i = inner_->add(f);
    faults_.resize(i + 1);
    if (!fault.empty()) faults_[i] = {fault, f};  // a clean kernel's IR need not be kept
    return i;
  }

  std::string source(const std::vector<size_t>& which) const override {
    return with_faults(inner_->source(which), which);
  }

  std::vector<SourceUnit> units(const std::vector<size_t>& which, size_t count) const override {
    std::vector<SourceUnit> out = inner_->units(which, count);
    for (SourceUnit& unit : out) unit.text = with_faults(std::move(unit.text), unit.kernels);
    return out;
  }

  Module compile_units(const std::vector<SourceUnit>& units,
                       const ModuleOptions& options) const override {
    return inner_->compile_units(units, options);
  }

  Module compile(const std::string& source, const ModuleOptions& options) const override {
    return inner_->compile(source, options);
  }

  size_t size() const override { return inner_->size(); }

 private:
  /// `text`, holding the kernels `which`, with their injected faults.
  std::string with_faults(std::string text, const std::vector<size_t>& which) const {
    std::string entries;
    bool compile_error = false;
    for (size_t i : which) {
      const auto& [fault, f] = faults_.at(i);
      if (fault.empty()) continue;
      if (fault == "compile_error") {
        compile_error = true;
        continue;
      }
      // The kernel's own entry is renamed and made static; the exported
      // name becomes an entry that plants the fault around it.
      std::string symbol = c_function_name(f->name);
      std::string exported = "\nint32_t " + symbol + "(void** args) {\n";
      size_t at = text.find(exported);
      TT_ICHECK(at != std::string::npos && text.find(exported, at + 1) == std::string::npos,
                "the source does not export ", symbol, " once as int32_t ", symbol,
                "(void** args)");
      std::string inner_name = symbol + "_unfaulted";
      text.replace(at, exported.size(), "\nstatic int32_t " + inner_name + "(void** args) {\n");
      entries += "\nint32_t " + symbol + "(void** args) {\n" +
                 faulted_body(fault, f, inner_name + "(args)") + "}\n";
    }
    if (compile_error) text = "#error \"injected fault: compile_error\"\n" + text;
    return text + entries;
  }

  std::unique_ptr<KernelSources> inner_;
  std::vector<std::pair<std::string, lower::PrimFunc>> faults_;  ///< per kernel; "" for none
};

}  // namespace

std::unique_ptr<KernelSources> with_fault_injection(std::unique_ptr<KernelSources> inner) {
  return std::make_unique<FaultInjectingSources>(std::move(inner));
}

// Read by FaultInjectingSources::add.
TT_REGISTER_CONFIG_OPTION("testing.inject_fault", ir::ConfigType::kString, "",
                          "make built candidates fail on purpose, to test fault handling",
                          {"", "segv", "abort", "fpe", "hang", "oom", "compile_error",
                           "wrong_answer", "internal_error"});

}  // namespace tensortune::codegen::detail
