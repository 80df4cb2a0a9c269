#include "kernels/cuda/convert.h"

#include <algorithm>

#include "core/rng.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"

namespace fuselm {
namespace {

using namespace device;

// The host's own conversion functions (core/dtype.h) run on the device too, which is what makes the
// results bit-identical; they are not the fastest way, but this runs once, at load.
__device__ __forceinline__ float load_f32(const void* src, DType t, int64_t i) { return load_as_f32(src, t, i); }

__device__ __forceinline__ void store_f32(void* dst, DType t, int64_t i, float v) {
  switch (t) {
    case DType::F16: static_cast<uint16_t*>(dst)[i] = f32_to_f16_bits(v); break;
    case DType::BF16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16_bits(v); break;
    default: static_cast<float*>(dst)[i] = v; break;
  }
}

__global__ void convert_kernel(const void* __restrict__ src, DType src_dtype, void* __restrict__ dst,
                               DType dst_dtype, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_f32(dst, dst_dtype, i, load_f32(src, src_dtype, i));
}

__global__ void fill_synthetic_kernel(uint64_t seed, float scale, float offset, int64_t n, DType dtype,
                                      void* __restrict__ dst) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // Explicit round-to-nearest multiply and add: the host computes them separately, and a fused
    // multiply-add (which the compiler would otherwise emit) rounds once and gives other bits.
    const float v = __fadd_rn(offset, __fmul_rn(scale, counter_uniform(seed, static_cast<uint64_t>(i))));
    store_f32(dst, dtype, i, v);
  }
}

Status check_dtype(DType t, const char* op) {
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) return Status();
  return Status::error(str_cat(op, ": unsupported dtype=", dtype_name(t), " (supported: f32, f16, bf16)"));
}

unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 1 << 16)));
}

}  // namespace

Status convert_dtype_device(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                            cudaStream_t stream) {
  if (n == 0) return Status();
  if (n < 0) return Status::error(str_cat("convert_dtype_device: bad size n=", n));
  if (!src || !dst) return Status::error("convert_dtype_device: src and dst must be set");
  if (Status s = check_dtype(src_dtype, "convert_dtype_device (src)"); !s.ok()) return s;
  if (Status s = check_dtype(dst_dtype, "convert_dtype_device (dst)"); !s.ok()) return s;
  const int threads = 256;
  convert_kernel<<<grid_for(n, threads), threads, 0, stream>>>(src, src_dtype, dst, dst_dtype, n);
  FUSELM_CUDA_RETURN_LAUNCH();
  return Status();
}

Status fill_synthetic_device(uint64_t seed, float scale, float offset, int64_t n, DType dtype, void* dst,
                             cudaStream_t stream) {
  if (n == 0) return Status();
  if (n < 0) return Status::error(str_cat("fill_synthetic_device: bad size n=", n));
  if (!dst) return Status::error("fill_synthetic_device: dst must be set");
  if (Status s = check_dtype(dtype, "fill_synthetic_device"); !s.ok()) return s;
  const int threads = 256;
  fill_synthetic_kernel<<<grid_for(n, threads), threads, 0, stream>>>(seed, scale, offset, n, dtype, dst);
  FUSELM_CUDA_RETURN_LAUNCH();
  return Status();
}

}  // namespace fuselm
