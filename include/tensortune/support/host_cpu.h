/// \file
/// This machine's CPU as the operating system reports it (/proc/cpuinfo,
/// sysfs, the process's CPU affinity): what `-mcpu=native` in a target
/// stands for. Probed once per process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensortune {

struct HostCpu {
  std::string name;                   ///< /proc/cpuinfo's model name, or the architecture
  std::vector<std::string> features;  ///< instruction sets, as -mattr spells them ("avx2")
  int64_t cores = 1;                  ///< the CPUs this process may run on
  int64_t cache_line = 0;             ///< bytes; 0 where unknown
  int64_t l1 = 0, l2 = 0, l3 = 0;     ///< data cache bytes per level; 0 where unknown
};

/// The host's CPU, probed on first use.
const HostCpu& host_cpu();

/// This machine's network name (gethostname), "unknown" if it has none;
/// $TENSORTUNE_HOST_NAME instead when set (to try a job of several hosts on
/// one machine).
std::string host_name();

}  // namespace tensortune
