#include "core/dtype.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace fuselm {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "f32" || s == "fp32" || s == "float32") return DType::F32;
  if (s == "f16" || s == "fp16" || s == "float16" || s == "half") return DType::F16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  fail("unsupported dtype '", name, "' (supported: f32, f16, bf16)");
}

size_t dtype_bytes(DType t, int64_t n) {
  switch (t) {
    case DType::F32: return static_cast<size_t>(n) * 4;
    case DType::F16:
    case DType::BF16: return static_cast<size_t>(n) * 2;
    case DType::Q8_0: return static_cast<size_t>(n / kQ8_0BlockSize) * kQ8_0BlockBytes;
  }
  return 0;
}

void convert_dtype(const void* src, DType src_type, void* dst, DType dst_type, int64_t n) {
  FUSELM_CHECK(src_type != DType::Q8_0 && dst_type != DType::Q8_0,
               "convert_dtype: use dequantize_q8_0 for Q8_0 data");
  if (src_type == dst_type) {
    memcpy(dst, src, dtype_bytes(src_type, n));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float v = load_as_f32(src, src_type, i);
    switch (dst_type) {
      case DType::F32: static_cast<float*>(dst)[i] = v; break;
      case DType::F16: static_cast<uint16_t*>(dst)[i] = f32_to_f16_bits(v); break;
      case DType::BF16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16_bits(v); break;
      case DType::Q8_0: break;
    }
  }
}

void dequantize_q8_0(const void* src, int64_t n, float* dst) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const uint8_t* block = bytes + b * kQ8_0BlockBytes;
    uint16_t scale_bits;
    memcpy(&scale_bits, block, 2);
    float scale = f16_bits_to_f32(scale_bits);
    const auto* q = reinterpret_cast<const int8_t*>(block + 2);
    for (int i = 0; i < kQ8_0BlockSize; ++i) dst[b * kQ8_0BlockSize + i] = scale * q[i];
  }
}

}  // namespace fuselm
