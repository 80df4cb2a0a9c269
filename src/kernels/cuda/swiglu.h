#pragma once
// SwiGLU activation: out = silu(gate) * up, reading the gate and up projections side by side in one
// row (they come out of a single GEMM against the concatenated [gate; up] weight).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace fuselm {

// gate_up: [n_tokens][2 * ffn] (gate in columns 0..ffn-1, up in ffn..2*ffn-1); out: [n_tokens][ffn].
// Both in `dtype` (f32, f16 or bf16); the product is computed in fp32 and rounded once.
Status swiglu(const void* gate_up, void* out, DType dtype, int64_t n_tokens, int64_t ffn, cudaStream_t stream);

}  // namespace fuselm
