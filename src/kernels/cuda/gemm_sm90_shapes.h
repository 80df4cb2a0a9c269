#pragma once
// The shapes the sm_90a prefill GEMMs take (kernels/cuda/gemm_sm90.cu). Host-compilable, so that a
// plan made without a GPU chooses them only for models whose every projection fits.
#include <cstdint>

#include "core/hd.h"

namespace fuselm {

inline constexpr int kGemmSm90TileK = 64;  // K per pipeline stage: k must be a multiple

// out = x · Wᵀ with W [n][k], on tiles of `tile_features` (128 or 256) output features.
FUSELM_HD bool gemm_sm90_shape_ok(int64_t n, int64_t k, int tile_features) {
  return (tile_features == 128 || tile_features == 256) && n > 0 && n % tile_features == 0 && k > 0 &&
         k % kGemmSm90TileK == 0 && n <= (int64_t{1} << 30) && k <= (int64_t{1} << 31);
}

// The gate/up projection with SwiGLU, W [2 * ffn][k]: tiles of 128 gate and 128 up rows.
FUSELM_HD bool gemm_swiglu_sm90_shape_ok(int64_t ffn, int64_t k) { return gemm_sm90_shape_ok(ffn, k, 128); }

}  // namespace fuselm
