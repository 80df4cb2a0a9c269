#pragma once
// Weight layout for the small-batch decode kernels: a row-major [N][K] matrix cut into 16x16 tiles,
// each tile stored in the register-fragment order of the tensor-core A operand (mma m16n8k16), so
// one 16-byte load per lane fetches a lane's whole fragment and a warp reads a tile as 512
// contiguous bytes. Tiles along K are contiguous for a row tile: a warp streams its rows linearly.
//
// Within a tile, lane L = 4*g + t holds 8 values: rows g and g+8, columns 2t, 2t+1, 2t+8, 2t+9, in
// the order (g,2t) (g,2t+1) (g+8,2t) (g+8,2t+1) (g,2t+8) (g,2t+9) (g+8,2t+8) (g+8,2t+9).
//
// A row map lets fused epilogues find related rows in one lane: packed row r holds source row
// row_map[r] (or zeros for -1). N and K are padded to multiples of 16 with zeros.
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/hd.h"

namespace fuselm {

inline constexpr int kMmaTile = 16;

FUSELM_HD int64_t mma_tiles(int64_t n) { return (n + kMmaTile - 1) / kMmaTile; }

// Row tiles may be stored in groups of `group` (1, or the row tiles a CTA of the CTA or register
// pipeline owns: skinny_tile_group in kernels/cuda/skinny_gemm.h): k-tile kt of a group's row tiles
// lie next to each other, so a group's tiles along K are one contiguous run, read `group` tiles of
// one k-tile at a time (a read order the decode GEMM streams faster: docs/kernels/skinny_gemm.md).
// With group 1 a row tile's K range is one contiguous run. The number of row tiles is padded to a
// multiple of the group (zeros).
// Where tile (row_tile, kt) lies, in tiles.
FUSELM_HD int64_t mma_tile_index(int64_t row_tile, int64_t kt, int64_t k_tiles, int group) {
  return ((row_tile / group) * k_tiles + kt) * group + row_tile % group;
}

// Index of logical element (r, c) of a packed matrix with `k_tiles` tiles along K.
FUSELM_HD int64_t mma_packed_index(int64_t r, int64_t c, int64_t k_tiles, int group = 1) {
  const int64_t tile = mma_tile_index(r / 16, c / 16, k_tiles, group);
  const int rr = static_cast<int>(r % 16), cc = static_cast<int>(c % 16);
  const int g = rr % 8, hi_row = rr / 8, hi_col = cc / 8, t = (cc % 8) / 2, e = cc % 2;
  const int lane = g * 4 + t;
  const int reg = hi_row + 2 * hi_col;
  return tile * 256 + lane * 8 + reg * 2 + e;
}

// Row tiles of the packed buffer for `rows` rows: whole tile groups.
FUSELM_HD int64_t mma_packed_row_tiles(int64_t rows, int group = 1) {
  return (mma_tiles(rows) + group - 1) / group * group;
}

// Elements of the packed buffer for `rows` x `cols` (padded to tiles, and to whole tile groups).
inline int64_t mma_packed_elems(int64_t rows, int64_t cols, int group = 1) {
  return mma_packed_row_tiles(rows, group) * mma_tiles(cols) * 256;
}

// Packs src ([src_rows][cols] in src_dtype) into dst (dst_dtype: F16 or BF16), in tile groups of
// `group` (>= 1). `row_map` has one entry per packed row (its size is the packed row count, rounded
// up to 16 with -1 entries if shorter); empty means the identity over src_rows.
void pack_mma_tiles(const void* src, DType src_dtype, int64_t src_rows, int64_t cols,
                    std::span<const int64_t> row_map, DType dst_dtype, void* dst, int group = 1);

// Row map for a fused Q/K/V projection over the stacked [Wq; Wk; Wv] matrix: per head, tile j
// holds rotate-half pair dims j*8..j*8+7 in rows 0-7 and their partners (+head_dim/2) in rows
// 8-15, so RoPE happens inside one lane (rows g and g+8). head_dim must be a multiple of 16.
std::vector<int64_t> qkv_rope_row_map(int n_heads, int n_kv_heads, int head_dim);

// Row map for a fused gate/up projection over the stacked [Wgate; Wup] matrix ([2*ffn][K]):
// tile j holds gate rows j*8..j*8+7 in rows 0-7 and the matching up rows in rows 8-15.
std::vector<int64_t> gate_up_row_map(int ffn);

}  // namespace fuselm
