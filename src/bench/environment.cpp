#include "bench/environment.h"

#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

namespace fuselm::bench {

#ifndef FUSELM_GIT_COMMIT
#define FUSELM_GIT_COMMIT "unknown"
#endif

std::string build_commit() {
  if (const char* env = std::getenv("FUSELM_COMMIT"); env && *env) return env;
  return FUSELM_GIT_COMMIT;
}

namespace {

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                            "-_./=:,+@%") == std::string::npos)
    return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

std::string process_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  size_t start = 0;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!out.empty()) out += ' ';
    out += shell_quote(raw.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string iso8601_utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

Environment collect_environment(bool with_gpu) {
  Environment env;
  env.commit = build_commit();
  env.command_line = process_command_line();
  env.date_utc = iso8601_utc_now();
#if defined(__clang__)
  env.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  env.compiler = "gcc " __VERSION__;
#else
  env.compiler = "unknown";
#endif
#if defined(__OPTIMIZE__)
  env.optimized = true;
#endif
  env.host_cpu = cpu_model_name();
  env.host_threads = omp_get_max_threads();
  if (with_gpu) env.gpu = query_gpu_info();
  return env;
}

}  // namespace fuselm::bench
