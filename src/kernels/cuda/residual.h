#pragma once
// Residual connection: the fp32 residual stream absorbs a block's output.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace fuselm {

// residual[i] += delta[i] for n values; delta in delta_dtype (f32, f16 or bf16), added in fp32.
// The stream stays fp32 so that rounding does not accumulate across layers.
Status residual_add(float* residual, const void* delta, DType delta_dtype, int64_t n, cudaStream_t stream);

}  // namespace fuselm
