#include "kernels/mma_packing.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

namespace fuselm {
namespace {

TEST(MmaPacking, IndexIsABijectionOverThePaddedMatrix) {
  const int64_t rows = 48, cols = 64, k_tiles = mma_tiles(cols);
  std::set<int64_t> seen;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = mma_packed_index(r, c, k_tiles);
      ASSERT_GE(i, 0);
      ASSERT_LT(i, mma_packed_elems(rows, cols));
      ASSERT_TRUE(seen.insert(i).second) << r << "," << c;
    }
}

TEST(MmaPacking, LaneHoldsItsFragmentContiguously) {
  // Lane 4g+t holds rows g, g+8 and columns 2t, 2t+1, 2t+8, 2t+9 of the tile, 8 values in a row.
  const int64_t k_tiles = 1;
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    EXPECT_EQ(mma_packed_index(g, 2 * t, k_tiles), lane * 8 + 0);
    EXPECT_EQ(mma_packed_index(g, 2 * t + 1, k_tiles), lane * 8 + 1);
    EXPECT_EQ(mma_packed_index(g + 8, 2 * t, k_tiles), lane * 8 + 2);
    EXPECT_EQ(mma_packed_index(g + 8, 2 * t + 1, k_tiles), lane * 8 + 3);
    EXPECT_EQ(mma_packed_index(g, 2 * t + 8, k_tiles), lane * 8 + 4);
    EXPECT_EQ(mma_packed_index(g + 8, 2 * t + 9, k_tiles), lane * 8 + 7);
  }
  // Tiles along K are adjacent: a warp streams a row tile linearly.
  EXPECT_EQ(mma_packed_index(0, 16, 4), 256);
  EXPECT_EQ(mma_packed_index(16, 0, 4), 4 * 256);
}

TEST(MmaPacking, PacksWithRowMapAndZeroPadding) {
  const int64_t rows = 20, cols = 18;  // both padded to 32
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> w(rows * cols);
  for (auto& v : w) v = dist(gen);
  std::vector<int64_t> map(rows);
  for (int64_t r = 0; r < rows; ++r) map[r] = (r * 7) % rows;
  std::vector<uint16_t> packed(mma_packed_elems(rows, cols), 0xffff);
  pack_mma_tiles(w.data(), DType::F32, rows, cols, map, DType::BF16, packed.data());
  const int64_t k_tiles = mma_tiles(cols);
  for (int64_t r = 0; r < 32; ++r)
    for (int64_t c = 0; c < 32; ++c) {
      const uint16_t got = packed[mma_packed_index(r, c, k_tiles)];
      const uint16_t want = (r < rows && c < cols) ? f32_to_bf16_bits(w[map[r] * cols + c]) : 0;
      ASSERT_EQ(got, want) << r << "," << c;
    }
}

TEST(MmaPacking, QkvRowMapPairsRotateHalfPartnersInOneLane) {
  const int heads = 2, kv_heads = 1, head_dim = 32, half = 16;
  const auto map = qkv_rope_row_map(heads, kv_heads, head_dim);
  ASSERT_EQ(map.size(), static_cast<size_t>((heads + 2 * kv_heads) * head_dim));
  for (size_t tile = 0; tile < map.size() / 16; ++tile)
    for (int g = 0; g < 8; ++g) EXPECT_EQ(map[tile * 16 + g + 8], map[tile * 16 + g] + half);
  std::set<int64_t> rows(map.begin(), map.end());
  EXPECT_EQ(rows.size(), map.size());
  EXPECT_THROW(qkv_rope_row_map(1, 1, 40), Error);
}

TEST(MmaPacking, GateUpRowMapInterleavesAndPads) {
  const int ffn = 20;
  const auto map = gate_up_row_map(ffn);
  ASSERT_EQ(map.size(), 48u);  // 3 tiles of 8 outputs
  for (size_t tile = 0; tile < 3; ++tile)
    for (int g = 0; g < 8; ++g) {
      const int64_t j = static_cast<int64_t>(tile) * 8 + g;
      EXPECT_EQ(map[tile * 16 + g], j < ffn ? j : -1);
      EXPECT_EQ(map[tile * 16 + 8 + g], j < ffn ? ffn + j : -1);
    }
}

}  // namespace
}  // namespace fuselm
