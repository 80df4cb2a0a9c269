#include "kernels/mma_packing.h"

#include <cstring>

#include "core/error.h"

namespace fuselm {

void pack_mma_tiles(const void* src, DType src_dtype, int64_t src_rows, int64_t cols,
                    std::span<const int64_t> row_map, DType dst_dtype, void* dst, int group) {
  FUSELM_CHECK(dst_dtype == DType::BF16 || dst_dtype == DType::F16,
               "pack_mma_tiles: packed weights are bf16 or f16, not ", dtype_name(dst_dtype));
  FUSELM_CHECK(src_dtype != DType::Q8_0, "pack_mma_tiles: dequantize Q8_0 weights first");
  FUSELM_CHECK(group >= 1, "pack_mma_tiles: tile group ", group, " must be positive");
  const int64_t logical_rows = row_map.empty() ? src_rows : static_cast<int64_t>(row_map.size());
  const int64_t packed_rows = mma_tiles(logical_rows) * 16;
  const int64_t k_tiles = mma_tiles(cols);
  auto* out = static_cast<uint16_t*>(dst);
  std::memset(out, 0, static_cast<size_t>(mma_packed_elems(logical_rows, cols, group)) * sizeof(uint16_t));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < packed_rows; ++r) {
    int64_t s = -1;
    if (row_map.empty()) {
      s = r < src_rows ? r : -1;
    } else if (r < static_cast<int64_t>(row_map.size())) {
      s = row_map[r];
    }
    if (s < 0) continue;
    FUSELM_CHECK(s < src_rows, "pack_mma_tiles: row map entry ", s, " out of range (", src_rows, " rows)");
    for (int64_t c = 0; c < cols; ++c) {
      const float v = load_as_f32(src, src_dtype, s * cols + c);
      out[mma_packed_index(r, c, k_tiles, group)] = dst_dtype == DType::BF16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
    }
  }
}

std::vector<int64_t> qkv_rope_row_map(int n_heads, int n_kv_heads, int head_dim) {
  FUSELM_CHECK(head_dim % 16 == 0, "fused QKV projection needs head_dim a multiple of 16, found ", head_dim);
  const int half = head_dim / 2;
  std::vector<int64_t> map;
  map.reserve(static_cast<size_t>(n_heads + 2 * n_kv_heads) * head_dim);
  for (int h = 0; h < n_heads + 2 * n_kv_heads; ++h) {
    const int64_t base = static_cast<int64_t>(h) * head_dim;
    for (int j = 0; j < half / 8; ++j) {
      for (int g = 0; g < 8; ++g) map.push_back(base + j * 8 + g);
      for (int g = 0; g < 8; ++g) map.push_back(base + half + j * 8 + g);
    }
  }
  return map;
}

std::vector<int64_t> gate_up_row_map(int ffn) {
  const int64_t tiles = (ffn + 7) / 8;
  std::vector<int64_t> map;
  map.reserve(static_cast<size_t>(tiles) * 16);
  for (int64_t j = 0; j < tiles; ++j) {
    for (int g = 0; g < 8; ++g) map.push_back(j * 8 + g < ffn ? j * 8 + g : -1);
    for (int g = 0; g < 8; ++g) map.push_back(j * 8 + g < ffn ? ffn + j * 8 + g : -1);
  }
  return map;
}

}  // namespace fuselm
