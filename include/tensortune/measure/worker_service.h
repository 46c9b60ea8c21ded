/// \file
/// The worker's side of the protocol (protocol.h): what `tensortune-worker
/// --serve` does with each request. Building goes through codegen's one
/// pipeline (codegen/build.h); running loads the built library, checks the
/// output against reference outputs when asked, and times it. The worker
/// keeps nothing between requests that changes an answer: only caches of
/// loaded libraries, inputs and reference outputs, keyed by what they were
/// made from (the workload's DAG hash and the seed).
#pragma once

#include <string>
#include <string_view>

namespace tensortune::measure {

/// The reply to one request. Never throws: a request that cannot be read or
/// served as a whole gets a RequestError. A candidate that crashes takes the
/// worker with it; the pool reports that.
std::string serve_request(std::string_view request);

/// Asks the kernel to kill this process's whole group (the worker and any
/// compiler it runs) when the parent process `parent` dies, and exits at once
/// when it is gone already. The worker calls it at start with --parent-pid.
void die_with_parent(int parent);

}  // namespace tensortune::measure
