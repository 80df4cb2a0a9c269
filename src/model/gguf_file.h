#pragma once
// A parsed GGUF (v3) file: metadata key/values and tensor descriptors, data left in the mapping.
// Used by the model loader (weights, config) and the tokenizer (embedded vocabularies).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/mapped_file.h"

namespace fuselm {

struct GgufValue;
using GgufArray = std::vector<GgufValue>;
struct GgufValue {
  // Integers of every width are widened to int64/uint64; f32/f64 to double.
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> value;

  bool is_array() const { return std::holds_alternative<GgufArray>(value); }
  const GgufArray& array() const;        // throws Error when not an array
  const std::string& string() const;     // throws Error when not a string
  int64_t as_int() const;                // any integer; throws otherwise
  double as_double() const;              // any number
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;       // GGML type id (0 = F32, 1 = F16, 8 = Q8_0, 30 = BF16, ...)
  std::vector<int64_t> shape;   // in GGML order reversed: shape[0] is the slowest dimension (rows)
  uint64_t offset = 0;          // from the start of the data section
  const std::byte* data = nullptr;  // into the mapping
  size_t nbytes = 0;
};

class GgufFile {
 public:
  // Maps and parses `path`; throws Error (bad magic printed as text, unknown version, truncation
  // with tensor name / offset / file size) when it is not a valid GGUF v3 file.
  static std::unique_ptr<GgufFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;  // null when absent
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  std::shared_ptr<const MappedFile> mapping() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace fuselm
