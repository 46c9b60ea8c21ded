/// \file
/// testing.inject_fault: kernels that fail on purpose, so that the fault
/// tests take the path a real bad candidate takes. A wrapper around a back
/// end's KernelSources (kernel_sources() puts it around every one), so no
/// emitter knows about faults.
#pragma once

#include <memory>

#include "tensortune/codegen/backend.h"

namespace tensortune::codegen::detail {

/// `inner`, with the fault of the PassContext current at each add() planted
/// in that kernel's exported function: segv, abort, fpe, hang and oom before
/// the kernel runs, wrong_answer after it (its last parameter's first
/// element changed), compile_error as an #error in the source, and
/// internal_error as an internal error while adding it (a bug of tensortune's
/// own, which must never be blamed on the candidate). The source of a module
/// is C, and each kernel is exported as `int32_t SYMBOL(void** args)`.
std::unique_ptr<KernelSources> with_fault_injection(std::unique_ptr<KernelSources> inner);

}  // namespace tensortune::codegen::detail
