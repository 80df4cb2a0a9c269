#pragma once
// Shared test helpers: where the shared test models live, and skipping when they are absent.
#include <gtest/gtest.h>

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

}  // namespace fuselm::test

// Skips the current test with a clear message when a shared model file is missing.
#define FUSELM_REQUIRE_MODEL(rel)                                                              \
  do {                                                                                         \
    if (!std::filesystem::exists(::fuselm::test::model_path(rel)))                             \
      GTEST_SKIP() << "test model '" << ::fuselm::test::model_path(rel)                       \
                   << "' not found; set FUSELM_MODELS_DIR to the shared models folder to run this test"; \
  } while (0)
