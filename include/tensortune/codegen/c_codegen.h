/// \file
/// C code generation for CPU targets (kind "c").
///
/// generate_c() turns lowered kernels (after lower::run_pipeline) into one C11
/// translation unit (GNU dialect: vector extensions and statement
/// expressions, as GCC and Clang accept them). Each PrimFunc becomes
///
///     int32_t NAME(void** args)
///
/// where args[i] is the data pointer of params[i] (dense, of the buffer's
/// dtype); it returns 0. What the generated code relies on:
///  - vector expressions (Ramp, Broadcast, vector loads and arithmetic) use
///    GCC vector types sized lanes x element bytes, at most the target's
///    vector width (lower::run_target_pipeline cuts wider statements to it first);
///    vector memory accesses are unaligned; masks (bool vectors) are int32
///    lanes of 0 / -1;
///  - float16 and bfloat16 are computed in float and converted where they
///    are loaded, stored or cast (float16 as _Float16, bfloat16 by bit
///    manipulation with round to nearest-even);
///  - integers wrap (compile with -fwrapv, which compile_flags gives);
///    int32 loop variables are declared int64_t, so index arithmetic on them
///    is 64 bits wide (the same values for the indices of buffers under 2^31
///    elements, for which lowering uses int32);
///    floordiv/floormod round toward negative infinity via helper functions;
///    float min/max have fmin/fmax semantics (the non-NaN operand wins);
///  - the outermost parallel loop becomes `#pragma omp parallel for` with the
///    target's core count (none with one core); parallel loops inside it run
///    serially; a vectorized loop the vectorize pass left as a loop gets
///    `#pragma omp simd`, a remaining unrolled loop `#pragma GCC unroll`;
///  - allocations of at most 64 KiB (while the enclosing ones leave room
///    within 256 KiB of stack) are aligned local arrays, declared where they
///    are allocated (so private to a parallel iteration); larger ones use
///    aligned_alloc and free, and abort when memory runs out.
#pragma once

#include <string>
#include <vector>

#include "tensortune/ir/target.h"
#include "tensortune/lower/stmt.h"

namespace tensortune::codegen {

/// The C source of `funcs` for `target` (kind "c"). Kernel names must be
/// distinct once made C identifiers (c_function_name); code that codegen
/// cannot express (tensor-level nodes, free variables, a buffer used outside
/// its allocation, vector lanes that are not a power of two) is a
/// kInvalidArgument error naming the function. Made through kernel_sources()
/// (backend.h), so under a PassContext with testing.inject_fault set every
/// exported function carries that fault (codegen/fault_injection.h).
std::string generate_c(const std::vector<lower::PrimFunc>& funcs, const ir::Target& target);

/// The C symbol generate_c gives a kernel called `name`: `name` itself when it
/// is a valid identifier that no C keyword or library name takes, otherwise
/// a deterministic variant of it.
std::string c_function_name(const std::string& name);

/// The compiler flags for building generate_c's output for `target` into a
/// shared library: -std=gnu11 -O3 -fPIC -shared -fopenmp -fwrapv
/// -fno-math-errno -Wno-psabi -lm; -march=native when the target's CPU and
/// features are the local CPU's, else a baseline -march with one -m<feature>
/// per x86 feature of -mattr; on x86, -mprefer-vector-width matching the
/// target's vector width; then the target's -cflags (which may override
/// earlier flags).
std::vector<std::string> compile_flags(const ir::Target& target);

}  // namespace tensortune::codegen
