#pragma once
// RMSNorm over rows of the fp32 residual stream: out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace fuselm {

// x: [n][dim] fp32; weight: [dim] fp32; out: [n][dim] in out_dtype (f32, f16 or bf16); out must not
// alias x. Deterministic: the sum of squares uses a fixed-order block reduction.
Status rmsnorm(const float* x, const float* weight, float eps, int64_t n, int64_t dim, void* out, DType out_dtype,
               cudaStream_t stream);

// The residual add and the next norm in one pass over the row (fused prefill): x += delta, then
// out = rmsnorm(x). delta: [n][dim] in delta_dtype (f32, f16 or bf16). Bitwise equal to
// residual_add followed by rmsnorm.
Status add_rmsnorm(float* x, const void* delta, DType delta_dtype, const float* weight, float eps, int64_t n,
                   int64_t dim, void* out, DType out_dtype, cudaStream_t stream);

}  // namespace fuselm
