#pragma once
// Small-batch GEMM for decode (m <= 16 tokens): out[m][n] = sum_k x[m][k] * W[n][k] with W in the
// tensor-core fragment layout of kernels/mma_packing.h, followed by a fused epilogue. The kernel is a
// weight streamer: each weight byte is read once per step with 16-byte coalesced loads, several in
// flight per lane, while mma.sync does the arithmetic for up to 16 tokens at no extra cost.
//
// Determinism: each CTA owns whole rows; its warps split K at boundaries that depend only on K and
// the variant, and partial sums are added in warp order. No atomics. A token's result does not
// depend on how many other tokens are in the batch (each token is its own mma column).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/paged_kv.h"

namespace fuselm {

inline constexpr int kSkinnyGemmMaxTokens = 16;

// A weight matrix packed by pack_mma_tiles: `rows` x `cols` logical (unpadded) elements.
struct PackedWeight {
  const void* data = nullptr;  // device
  DType dtype = DType::BF16;   // BF16 or F16
  int64_t rows = 0;            // packed (logical) rows, before padding to 16
  int64_t cols = 0;            // K, before padding to 16
};

// The input activations: `m` rows of `cols` values (dtype of the weights), row stride in elements.
struct SkinnyInput {
  const void* x = nullptr;
  int64_t stride = 0;
  int m = 0;
};

// RMSNorm folded into the GEMM: the input rows already carry the norm weight (x * g, written by the
// previous kernel's epilogue) and the previous kernel left per-tile partial sums of squares of the
// unnormalised row; the result is scaled by 1/rms. Null partials = no norm.
struct SkinnyNorm {
  const float* partials = nullptr;  // [m][num_partials]
  int num_partials = 0;
  int dim = 0;  // the normalised row length (mean = sum / dim)
  float eps = 1e-5f;
};

// Kernel shape: row tiles per CTA and warps per CTA (the warps split K). Chosen once per shape by
// the plan; the default suits the Hopper decode shapes.
struct SkinnyGemmVariant {
  int row_tiles = 1;
  int warps = 8;
  std::string name() const;
};
std::vector<SkinnyGemmVariant> skinny_gemm_variants();

// out[m][n] (+)= result, written as `out_dtype` (F32, BF16 or F16) with row stride out_stride.
Status skinny_gemm_store(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm, void* out,
                         DType out_dtype, int64_t out_stride, SkinnyGemmVariant variant, cudaStream_t stream);

// residual[m][n] += result (fp32). When next_norm_weight is set, also writes
// xg[m][n] = residual * next_norm_weight[n] (rounded to the weights dtype) and, per 16-row tile,
// partials[m][n / 16] = sum of residual^2: the input of the next normed GEMM.
struct SkinnyResidualOut {
  float* residual = nullptr;
  int64_t residual_stride = 0;
  const float* next_norm_weight = nullptr;  // [n], fp32 (as stored: no rounding of the norm weights)
  void* xg = nullptr;
  int64_t xg_stride = 0;
  float* partials = nullptr;  // [m][ceil(n / 16)]
};
Status skinny_gemm_residual(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                            const SkinnyResidualOut& out, SkinnyGemmVariant variant, cudaStream_t stream);

// Fused Q/K/V projection (weights packed with qkv_rope_row_map) + rotate-half RoPE + KV-cache append.
// Token i sits at positions[i] of the sequence whose block table is row i of kv.block_tables.
struct SkinnyQkvOut {
  void* q = nullptr;  // [m][n_heads * head_dim], weights dtype, rotated
  int64_t q_stride = 0;
  PagedKvView kv;     // K (rotated) and V are written at each token's position
  const int32_t* positions = nullptr;  // device [m]
  const float* inv_freq = nullptr;     // device [head_dim / 2]
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
};
Status skinny_gemm_qkv_rope(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                            const SkinnyQkvOut& out, SkinnyGemmVariant variant, cudaStream_t stream);

// Fused gate/up projection (weights packed with gate_up_row_map) + SwiGLU:
// act[m][j] = silu(gate_j) * up_j for j < ffn, weights dtype.
struct SkinnySwigluOut {
  void* act = nullptr;
  int64_t act_stride = 0;
  int ffn = 0;
};
Status skinny_gemm_swiglu(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                          const SkinnySwigluOut& out, SkinnyGemmVariant variant, cudaStream_t stream);

}  // namespace fuselm
