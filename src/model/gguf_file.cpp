#include "model/gguf_file.h"

#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"
#include "model/file_sniff.h"
#include "model/loaders.h"

namespace fuselm {

namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;          // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 8;  // arrays of arrays are legal; bound the recursion

enum GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Smallest encoding of one value of `type`, to bound element counts before allocating.
uint64_t min_value_bytes(uint32_t type) {
  switch (type) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: case kString: return 8;
    case kArray: return 12;
    default: return 0;
  }
}

// Bounds-checked reading of the header; every failure names the file and the byte offset.
class Reader {
 public:
  Reader(const MappedFile& file) : file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return file_.size() - pos_; }

  void need(uint64_t bytes, const std::string& what) const {
    FUSELM_CHECK(bytes <= remaining(), file_.path(), ": truncated GGUF file: reading ", what, " needs ", bytes,
                 " bytes at byte offset ", pos_, " but the file has ", file_.size(),
                 " bytes; the download was probably interrupted, download it again");
  }

  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, file_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& what) {
    const uint64_t len = read<uint64_t>(what + " (length)");
    need(len, what);
    std::string s(reinterpret_cast<const char*>(file_.data()) + pos_, len);
    pos_ += len;
    return s;
  }

  GgufValue read_value(uint32_t type, const std::string& key, int depth) {
    GgufValue v;
    switch (type) {
      case kU8: v.value = uint64_t{read<uint8_t>(key)}; break;
      case kI8: v.value = int64_t{read<int8_t>(key)}; break;
      case kU16: v.value = uint64_t{read<uint16_t>(key)}; break;
      case kI16: v.value = int64_t{read<int16_t>(key)}; break;
      case kU32: v.value = uint64_t{read<uint32_t>(key)}; break;
      case kI32: v.value = int64_t{read<int32_t>(key)}; break;
      case kU64: v.value = read<uint64_t>(key); break;
      case kI64: v.value = read<int64_t>(key); break;
      case kF32: v.value = double{read<float>(key)}; break;
      case kF64: v.value = read<double>(key); break;
      case kBool: {
        const uint8_t b = read<uint8_t>(key);
        FUSELM_CHECK(b <= 1, file_.path(), ": metadata '", key, "' is a bool with byte value ", int{b},
                     " at byte offset ", pos_ - 1, "; the file is corrupt");
        v.value = b == 1;
        break;
      }
      case kString: v.value = read_string(key); break;
      case kArray: {
        FUSELM_CHECK(depth < kMaxArrayNesting, file_.path(), ": metadata '", key, "' nests arrays more than ",
                     kMaxArrayNesting, " deep; the file is corrupt");
        const uint32_t elem_type = read<uint32_t>(key + " (array type)");
        const uint64_t count = read<uint64_t>(key + " (array length)");
        const uint64_t min_bytes = min_value_bytes(elem_type);
        FUSELM_CHECK(min_bytes != 0, file_.path(), ": metadata '", key, "' is an array of unknown value type ",
                     elem_type, " at byte offset ", pos_ - 12, "; the file is corrupt or from a newer GGUF version");
        FUSELM_CHECK(count <= remaining() / min_bytes, file_.path(), ": metadata '", key, "' claims ", count,
                     " elements at byte offset ", pos_ - 8, ", more than the remaining ", remaining(),
                     " bytes can hold; the file is truncated or corrupt");
        GgufArray items;
        items.reserve(count);
        for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(elem_type, key, depth + 1));
        v.value = std::move(items);
        break;
      }
      default:
        fail(file_.path(), ": metadata '", key, "' has unknown value type ", type, " at byte offset ", pos_ - 4,
             "; the file is corrupt or from a newer GGUF version");
    }
    return v;
  }

 private:
  const MappedFile& file_;
  size_t pos_ = 0;
};

struct GgmlTypeInfo {
  const char* name;
  int64_t block_size;  // values per block; 0 = size unknown here
  int64_t block_bytes;
};

GgmlTypeInfo ggml_type_info(uint32_t type) {
  switch (type) {
    case 0: return {"F32", 1, 4};
    case 1: return {"F16", 1, 2};
    case 2: return {"Q4_0", 32, 18};
    case 3: return {"Q4_1", 32, 20};
    case 6: return {"Q5_0", 32, 22};
    case 7: return {"Q5_1", 32, 24};
    case 8: return {"Q8_0", 32, 34};
    case 9: return {"Q8_1", 32, 36};
    case 10: return {"Q2_K", 256, 84};
    case 11: return {"Q3_K", 256, 110};
    case 12: return {"Q4_K", 256, 144};
    case 13: return {"Q5_K", 256, 176};
    case 14: return {"Q6_K", 256, 210};
    case 15: return {"Q8_K", 256, 292};
    case 16: return {"IQ2_XXS", 256, 66};
    case 17: return {"IQ2_XS", 256, 74};
    case 18: return {"IQ3_XXS", 256, 98};
    case 19: return {"IQ1_S", 256, 50};
    case 20: return {"IQ4_NL", 32, 18};
    case 21: return {"IQ3_S", 256, 110};
    case 22: return {"IQ2_S", 256, 82};
    case 23: return {"IQ4_XS", 256, 136};
    case 24: return {"I8", 1, 1};
    case 25: return {"I16", 1, 2};
    case 26: return {"I32", 1, 4};
    case 27: return {"I64", 1, 8};
    case 28: return {"F64", 1, 8};
    case 29: return {"IQ1_M", 256, 56};
    case 30: return {"BF16", 1, 2};
    case 34: return {"TQ1_0", 256, 54};
    case 35: return {"TQ2_0", 256, 66};
    case 39: return {"MXFP4", 32, 17};
    default: return {nullptr, 0, 0};
  }
}

}  // namespace

namespace loaders {
std::string ggml_type_name(uint32_t type) {
  const GgmlTypeInfo info = ggml_type_info(type);
  return info.name ? std::string(info.name) : str_cat("unknown type ", type);
}
}  // namespace loaders

const GgufArray& GgufValue::array() const {
  FUSELM_CHECK(is_array(), "GGUF metadata value is not an array");
  return std::get<GgufArray>(value);
}

const std::string& GgufValue::string() const {
  FUSELM_CHECK(std::holds_alternative<std::string>(value), "GGUF metadata value is not a string");
  return std::get<std::string>(value);
}

int64_t GgufValue::as_int() const {
  if (const auto* u = std::get_if<uint64_t>(&value)) {
    FUSELM_CHECK(*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                 "GGUF metadata value ", *u, " does not fit in int64");
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  fail("GGUF metadata value is not an integer");
}

double GgufValue::as_double() const {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&value)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  fail("GGUF metadata value is not a number");
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  const MappedFile& f = *file;
  if (f.size() < 4 || std::memcmp(f.data(), "GGUF", 4) != 0) {
    reject_wrong_file(f, "a GGUF file");
    const std::string_view magic(reinterpret_cast<const char*>(f.data()), std::min<size_t>(f.size(), 4));
    // The pre-GGUF llama.cpp formats wrote their magic as a little-endian uint32.
    const bool legacy = magic == "lmgg" || magic == "fmgg" || magic == "tjgg" || magic == "algg";
    fail(path, ": not a GGUF file: it begins with \"", printable_prefix(magic, 4), "\", expected the magic \"GGUF\"",
         f.size() < 4 ? str_cat(" (the file has only ", f.size(), " bytes)") : "",
         legacy ? "; this is a pre-GGUF llama.cpp file (GGML/GGMF/GGJT), re-convert the model with a current llama.cpp"
                : "");
  }
  auto gguf = std::unique_ptr<GgufFile>(new GgufFile());
  gguf->file_ = file;
  Reader r(f);
  r.read<uint32_t>("magic");
  const uint32_t version = r.read<uint32_t>("version");
  FUSELM_CHECK(version != 0x03000000u && version != 0x02000000u, path,
               ": this is a big-endian GGUF file; only little-endian GGUF files are supported");
  FUSELM_CHECK(version == 2 || version == 3, path, ": unsupported GGUF version ", version,
               " (supported: 3, and 2 which has the same layout)",
               version == 1 ? "; version 1 is obsolete, re-convert the model with a current llama.cpp" : "");
  gguf->version_ = version;

  const uint64_t n_tensors = r.read<uint64_t>("tensor count");
  const uint64_t n_kv = r.read<uint64_t>("metadata count");
  // Each metadata entry takes at least 13 bytes, each tensor descriptor at least 28.
  FUSELM_CHECK(n_kv <= r.remaining() / 13 && n_tensors <= r.remaining() / 28, path, ": header claims ", n_kv,
               " metadata entries and ", n_tensors, " tensors, more than the file's ", f.size(),
               " bytes can hold; the file is truncated or corrupt");

  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = r.read_string(str_cat("metadata key #", i));
    const uint32_t type = r.read<uint32_t>(str_cat("type of metadata '", key, "'"));
    GgufValue value = r.read_value(type, key, 0);
    FUSELM_CHECK(gguf->metadata_.emplace(key, std::move(value)).second, path, ": metadata key '", key,
                 "' appears twice; the file is corrupt");
  }

  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = gguf->find("general.alignment")) {
    FUSELM_CHECK(std::holds_alternative<uint64_t>(a->value) || std::holds_alternative<int64_t>(a->value), path,
                 ": general.alignment must be an integer");
    const int64_t v = a->as_int();
    FUSELM_CHECK(v > 0 && (v & (v - 1)) == 0, path, ": general.alignment = ", v, " is not a power of two");
    alignment = static_cast<uint64_t>(v);
  }

  std::set<std::string> names;
  gguf->tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = r.read_string(str_cat("name of tensor #", i));
    FUSELM_CHECK(names.insert(t.name).second, path, ": tensor '", t.name, "' appears twice; the file is corrupt");
    const uint32_t n_dims = r.read<uint32_t>(str_cat("dimension count of tensor '", t.name, "'"));
    FUSELM_CHECK(n_dims >= 1 && n_dims <= kMaxDims, path, ": tensor '", t.name, "' has ", n_dims,
                 " dimensions (expected 1 to ", kMaxDims, "); the file is corrupt");
    std::vector<int64_t> ne(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = r.read<uint64_t>(str_cat("dimensions of tensor '", t.name, "'"));
      FUSELM_CHECK(dim >= 1 && dim <= (1ull << 40) && numel <= (1ull << 50) / dim, path, ": tensor '", t.name,
                   "' has an implausible dimension ", dim, "; the file is corrupt");
      numel *= dim;
      ne[d] = static_cast<int64_t>(dim);
    }
    // GGML lists dimensions fastest-first; callers get rows first.
    t.shape.assign(ne.rbegin(), ne.rend());
    t.ggml_type = r.read<uint32_t>(str_cat("type of tensor '", t.name, "'"));
    t.offset = r.read<uint64_t>(str_cat("data offset of tensor '", t.name, "'"));
    FUSELM_CHECK(t.offset % alignment == 0, path, ": tensor '", t.name, "' data offset ", t.offset,
                 " is not a multiple of the alignment ", alignment, "; the file is corrupt");
    const GgmlTypeInfo info = ggml_type_info(t.ggml_type);
    if (info.block_size > 0) {
      FUSELM_CHECK(ne[0] % info.block_size == 0, path, ": tensor '", t.name, "' of type ", info.name,
                   " has rows of ", ne[0], " values, not a multiple of its block size ", info.block_size,
                   "; the file is corrupt");
      t.nbytes = static_cast<size_t>(numel / info.block_size * info.block_bytes);
    }
    gguf->tensors_.push_back(std::move(t));
  }

  // Tensor data starts at the next multiple of the alignment after the descriptors.
  const uint64_t data_start = (r.pos() + alignment - 1) / alignment * alignment;
  FUSELM_CHECK(data_start <= f.size() || n_tensors == 0, path, ": the tensor data section would start at byte ",
               data_start, " but the file has ", f.size(), " bytes; the file is truncated, download it again");
  for (GgufTensorInfo& t : gguf->tensors_) {
    const uint64_t begin = data_start + t.offset;
    FUSELM_CHECK(t.offset <= f.size() && begin <= f.size() && t.nbytes <= f.size() - begin, path,
                 ": tensor '", t.name, "' (", loaders::ggml_type_name(t.ggml_type), ", ", t.nbytes,
                 " bytes) lies outside the file: its data spans bytes ", begin, "..", begin + t.nbytes,
                 " but the file has ", f.size(), " bytes; the file is truncated (interrupted download?), "
                 "download it again");
    t.data = f.data() + begin;
  }
  return gguf;
}

}  // namespace fuselm
