#pragma once
// Errors a user can act on. Library code throws fuselm::Error with a message that says what was
// expected, what was found, where, and what to do; only front ends turn it into an exit code.
#include <sstream>
#include <stdexcept>
#include <string>

namespace fuselm {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  throw Error(str_cat(parts...));
}

}  // namespace fuselm

// Throws fuselm::Error with the streamed message parts when `cond` is false.
#define FUSELM_CHECK(cond, ...)                 \
  do {                                          \
    if (!(cond)) ::fuselm::fail(__VA_ARGS__);   \
  } while (0)
