#pragma once
// Shared test helpers: where the shared test models live, and skipping when they are absent.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace fuselm::test {

// FUSELM_MODELS_DIR overrides the build-time default (../shared/models next to the checkout).
inline std::string models_dir() {
  if (const char* env = std::getenv("FUSELM_MODELS_DIR"); env && *env) return env;
  return FUSELM_DEFAULT_MODELS_DIR;
}

inline std::string model_path(const std::string& rel) { return models_dir() + "/" + rel; }

inline std::string cli_path() { return FUSELM_CLI_PATH; }

// The most memory this process has held so far, in MiB: a test that a step allocates little checks
// that this grew little across it (CTest runs each test in a process of its own).
inline double peak_resident_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

}  // namespace fuselm::test

// Skips the current test with a clear message when a shared model file is missing.
#define FUSELM_REQUIRE_MODEL(rel)                                                              \
  do {                                                                                         \
    if (!std::filesystem::exists(::fuselm::test::model_path(rel)))                             \
      GTEST_SKIP() << "test model '" << ::fuselm::test::model_path(rel)                       \
                   << "' not found; set FUSELM_MODELS_DIR to the shared models folder to run this test"; \
  } while (0)
