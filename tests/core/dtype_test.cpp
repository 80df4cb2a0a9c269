#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"

namespace fuselm {
namespace {

TEST(DType, Bf16RoundTripIsExactForRepresentableValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 3.140625f, 65536.0f, -1e-20f}) {
    float r = bf16_bits_to_f32(f32_to_bf16_bits(v));
    EXPECT_LE(std::fabs(r - v), std::fabs(v) * (1.0f / 128)) << v;
  }
  EXPECT_EQ(bf16_bits_to_f32(f32_to_bf16_bits(1.0f)), 1.0f);
}

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly between two bf16 values (1 and 1 + 2^-7): ties go to even (1).
  EXPECT_EQ(bf16_bits_to_f32(f32_to_bf16_bits(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_bits_to_f32(f32_to_bf16_bits(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
}

TEST(DType, F16ConversionsMatchIeee) {
  EXPECT_EQ(f16_bits_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_bits_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_bits_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(f16_bits_to_f32(f32_to_f16_bits(1e6f))));
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  for (int i = 0; i < 10000; ++i) {
    float v = dist(gen);
    float r = f16_bits_to_f32(f32_to_f16_bits(v));
    EXPECT_LE(std::fabs(r - v), std::fabs(v) * (1.0f / 2048) + 1e-7f) << v;
  }
  // Every f16 bit pattern that is a finite number survives f16 -> f32 -> f16.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    EXPECT_EQ(f32_to_f16_bits(f16_bits_to_f32(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(DType, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(parse_dtype("BF16"), DType::BF16);
  EXPECT_EQ(parse_dtype("fp16"), DType::F16);
  EXPECT_EQ(parse_dtype("float32"), DType::F32);
  EXPECT_THROW(parse_dtype("int4"), Error);
}

TEST(DType, DequantizesQ8_0) {
  uint8_t block[kQ8_0BlockBytes] = {};
  uint16_t scale = f32_to_f16_bits(0.5f);
  memcpy(block, &scale, 2);
  for (int i = 0; i < 32; ++i) block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 16));
  float out[32];
  dequantize_q8_0(block, 32, out);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.5f * (i - 16));
}

}  // namespace
}  // namespace fuselm
