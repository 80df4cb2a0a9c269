#pragma once
// Where and how a benchmark ran: enough to reproduce it or to tell two results apart.
#include <optional>
#include <string>

#include "bench/gpu_info.h"

namespace fuselm::bench {

struct Environment {
  std::string commit;        // FUSELM_COMMIT if set, else the commit the build was configured at
  std::string command_line;  // the full command, arguments quoted where needed
  std::string date_utc;      // ISO 8601, when the run started
  std::string compiler;
  bool optimized = false;    // built with optimisation (a debug build's numbers are meaningless)
  std::string host_cpu;      // /proc/cpuinfo model name
  int host_threads = 0;      // OpenMP threads the CPU backend uses
  std::optional<GpuInfo> gpu;
};

// `with_gpu` queries the CUDA device (throws Error when there is none).
Environment collect_environment(bool with_gpu);

// The commit this binary names in results: FUSELM_COMMIT from the environment when set, else the
// configure-time `git describe` of the source tree, else "unknown" (a build without .git).
std::string build_commit();

// The running process's command line from /proc/self/cmdline, shell-quoted; "" when unreadable.
std::string process_command_line();

// Seconds since the epoch as ISO 8601 UTC, e.g. "2026-11-29T21:47:06Z".
std::string iso8601_utc_now();

}  // namespace fuselm::bench
