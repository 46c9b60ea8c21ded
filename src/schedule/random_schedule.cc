#include "tensortune/schedule/random_schedule.h"

#include <algorithm>
#include <numeric>

namespace tensortune::schedule {
namespace {

class Generator {
 public:
  Generator(const ComputeDAG& dag, std::mt19937_64& rng, const RandomScheduleOptions& options)
      : state_(dag), rng_(rng), options_(options) {}

  State run() {
    // A few passes over the stages, consumers first (as a schedule is
    // usually written), each trying a handful of random primitives.
    for (int round = 0; round < 3 && static_cast<int>(steps_.size()) < options_.max_steps;
         ++round) {
      for (int s = state_.num_stages() - 1; s >= 0; --s) {
        if (s >= state_.num_stages() || state_.stage(s).is_placeholder()) continue;
        int tries = pick(4);
        for (int t = 0; t < tries && static_cast<int>(steps_.size()) < options_.max_steps; ++t) {
          try_step(s);
        }
      }
    }
    return State::make(steps_);
  }

 private:
  int pick(int n) { return n <= 0 ? 0 : std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  bool apply(const Step& step) {
    try {
      state_.apply(step);
    } catch (const UserError& e) {
      return false;  // an invalid draw: not kept
    }
    steps_.push_back(step);
    return true;
  }

  int64_t random_length(int64_t extent) {
    if (extent <= 1) return 1;
    if (chance(0.6)) {  // a divisor
      std::vector<int64_t> divisors;
      for (int64_t d = 1; d <= extent; ++d) {
        if (extent % d == 0) divisors.push_back(d);
      }
      return divisors[pick(static_cast<int>(divisors.size()))];
    }
    return 1 + pick(static_cast<int>(std::min<int64_t>(extent, 9)));  // often not a divisor
  }

  void try_step(int s) {
    const Stage& st = state_.stage(s);
    int n = static_cast<int>(st.leaves.size());
    switch (pick(13)) {
      case 0:
      case 1: {  // split
        if (n == 0) return;
        int pos = pick(n);
        int64_t extent = st.iters[st.leaves[pos]].extent;
        std::vector<int64_t> lengths = {random_length(extent)};
        if (chance(0.4))
          lengths.push_back(random_length(std::max<int64_t>(extent / lengths[0], 1)));
        apply(split(s, pos, lengths, chance(0.8)));
        return;
      }
      case 2: {  // reorder
        if (n < 2) return;
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng_);
        apply(reorder(s, order));
        return;
      }
      case 3: {  // fuse two or three consecutive loops
        if (n < 2) return;
        int pos = pick(n - 1);
        std::vector<int> iters = {pos, pos + 1};
        if (pos + 2 < n && chance(0.3)) iters.push_back(pos + 2);
        apply(fuse(s, iters));
        return;
      }
      case 4: {  // annotate
        if (n == 0) return;
        int pos = pick(n);
        IterAnnotation a = std::array{IterAnnotation::kParallel, IterAnnotation::kVectorize,
                                      IterAnnotation::kUnroll}[pick(3)];
        if (a == IterAnnotation::kParallel && !options_.allow_parallel) return;
        if (a == IterAnnotation::kVectorize) pos = n - 1;  // vectorize the innermost loop
        apply(annotate(s, pos, a));
        return;
      }
      case 5: {  // compute_at its consumer
        std::vector<int> consumers = state_.consumers(s);
        if (consumers.size() != 1) return;
        const Stage& c = state_.stage(consumers[0]);
        if (c.leaves.empty()) return;
        apply(compute_at(s, consumers[0], pick(static_cast<int>(c.leaves.size()))));
        return;
      }
      case 6:
        if (chance(0.7)) apply(compute_inline(s));
        return;
      case 7:
        if (chance(0.3)) apply(compute_root(s));
        return;
      case 8:
        if (n > 0)
          apply(
              pragma(s, pick(n),
                     "auto_unroll_max_step=" + std::to_string(std::array{0, 4, 16, 64}[pick(4)])));
        return;
      case 9: {  // cache_write or rfactor
        if (!options_.allow_dag_changes) return;
        if (chance(0.5)) {
          apply(cache_write(s, "local"));
          return;
        }
        // rfactor: split a reduction loop in two, then factor one part out.
        for (int pos = 0; pos < n; ++pos) {
          if (st.iters[st.leaves[pos]].kind != ir::IterKind::kReduce || st.is_transformed())
            continue;
          int64_t extent = st.iters[st.leaves[pos]].extent;
          if (!apply(split(s, pos, {random_length(extent)}))) return;
          apply(rfactor(s, pos + pick(2), pick(2)));
          return;
        }
        return;
      }
      case 10: {  // cache_read for one reader
        if (!options_.allow_dag_changes) return;
        std::vector<int> consumers = state_.consumers(s);
        if (consumers.empty()) return;
        apply(cache_read(s, "local", {consumers[pick(static_cast<int>(consumers.size()))]}));
        return;
      }
      case 11: {  // storage_order: a random permutation of the dimensions
        if (st.is_output) return;
        std::vector<int> order(st.tensor.shape().size());
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng_);
        apply(storage_order(s, order));
        return;
      }
      default: {  // storage_align on an unsplit axis
        if (n == 0 || st.is_output) return;
        apply(storage_align(s, pick(n), std::array{4, 8, 16}[pick(3)], pick(4)));
        return;
      }
    }
  }

  LoopState state_;
  std::mt19937_64& rng_;
  RandomScheduleOptions options_;
  std::vector<Step> steps_;
};

}  // namespace

State random_state(const ComputeDAG& dag, std::mt19937_64& rng,
                   const RandomScheduleOptions& options) {
  Generator g(dag, rng, options);
  return g.run();
}

}  // namespace tensortune::schedule
