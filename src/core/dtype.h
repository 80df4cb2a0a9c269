#pragma once
// Storage dtypes of weights and activations, and exact host conversions between them.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/hd.h"

namespace fuselm {

enum class DType : uint8_t { F32, F16, BF16, Q8_0 };

// Q8_0 (GGUF): blocks of 32 int8 values sharing one f16 scale: 2 + 32 bytes per block.
inline constexpr int kQ8_0BlockSize = 32;
inline constexpr int kQ8_0BlockBytes = 34;

std::string_view dtype_name(DType t);
// Parses "f32"/"float32", "f16"/"fp16"/"float16", "bf16"/"bfloat16" (case-insensitive); throws Error otherwise.
DType parse_dtype(std::string_view name);
// Bytes for `n` elements (n must be a multiple of 32 for Q8_0).
size_t dtype_bytes(DType t, int64_t n);

FUSELM_HD float bf16_bits_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, as the hardware conversion does; NaN stays NaN.
FUSELM_HD uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

FUSELM_HD float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, with overflow to infinity and gradual underflow.
FUSELM_HD uint16_t f32_to_f16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                                // subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // 14 + (113 - exp)
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000u) >> 13);
  uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

// Reads element `i` of a buffer of dtype `t` (F32, F16 or BF16) as float.
FUSELM_HD float load_as_f32(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::F16: return f16_bits_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::BF16: return bf16_bits_to_f32(static_cast<const uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

// Rounds a float to what a `t` buffer would store (identity for F32).
FUSELM_HD float round_to(DType t, float f) {
  switch (t) {
    case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(f));
    case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(f));
    default: return f;
  }
}

// Converts `n` elements between F32/F16/BF16 buffers on the host.
void convert_dtype(const void* src, DType src_type, void* dst, DType dst_type, int64_t n);

// Dequantizes `n` Q8_0 values (n a multiple of 32) to f32.
void dequantize_q8_0(const void* src, int64_t n, float* dst);

}  // namespace fuselm
