#pragma once
// Weight preparation on the device: dtype conversion of uploaded tensors, and synthetic weights
// generated in place (no host copy, no transfer).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace fuselm {

// dst[i] = src[i] converted between f32, f16 and bf16, rounding to nearest even: bit-identical to
// convert_dtype on the host. src and dst must not overlap.
Status convert_dtype_device(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                            cudaStream_t stream);

// dst[i] = offset + scale * counter_uniform(seed, i), rounded to `dtype` (f32, f16 or bf16):
// bit-identical to fill_synthetic on the host.
Status fill_synthetic_device(uint64_t seed, float scale, float offset, int64_t n, DType dtype, void* dst,
                             cudaStream_t stream);

}  // namespace fuselm
