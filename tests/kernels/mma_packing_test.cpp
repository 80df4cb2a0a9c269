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

// Tile groups: k-tile kt of a group's row tiles side by side, the group's K range one run; the
// row tiles padded to whole groups with zeros.
TEST(MmaPacking, TileGroupsInterleaveTheirRowTilesAlongK) {
  const int64_t rows = 70, cols = 40, k_tiles = mma_tiles(cols);  // 5 row tiles, 3 k-tiles
  for (int group : {1, 2, 4, 8}) {
    SCOPED_TRACE(group);
    const int64_t row_tiles = mma_packed_row_tiles(rows, group);
    EXPECT_EQ(row_tiles % group, 0);
    EXPECT_GE(row_tiles, mma_tiles(rows));
    std::set<int64_t> seen;
    for (int64_t rt = 0; rt < row_tiles; ++rt)
      for (int64_t kt = 0; kt < k_tiles; ++kt) {
        const int64_t t = mma_tile_index(rt, kt, k_tiles, group);
        ASSERT_LT(t, row_tiles * k_tiles);
        ASSERT_TRUE(seen.insert(t).second);
        // The group's tiles of one k-tile are adjacent, and its next k-tile follows them.
        if (rt % group > 0) {
          EXPECT_EQ(t, mma_tile_index(rt - 1, kt, k_tiles, group) + 1);
        }
        if (kt > 0) {
          EXPECT_EQ(t, mma_tile_index(rt, kt - 1, k_tiles, group) + group);
        }
      }
  }
  EXPECT_EQ(mma_tile_index(3, 2, 7, 1), 3 * 7 + 2);  // group 1: the row-tile-major layout

  std::mt19937 gen(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> w(rows * cols);
  for (auto& v : w) v = dist(gen);
  for (int group : {1, 4}) {
    std::vector<uint16_t> packed(mma_packed_elems(rows, cols, group), 0xffff);
    pack_mma_tiles(w.data(), DType::F32, rows, cols, {}, DType::BF16, packed.data(), group);
    for (int64_t r = 0; r < mma_packed_row_tiles(rows, group) * 16; ++r)
      for (int64_t c = 0; c < k_tiles * 16; ++c) {
        const uint16_t want = (r < rows && c < cols) ? f32_to_bf16_bits(w[r * cols + c]) : 0;
        ASSERT_EQ(packed[mma_packed_index(r, c, k_tiles, group)], want) << group << ": " << r << "," << c;
      }
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
