#pragma once
// A read-only memory mapping of a whole file: weights are used in place, never copied on load.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace fuselm {

class MappedFile {
 public:
  // Maps `path` read-only; throws Error naming the path and the OS reason when it cannot.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) text file; throws Error when it cannot.
std::string read_text_file(const std::string& path);

}  // namespace fuselm
