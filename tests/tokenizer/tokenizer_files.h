#pragma once
// Tokenizer files written by a test, and the check that loading one fails clearly.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace fuselm::test {

// Writes `bytes` to `name` in the test's temporary folder and returns the path.
inline std::string write_temp(const std::string& name, const std::string& bytes) {
  std::string path = testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Loading `path` fails with an error that contains `needle`.
inline void expect_load_error(const std::string& path, const std::string& needle) {
  try {
    load_tokenizer(path);
    ADD_FAILURE() << "expected an error for " << path;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace fuselm::test
