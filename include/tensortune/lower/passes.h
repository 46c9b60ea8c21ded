/// \file
/// The lowering passes: one free function per pass, each implemented in its
/// own file of src/lower/ and run in order by run_pipeline (pipeline.h).
///
/// Every pass takes a PrimFunc and returns a new one (or the same one when
/// nothing changed); the input is never altered. Passes that have options read
/// them from ir::PassContext::current(), so that a worker lowers exactly as the
/// tuner would (docs/architecture.md invariant 6).
#pragma once

#include "tensortune/lower/stmt.h"

namespace tensortune::lower {

/// "simplify": ir::simplify on every expression; an if with a constant
/// condition becomes the branch taken, and a loop with a constant extent of
/// at most 0 or an empty body disappears. Tested by
/// tests/lower/simplify_pass_test.cc.
PrimFunc simplify_pass(const PrimFunc& f);

/// "partition_loops": splits a serial, unrolled, parallel or vectorized loop
/// (into power-of-two extents only) with constant bounds
/// into up to three loops when guards below it (if and select conditions,
/// comparisons affine in its variable) hold throughout the inner loops' ranges
/// on a sub-range of it: the loop over that sub-range computes whole tiles,
/// whose guards remove_redundant_conditions then drops, and the loops before
/// and after keep them. A parallel loop stays one loop, its body branching
/// on the sub-range instead. A tile size that does not divide its axis costs
/// guards on the last tile only. Tested by tests/lower/partition_loops_test.cc.
PrimFunc partition_loops(const PrimFunc& f);

/// "remove_redundant_conditions": drops if and select conditions (and
/// conjuncts of them) that the ranges of the enclosing loops prove always
/// true, and branches they prove never taken; inside a branch on a loop
/// variable's comparison with a constant, proves from the narrowed range
/// (a range of one value becomes that constant); replaces loops of extent 1 by
/// their body with the loop variable set to the loop's min; folds (signed,
/// 32- or 64-bit) integer division and remainder by a constant when the ranges keep the quotient
/// constant (a fused index split apart again), also inside select
/// conditions, and min / max whose order the ranges decide (a padded
/// read's clamp of an index that stays in range). Ranges come from
/// ir::bound_of over the enclosing loops with constant bounds. Tested by
/// tests/lower/remove_redundant_conditions_test.cc.
PrimFunc remove_redundant_conditions(const PrimFunc& f);

/// "vectorize": turns each ForKind::kVectorized loop with a constant
/// power-of-two extent V (2 to 64) into vector operations of V lanes: the loop
/// variable becomes Ramp(min, 1, V), loads and stores whose index has
/// coefficient 1 in it become vector loads and stores, values that do not
/// depend on it stay scalar and are broadcast where they meet vectors. A loop
/// whose iterations may interfere (a store whose index does not vary with the
/// loop variable, or two accesses of a stored buffer at different indices)
/// becomes a serial loop. Any other loop that cannot be vectorized
/// (conditions or selects over loads that depend on the variable, non-unit
/// strides, intrinsics without a vector form, allocations, other extents)
/// stays a kVectorized loop, which code generators emit as a scalar loop
/// hinted for their compiler's vectorizer. With PassContext config
/// "tir.disable_vectorize" every kVectorized loop becomes a serial loop.
/// Tested by tests/lower/vectorize_test.cc.
PrimFunc vectorize_pass(const PrimFunc& f);

/// Whether vector code computes intrinsic `op` on `t` (with vector
/// instructions or a per-lane loop the C compiler vectorizes: exp, erf, tanh
/// and sigmoid in float, the back end's own arithmetic forms); the others
/// (log, pow, ...) are library calls per lane, which vectorize_pass leaves to
/// the compiler's own loop vectorizer.
bool has_vector_form(ir::Intrinsic op, ir::DataType t);

/// The most lanes a loop vectorize_pass turns into vector code may have (a
/// power of two); a longer vectorized loop is left to the C compiler.
inline constexpr int64_t kMaxVectorLanes = 64;

/// "unroll": replicates the body of each ForKind::kUnrolled loop with a
/// constant extent for each of its iterations, as long as the loop, with the
/// unrolled loops nested in it, replicates its innermost body at most
/// PassContext config "tir.max_unroll_step" times. A larger loop stays a
/// kUnrolled loop (code generators hint an unroll by up to
/// kUnrollHintFactor) while that many copies of its body fit the limit, and
/// becomes a serial loop past it; with "tir.max_unroll_step" 0 every
/// kUnrolled loop becomes a serial loop. Tested by tests/lower/unroll_test.cc.
PrimFunc unroll_pass(const PrimFunc& f);
/// How far a code generator asks its compiler to unroll a kUnrolled loop.
inline constexpr int64_t kUnrollHintFactor = 8;
/// The copies that hint asks for of a kUnrolled loop of `extent`: the
/// extent up to kUnrollHintFactor (kUnrollHintFactor when not constant).
int64_t unroll_hint_factor(const Expr& extent);

/// "storage_rewrite": hoists every allocation out of the serial and unrolled
/// loops (and ifs and lets) around it, up to the start of the innermost
/// enclosing parallel loop body or of the function (never out of a parallel
/// or vectorized loop, whose iterations each need their own storage), and
/// lets allocations of the same dtype whose scopes are disjoint share one
/// buffer the size of the largest. Skipped when PassContext config
/// "tir.disable_storage_rewrite" is true. Tested by
/// tests/lower/storage_rewrite_test.cc.
PrimFunc storage_rewrite_pass(const PrimFunc& f);

/// "split_wide_vectors": cuts every vector store (and vector let) wider than
/// the target's registers into register-wide pieces: with `vector_bytes` 32,
/// a store of 16 float lanes becomes two stores of 8. A generic vector wider
/// than the registers that the C compiler has to keep across a loop (a
/// register-tile accumulator) goes through memory; pieces stay in registers.
/// The pieces keep the one statement's meaning (a store reading lanes that an
/// earlier piece writes has all its pieces computed first). Not part of the
/// pipeline: the code generator runs it with its target's width. Tested by
/// tests/lower/split_wide_vectors_test.cc.
PrimFunc split_wide_vectors(const PrimFunc& f, int64_t vector_bytes);

/// "vectorize_reductions": rewrites an innermost serial or unrolled loop that
/// only folds a term into one element (`B[i] = B[i] op term(v)`, op + max or
/// min, i the same in every iteration, 32- or 64-bit numbers) into up to four
/// register-wide vector accumulators of `vector_bytes` each, folded into B[i]
/// once at the end: a softmax's row sum becomes vector adds instead of a chain
/// of scalar ones. A float sum is added up in another order, so its last bits
/// may differ. Loops whose term has no vector form are left alone. Not part
/// of the pipeline: the code generator runs it with its target's width, before
/// split_wide_vectors. Tested by tests/lower/vectorize_reductions_test.cc.
PrimFunc vectorize_reductions(const PrimFunc& f, int64_t vector_bytes);

}  // namespace tensortune::lower
