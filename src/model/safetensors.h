#pragma once
// A parsed .safetensors file: an 8-byte header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the data, used in place from the mapping.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace fuselm {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;     // as written in the file: "F32", "BF16", "I8", ...
  std::optional<DType> dtype;  // set for the dtypes the engine reads (F32, F16, BF16)
  std::vector<int64_t> shape;
  uint64_t file_offset = 0;  // of the first data byte, from the start of the file
  const std::byte* data = nullptr;
  size_t nbytes = 0;
};

class SafetensorsFile {
 public:
  // Maps and parses `path`; throws Error naming the file, the tensor and the byte offsets when the
  // header is malformed or a tensor's bytes lie outside the file.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  std::shared_ptr<const MappedFile> mapping() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

}  // namespace fuselm
