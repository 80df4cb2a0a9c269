#pragma once
// What a kernel launcher returns: launchers never throw; front ends and engines decide what a
// failed status means (an exception, an exit code, an HTTP error).
#include <string>
#include <utility>

namespace fuselm {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok_status() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return message_.empty(); }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string m) : message_(m.empty() ? std::string("unknown error") : std::move(m)) {}
  std::string message_;
};

}  // namespace fuselm
