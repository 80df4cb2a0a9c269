#pragma once
// Prefill's gate/up projection with SwiGLU in its output pass (Hopper, sm_90a: TMA and wgmma):
//   out[t][j] = silu(x[t] · W[j]) * (x[t] · W[ffn + j])
// with W the [2 * ffn][k] gate/up weight as stored (gate rows, then up rows). One kernel instead of
// a GEMM writing [n_tokens][2 * ffn] and swiglu reading it back; the product is taken from the fp32
// accumulators and rounded once. Each output element is one CTA's full-K dot products in a fixed
// order, so a row's result does not depend on how many rows share the call.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace fuselm {

// Why gemm_swiglu cannot run this problem here ("" when it can): the dtype (bf16 or f16), the
// shape (ffn a multiple of 128, k a multiple of 64, 16-byte aligned rows) and whether this build's
// sm_90a code runs on the current device.
std::string gemm_swiglu_unsupported_reason(int64_t ffn, int64_t k, DType dtype);

// x: [n_tokens][k], w: [2 * ffn][k], out: [n_tokens][ffn], all in `dtype`, rows dense; device
// pointers 16-byte aligned. Fails with a clear message where gemm_swiglu_unsupported_reason says so.
Status gemm_swiglu(const void* x, const void* w, void* out, DType dtype, int64_t n_tokens, int64_t ffn, int64_t k,
                   cudaStream_t stream);

}  // namespace fuselm
