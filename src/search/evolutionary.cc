#include "tensortune/search/evolutionary.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "tensortune/measure/record.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/search/default_schedule.h"
#include "tensortune/search/mutate.h"

namespace tensortune::search {

void EvolutionaryOptions::declare(FieldList<EvolutionaryOptions>& f) {
  f.def("population", &EvolutionaryOptions::population)
      .option("population", "evolutionary search: states per generation")
      .range(1, 1 << 20)
      .def("generations", &EvolutionaryOptions::generations)
      .option("generations", "evolutionary search: generations per batch")
      .range(0, 1000)
      .def("mutation_prob", &EvolutionaryOptions::mutation_prob)
      .option("mutation-prob",
              "evolutionary search: chance that a child is a mutation of its parent")
      .range(0, 1)
      .def("crossover_prob", &EvolutionaryOptions::crossover_prob)
      .option("crossover-prob",
              "evolutionary search: chance that a child is a crossover of two parents")
      .range(0, 1)
      .def("eps_greedy", &EvolutionaryOptions::eps_greedy)
      .option("eps-greedy", "evolutionary search: share of each batch drawn at random")
      .range(0, 1)
      .def("init_measured_ratio", &EvolutionaryOptions::init_measured_ratio)
      .range(0, 1)
      .def("annotate", &EvolutionaryOptions::annotate)
      .def("weight_tile_size", &EvolutionaryOptions::weight_tile_size)
      .range(0, 1e6)
      .def("weight_auto_unroll", &EvolutionaryOptions::weight_auto_unroll)
      .range(0, 1e6)
      .def("weight_compute_location", &EvolutionaryOptions::weight_compute_location)
      .range(0, 1e6)
      .def("weight_parallel", &EvolutionaryOptions::weight_parallel)
      .range(0, 1e6)
      .validate([](const EvolutionaryOptions& o) {
        TT_CHECK(o.mutation_prob + o.crossover_prob <= 1, kInvalidArgument,
                 "the mutation and crossover probabilities add up to ",
                 o.mutation_prob + o.crossover_prob, "; they must add up to at most 1");
        // Loading checks the nested set on its own; options built in code
        // are checked here, with the set that holds them.
        validate(o.annotate);
      });
}
TT_REGISTER_NODE(EvolutionaryOptions);

using schedule::State;

// ---------------------------------------------------------------------------
// SharedCostModel

void SharedCostModel::add(const std::string& task_key, ProgramFeatures features, double cost) {
  data_.add(task_key, std::move(features), cost);
}

void SharedCostModel::retrain() {
  if (data_.size() == trained_on_) return;
  auto start = std::chrono::steady_clock::now();
  try {
    note_ = model_->train(data_);
  } catch (const UserError& e) {
    note_ = std::string("training failed: ") + e.what();
    if (!warned_) {
      std::fprintf(stderr,
                   "warning: the %s cost model could not be trained (%s); the search goes on with "
                   "%s scores\n",
                   model_->name().c_str(), e.what(), model_->trained() ? "its last" : "random");
      warned_ = true;
    }
  }
  trained_on_ = data_.size();
  if (!note_.empty() && !model_->trained() && data_.size() >= 64 && !warned_) {
    std::fprintf(stderr,
                 "warning: the %s cost model cannot train (%s); the search goes on with "
                 "random scores\n",
                 model_->name().c_str(), note_.c_str());
    warned_ = true;
  }
  training_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<float> SharedCostModel::predict(const std::vector<const ProgramFeatures*>& programs) {
  return model_->predict(programs);
}

// ---------------------------------------------------------------------------
// EvolutionarySearchPolicy

EvolutionarySearchPolicy::EvolutionarySearchPolicy(const te::Task& task, uint64_t seed,
                                                   std::shared_ptr<SharedCostModel> model,
                                                   EvolutionaryOptions options)
    : task_(task),
      task_key_(measure::task_key(task)),
      dag_(te::workload_tensors(task->workload)),
      sketches_(generate_sketches(dag_, sketch_options(task))),
      machine_(task->hardware_params),
      options_(std::move(options)),
      model_(std::move(model)),
      rng_(seed) {
  TT_CHECK(model_, kInvalidArgument, "the evolutionary policy needs a cost model");
  try {
    validate(options_);
  } catch (const UserError& e) {
    fail(e.kind(), "evolutionary search options: ", e.what());
  }
}

std::optional<EvolutionarySearchPolicy::Candidate> EvolutionarySearchPolicy::evaluate(
    const State& state) {
  uint64_t key = structural_hash(state);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    Lowered l;
    try {
      LoweredState lowered = lower_for_search(dag_, state);
      l.program = lowered.program_hash;
      l.features = std::move(lowered.features);
      l.ok = true;
    } catch (const UserError& e) {
    }
    it = cache_.emplace(key, std::move(l)).first;
  }
  if (!it->second.ok) return std::nullopt;
  return Candidate{state, it->second.program, &it->second.features};
}

void EvolutionarySearchPolicy::prefetch(const std::vector<State>& states) {
  // Lowering is pure: the states not lowered yet are lowered in parallel,
  // then cached in order, so that the outcome is the same on any core count.
  std::vector<std::pair<uint64_t, const State*>> missing;
  std::unordered_set<uint64_t> queued;
  for (const auto& s : states) {
    uint64_t key = structural_hash(s);
    if (!cache_.count(key) && queued.insert(key).second) missing.emplace_back(key, &s);
  }
  if (missing.empty()) return;
  std::vector<Lowered> lowered(missing.size());
  auto work = [&](size_t begin, size_t step) {
    for (size_t i = begin; i < missing.size(); i += step) {
      try {
        LoweredState l = lower_for_search(dag_, *missing[i].second);
        lowered[i].program = l.program_hash;
        lowered[i].features = std::move(l.features);
        lowered[i].ok = true;
      } catch (const UserError& e) {
      }
    }
  };
  size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()),
                                    (missing.size() + 63) / 64);
  std::vector<std::thread> pool;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  for (size_t t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        work(t, threads);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        failure = std::current_exception();
      }
    });
  }
  work(0, threads);
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  for (size_t i = 0; i < missing.size(); ++i)
    cache_.emplace(missing[i].first, std::move(lowered[i]));
}

State EvolutionarySearchPolicy::random_state() {
  const Sketch& sketch =
      sketches_[std::uniform_int_distribution<size_t>(0, sketches_.size() - 1)(rng_)];
  return sample_state(sketch, dag_, *machine_, options_.annotate, rng_);
}

std::optional<State> EvolutionarySearchPolicy::mutate(const State& s) {
  const double weights[] = {options_.weight_tile_size, options_.weight_auto_unroll,
                            options_.weight_compute_location, options_.weight_parallel};
  std::discrete_distribution<int> which(std::begin(weights), std::end(weights));
  // A draw that has nothing to mutate (no pragma, say) tries another kind.
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::optional<State> out;
    switch (which(rng_)) {
      case 0: out = mutate_tile_size(dag_, s, options_.annotate, rng_); break;
      case 1: out = mutate_auto_unroll(dag_, s, options_.annotate.auto_unroll_steps, rng_); break;
      case 2: out = mutate_compute_location(dag_, s, rng_); break;
      default: out = mutate_parallel(dag_, s, rng_); break;
    }
    if (out) return out;
  }
  return std::nullopt;
}

std::vector<State> EvolutionarySearchPolicy::random_new(size_t count,
                                                        std::unordered_set<uint64_t>& taken) {
  std::vector<State> out;
  // Small spaces run out of new programs: give up after many repeats.
  for (size_t tries = 0; out.size() < count && tries < 50 * count + 100; ++tries) {
    std::optional<Candidate> c = evaluate(random_state());
    if (c && taken.insert(c->program).second) out.push_back(c->state);
  }
  return out;
}

std::vector<State> EvolutionarySearchPolicy::propose(size_t count) {
  if (count == 0) return {};
  std::vector<State> out;
  // The schedule compile gives an untuned task is measured first (unless
  // the log has it): a tuned task then never ends slower than an untuned one.
  if (!default_proposed_) {
    default_proposed_ = true;
    std::optional<Candidate> c = evaluate(default_schedule(task_));
    if (c && taken_.insert(c->program).second) out.push_back(c->state);
  }
  for (State& s : search(count - out.size())) out.push_back(std::move(s));
  return out;
}

std::vector<State> EvolutionarySearchPolicy::search(size_t count) {
  if (count == 0) return {};
  if (cache_.size() > 65536) cache_.clear();
  if (!model_->model().trained()) return random_new(count, taken_);

  // The population: the best measured states, then random samples.
  const size_t population = static_cast<size_t>(options_.population);
  std::vector<Candidate> pop;
  size_t from_measured =
      std::min(measured_.size(),
               static_cast<size_t>(options_.init_measured_ratio * static_cast<double>(population)));
  std::vector<State> initial;
  for (size_t i = 0; i < from_measured; ++i) initial.push_back(measured_[i].second);
  while (initial.size() < population) initial.push_back(random_state());
  prefetch(initial);
  for (const auto& s : initial) {
    if (auto c = evaluate(s)) pop.push_back(*c);
  }
  if (pop.empty()) return {};

  // The best predicted program not measured yet, by program.
  std::unordered_map<uint64_t, std::pair<float, State>> best;
  std::uniform_real_distribution<double> u(0, 1);
  for (int g = 0;; ++g) {
    std::vector<const ProgramFeatures*> features;
    for (const auto& c : pop) features.push_back(c.features);
    std::vector<float> scores = model_->predict(features);
    for (size_t i = 0; i < pop.size(); ++i) {
      if (taken_.count(pop[i].program)) continue;
      auto [it, inserted] = best.emplace(pop[i].program, std::make_pair(scores[i], pop[i].state));
      if (!inserted && scores[i] > it->second.first) it->second = {scores[i], pop[i].state};
    }
    if (g >= options_.generations) break;
    // Parents in proportion to their score (shifted to be positive).
    float low = *std::min_element(scores.begin(), scores.end());
    std::vector<double> weights;
    for (float s : scores) weights.push_back(static_cast<double>(s - low) + 1e-3);
    std::discrete_distribution<size_t> parent(weights.begin(), weights.end());
    // Children first (the random draws in a fixed order), lowered together.
    std::vector<std::pair<size_t, std::optional<State>>> children;
    children.reserve(population);
    while (children.size() < population) {
      size_t a = parent(rng_);
      double r = u(rng_);
      std::optional<State> child;
      if (r < options_.crossover_prob) {
        child = crossover(dag_, pop[a].state, pop[parent(rng_)].state, rng_);
      } else if (r < options_.crossover_prob + options_.mutation_prob) {
        child = mutate(pop[a].state);
      }
      children.emplace_back(a, std::move(child));
    }
    std::vector<State> fresh;
    for (const auto& [a, child] : children) {
      if (child) fresh.push_back(*child);
    }
    prefetch(fresh);
    std::vector<Candidate> next;
    next.reserve(population);
    for (const auto& [a, child] : children) {
      std::optional<Candidate> c = child ? evaluate(*child) : std::nullopt;
      next.push_back(c ? *c : pop[a]);
    }
    pop = std::move(next);
  }

  // The best predictions, then a few random programs (epsilon-greedy).
  std::vector<std::tuple<float, uint64_t, State>> ranked;
  for (auto& [program, scored] : best) ranked.emplace_back(scored.first, program, scored.second);
  std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
    if (std::get<0>(x) != std::get<0>(y)) return std::get<0>(x) > std::get<0>(y);
    return std::get<1>(x) < std::get<1>(y);
  });
  size_t random_count =
      static_cast<size_t>(std::round(options_.eps_greedy * static_cast<double>(count)));
  size_t best_count = count > random_count ? count - random_count : 0;
  std::vector<State> out;
  for (const auto& [score, program, state] : ranked) {
    if (out.size() >= best_count) break;
    if (taken_.insert(program).second) out.push_back(state);
  }
  for (auto& s : random_new(count - out.size(), taken_)) out.push_back(std::move(s));
  return out;
}

void EvolutionarySearchPolicy::update(const std::vector<State>& states,
                                      const std::vector<measure::MeasureResult>& results) {
  for (size_t i = 0; i < states.size() && i < results.size(); ++i) {
    const measure::MeasureResult& r = results[i];
    // A lost worker says nothing of the candidate: it may be proposed again.
    if (r.error_code == measure::ErrorCode::kDeviceLost) continue;
    std::optional<Candidate> c = evaluate(states[i]);
    if (!c) continue;
    taken_.insert(c->program);
    double cost = r.ok() ? r.median_cost() : HUGE_VAL;
    model_->add(task_key_, *c->features, cost);
    if (r.ok()) measured_.emplace_back(cost, states[i]);
  }
  std::stable_sort(measured_.begin(), measured_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  model_->retrain();
}

PolicyFactory evolutionary_policy(std::shared_ptr<SharedCostModel> model,
                                  EvolutionaryOptions options) {
  return [model, options](const te::Task& task, uint64_t seed) -> std::unique_ptr<SearchPolicy> {
    return std::make_unique<EvolutionarySearchPolicy>(task, seed, model, options);
  };
}

}  // namespace tensortune::search
