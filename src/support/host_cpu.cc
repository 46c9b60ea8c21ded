#include "tensortune/support/host_cpu.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>

#include "tensortune/support/files.h"
#include "tensortune/support/strings.h"

namespace tensortune {
namespace {

/// A file of /proc or /sys, or "" where it cannot be read.
std::string read_text_file(const std::string& path) {
  return read_file_if_exists(path).value_or("");
}

// "48K", "2048K", "32M" -> bytes; 0 if unreadable.
int64_t parse_cache_size(std::string_view text) {
  text = trim(text);
  if (text.empty()) return 0;
  int64_t scale = 1;
  switch (text.back()) {
    case 'K': scale = int64_t{1} << 10; break;
    case 'M': scale = int64_t{1} << 20; break;
    case 'G': scale = int64_t{1} << 30; break;
    default: break;
  }
  if (scale != 1) text.remove_suffix(1);
  long long v = 0;
  return parse_int(text, &v) && v > 0 ? v * scale : 0;
}

// /proc/cpuinfo flag -> feature name as -mattr (and GCC's -m options) spell it.
// Only instruction-set features are kept: kernel flags such as "hypervisor"
// differ between otherwise identical machines and would break compatible().
const std::map<std::string, std::string, std::less<>>& cpuinfo_features() {
  static const std::map<std::string, std::string, std::less<>> table = {
      // x86 ("flags")
      {"sse", "sse"},
      {"sse2", "sse2"},
      {"pni", "sse3"},
      {"ssse3", "ssse3"},
      {"sse4_1", "sse4.1"},
      {"sse4_2", "sse4.2"},
      {"popcnt", "popcnt"},
      {"avx", "avx"},
      {"avx2", "avx2"},
      {"fma", "fma"},
      {"f16c", "f16c"},
      {"bmi1", "bmi"},
      {"bmi2", "bmi2"},
      {"avx512f", "avx512f"},
      {"avx512cd", "avx512cd"},
      {"avx512bw", "avx512bw"},
      {"avx512dq", "avx512dq"},
      {"avx512vl", "avx512vl"},
      {"avx512ifma", "avx512ifma"},
      {"avx512vbmi", "avx512vbmi"},
      {"avx512_vnni", "avx512vnni"},
      {"avx512_bf16", "avx512bf16"},
      {"avx512_fp16", "avx512fp16"},
      {"avx_vnni", "avxvnni"},
      {"amx_tile", "amx-tile"},
      {"amx_int8", "amx-int8"},
      {"amx_bf16", "amx-bf16"},
      // AArch64 ("Features")
      {"asimd", "neon"},
      {"asimdhp", "fp16"},
      {"asimddp", "dotprod"},
      {"sve", "sve"},
      {"sve2", "sve2"},
      {"i8mm", "i8mm"},
      {"bf16", "bf16"},
  };
  return table;
}

void read_cpuinfo(HostCpu& cpu) {
  std::string text = read_text_file("/proc/cpuinfo");
  std::string flags, part;
  for (const auto& line : split(text, '\n')) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key(trim(std::string_view(line).substr(0, colon)));
    std::string value(trim(std::string_view(line).substr(colon + 1)));
    if ((key == "model name" || key == "Hardware") && cpu.name.empty()) cpu.name = value;
    if (key == "CPU part" && part.empty()) part = value;
    if ((key == "flags" || key == "Features") && flags.empty()) flags = value;
  }
  if (cpu.name.empty() && !part.empty()) cpu.name = "cpu-part-" + part;
  std::set<std::string> features;
  for (const auto& flag : split(flags, ' ')) {
    auto it = cpuinfo_features().find(flag);
    if (it != cpuinfo_features().end()) features.insert(it->second);
  }
#if defined(__x86_64__) || defined(__i386__)
  // Without /proc (not Linux), ask the CPU itself.
  if (flags.empty()) {
    __builtin_cpu_init();
// __builtin_cpu_supports takes only string literals, hence one line per feature.
#define TT_CPU_FEATURE(name) \
  if (__builtin_cpu_supports(name)) features.insert(name)
    TT_CPU_FEATURE("sse");
    TT_CPU_FEATURE("sse2");
    TT_CPU_FEATURE("sse3");
    TT_CPU_FEATURE("ssse3");
    TT_CPU_FEATURE("sse4.1");
    TT_CPU_FEATURE("sse4.2");
    TT_CPU_FEATURE("popcnt");
    TT_CPU_FEATURE("avx");
    TT_CPU_FEATURE("avx2");
    TT_CPU_FEATURE("fma");
    TT_CPU_FEATURE("bmi");
    TT_CPU_FEATURE("bmi2");
    TT_CPU_FEATURE("avx512f");
#undef TT_CPU_FEATURE
  }
#endif
  cpu.features.assign(features.begin(), features.end());
  // Collapse runs of spaces ("Intel(R) Xeon(R)   Gold") so the name reads cleanly.
  std::string collapsed;
  for (const auto& word : split(cpu.name, ' ')) {
    if (word.empty()) continue;
    if (!collapsed.empty()) collapsed += ' ';
    collapsed += word;
  }
  cpu.name = collapsed;
  if (cpu.name.empty()) {
    struct utsname uts {};
    cpu.name = uname(&uts) == 0 ? uts.machine : "unknown";
  }
}

void read_caches(HostCpu& cpu) {
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int i = 0; i < 16; ++i) {
    std::string dir = base + std::to_string(i) + "/";
    std::string level_text = read_text_file(dir + "level");
    if (level_text.empty()) continue;
    std::string type(trim(read_text_file(dir + "type")));
    if (type == "Instruction") continue;
    long long level = 0, line = 0;
    if (!parse_int(trim(level_text), &level)) continue;
    int64_t size = parse_cache_size(read_text_file(dir + "size"));
    if (level == 1) {
      cpu.l1 = size;
      if (parse_int(trim(read_text_file(dir + "coherency_line_size")), &line) && line > 0) {
        cpu.cache_line = line;
      }
    } else if (level == 2) {
      cpu.l2 = size;
    } else if (level == 3) {
      cpu.l3 = size;
    }
  }
  // glibc knows the sizes where sysfs does not (other kernels, restricted containers).
  auto from_sysconf = [](int64_t& slot, int name) {
    if (slot > 0) return;
    long v = sysconf(name);
    if (v > 0) slot = v;
  };
#ifdef _SC_LEVEL1_DCACHE_SIZE
  from_sysconf(cpu.l1, _SC_LEVEL1_DCACHE_SIZE);
  from_sysconf(cpu.cache_line, _SC_LEVEL1_DCACHE_LINESIZE);
  from_sysconf(cpu.l2, _SC_LEVEL2_CACHE_SIZE);
  from_sysconf(cpu.l3, _SC_LEVEL3_CACHE_SIZE);
#endif
}

HostCpu probe() {
  HostCpu cpu;
  read_cpuinfo(cpu);
  int64_t cores = 0;
#ifdef __linux__
  // The CPUs this process may run on, which is fewer than the machine's under taskset or a
  // container.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
#endif
  if (cores < 1) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cores = online > 0 ? online : 1;
  }
  cpu.cores = cores;
  read_caches(cpu);
  return cpu;
}

}  // namespace

const HostCpu& host_cpu() {
  static const HostCpu cpu = probe();
  return cpu;
}

std::string host_name() {
  // For trying a job of several hosts on one machine (tests/mpi/mpi_test.py).
  if (const char* given = std::getenv("TENSORTUNE_HOST_NAME"); given && *given) return given;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == 0) return "unknown";
  return name;
}

}  // namespace tensortune
