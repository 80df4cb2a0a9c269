#pragma once
// Prefill projections on Hopper (sm_90a: TMA loads, wgmma), for token counts where the GEMM is
// compute-bound:
//   gemm_sm90:        out[t][j] = x[t] · W[j]                                   W = [n][k]
//   gemm_swiglu_sm90: out[t][j] = silu(x[t] · W[j]) * (x[t] · W[ffn + j])      W = [2 * ffn][k]
// the second being the gate/up projection (gate rows, then up rows, as stored) with SwiGLU in its
// output pass: no [n_tokens][2 * ffn] intermediate in global memory, and the product taken from the
// fp32 accumulators and rounded once. Each output element is one CTA's full-K dot products in a
// fixed order, so a token's result does not depend on how many tokens share the call (the fused
// path's prefill is batch-invariant). Everything is row-major and dense, in bf16 or f16.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace fuselm {

// Why gemm_sm90 cannot run this problem here ("" when it can): tile_features (128 or 256 output
// features per CTA), the dtype (bf16 or f16), the shape (n a multiple of tile_features, k a
// multiple of 64) and whether this build's sm_90a code runs on the current device.
std::string gemm_sm90_unsupported_reason(int64_t n, int64_t k, DType dtype, int tile_features);

// x: [n_tokens][k], w: [n][k], out: [n_tokens][n], all in `dtype`; device pointers 16-byte aligned.
Status gemm_sm90(const void* x, const void* w, void* out, DType dtype, int64_t n_tokens, int64_t n, int64_t k,
                 int tile_features, cudaStream_t stream);

// As above for gemm_swiglu_sm90 (ffn a multiple of 128).
std::string gemm_swiglu_sm90_unsupported_reason(int64_t ffn, int64_t k, DType dtype);

// x: [n_tokens][k], w: [2 * ffn][k], out: [n_tokens][ffn], all in `dtype`; device pointers 16-byte
// aligned.
Status gemm_swiglu_sm90(const void* x, const void* w, void* out, DType dtype, int64_t n_tokens, int64_t ffn,
                        int64_t k, cudaStream_t stream);

}  // namespace fuselm
