#include "model/safetensors.h"

#include <cstring>
#include <limits>

#include "core/error.h"
#include "model/file_sniff.h"
#include "model/json_util.h"

namespace fuselm {

namespace {

// The safetensors reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

// Element sizes of every dtype the format defines, so byte ranges can be checked even for tensors
// the engine does not read. 0 = unknown name (range not checked against the shape).
size_t element_bytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

std::optional<DType> engine_dtype(const std::string& dtype) {
  if (dtype == "F32") return DType::F32;
  if (dtype == "F16") return DType::F16;
  if (dtype == "BF16") return DType::BF16;
  return std::nullopt;
}

}  // namespace

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  reject_wrong_file(*file, "a safetensors file");
  const size_t size = file->size();
  FUSELM_CHECK(size >= 8, path, ": file is ", size, " bytes, too short for a safetensors header (8-byte length "
               "+ JSON); the file is truncated, download it again");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file->data(), 8);
  FUSELM_CHECK(header_len <= kMaxHeaderBytes && header_len <= size - 8, path, ": header length field says ",
               header_len, " bytes but the file has ", size - 8,
               " bytes after it; this is not a safetensors file or it is truncated");
  const std::string_view header(reinterpret_cast<const char*>(file->data()) + 8, header_len);
  const nlohmann::json json = parse_json_text(header, path + " (safetensors header)");
  FUSELM_CHECK(json.is_object(), path, ": safetensors header is not a JSON object");

  auto result = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  result->file_ = file;
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  for (const auto& [name, entry] : json.items()) {
    if (name == "__metadata__") continue;
    auto bad = [&](const auto&... why) {
      fail(path, ": tensor '", name, "' has a malformed header entry: ", why...);
    };
    if (!entry.is_object()) bad("expected an object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) bad("no \"dtype\" string");
    if (!entry.contains("shape") || !entry["shape"].is_array()) bad("no \"shape\" array");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
      bad("no \"data_offsets\" pair");

    SafetensorsTensor t;
    t.name = name;
    t.dtype_name = entry["dtype"].get<std::string>();
    t.dtype = engine_dtype(t.dtype_name);
    uint64_t numel = 1;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) bad("shape ", entry["shape"].dump(), " is not a list of non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim) bad("shape ", entry["shape"].dump(), " overflows");
      numel *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      bad("data_offsets ", offsets.dump(), " are not non-negative integers");
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end) bad("data_offsets ", offsets.dump(), " end before they begin");
    FUSELM_CHECK(end <= data_size, path, ": tensor '", name, "' lies outside the file: its data ends at byte ",
                 data_start + end, " but the file has ", size,
                 " bytes; the file is truncated (interrupted download?), download it again");
    const size_t elem = element_bytes(t.dtype_name);
    if (elem != 0 && (numel > std::numeric_limits<uint64_t>::max() / elem || end - begin != numel * elem)) {
      bad("shape ", entry["shape"].dump(), " of ", t.dtype_name, " needs ", numel * elem, " bytes but data_offsets ",
          offsets.dump(), " span ", end - begin);
    }
    t.file_offset = data_start + begin;
    t.data = file->data() + t.file_offset;
    t.nbytes = end - begin;
    result->tensors_.emplace(name, std::move(t));
  }
  return result;
}

}  // namespace fuselm
