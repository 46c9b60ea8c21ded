// Helpers for the measurement tests: a small task, pools that use the
// worker built with the tests and a private module cache, and a look at
// this process's children.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/module_cache.h"
#include "tensortune/measure/measurer.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/te/workload.h"

namespace tensortune::measure::testing {

/// matmul 16x16x16 float32 on the plain C target.
inline te::Task small_task() {
  return te::Task::make(te::make_named_workload_from_text("matmul", "16,16,16"),
                        ir::Target::parse("c"));
}

/// A valid state of small_task() with a vectorized inner loop: j split by 8, k
/// moved outside j.1, j.1 vectorized.
inline schedule::State vectorized_state() {
  using namespace schedule;
  return State::make(
      {split(2, 1, {8}), reorder(2, {0, 1, 3, 2}), annotate(2, 3, IterAnnotation::kVectorize)});
}

/// A module cache private to this test program, removed when it exits.
inline const std::string& test_cache_dir() { return tensortune::testing::private_cache_dir(); }

inline WorkerPoolOptions pool_options() {
  WorkerPoolOptions o;
  o.worker_path = TT_WORKER_PATH;
  return o;
}

inline LocalBuilderOptions builder_options(int parallelism = 2) {
  LocalBuilderOptions o;
  o.parallelism = parallelism;
  o.cache_dir = test_cache_dir();
  o.pool = pool_options();
  return o;
}

inline LocalRunnerOptions runner_options() {
  LocalRunnerOptions o;
  o.timing.repeat = 2;
  o.timing.check = true;
  o.timeout = std::chrono::seconds(5);
  // The default memory limit (8 GiB): the run worker caps each run at what
  // the candidate may need, so the planted oom fails at once below it.
  o.pool = pool_options();
  return o;
}

/// A run request for `built`, a kernel of `task`, as LocalRunner sends it.
inline std::string run_request(const te::Task& task, const BuildResult& built,
                               const RunnerOptions& options = RunnerOptions()) {
  RunRequest r;
  r.task = task;
  r.library = built.library;
  r.library_sha256 = built.library_sha256;
  r.function = built.function;
  r.options = Ref<RunnerOptions>(make_node<RunnerOptions>(options));
  r.workload_hash = workload_hash(task);
  return encode(r);
}

/// A PassContext with testing.inject_fault = `fault` ("" for none).
inline ir::PassContext fault_context(const std::string& fault) {
  ir::PassContextOptions o;
  if (!fault.empty()) o.with_config("testing.inject_fault", fault);
  return ir::PassContext::make(o);
}

/// Process ids whose parent is this process, or whose process group is one of `groups`.
inline std::set<pid_t> children_and_group_members(const std::vector<pid_t>& groups = {}) {
  std::set<pid_t> out;
  DIR* proc = opendir("/proc");
  if (!proc) return out;
  while (dirent* entry = readdir(proc)) {
    pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // Fields after the command name (which may hold spaces) in parentheses.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    char state;
    pid_t ppid, pgrp;
    rest >> state >> ppid >> pgrp;
    // A killed process of another parent is a zombie until init reaps it: gone.
    bool ours = ppid == ::getpid();
    if (!ours && state == 'Z') continue;
    if (ours || std::find(groups.begin(), groups.end(), pgrp) != groups.end()) {
      out.insert(pid);
    }
  }
  closedir(proc);
  return out;
}

/// children_and_group_members(groups) once it equals `expected`, or after
/// two seconds (killed processes take a moment to go).
inline std::set<pid_t> settled_processes(const std::vector<pid_t>& groups,
                                         const std::set<pid_t>& expected) {
  std::set<pid_t> found;
  for (int i = 0; i < 200; ++i) {
    found = children_and_group_members(groups);
    if (found == expected) break;
    ::usleep(10000);
  }
  return found;
}

/// This process's resident set size in bytes.
inline size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace tensortune::measure::testing
