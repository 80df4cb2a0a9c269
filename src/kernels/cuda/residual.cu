#include "kernels/cuda/residual.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"

namespace fuselm {
namespace {

using namespace device;

// Groups of 8 with 16-byte accesses, then the tail (< 8 values) element by element.
template <class T>
__global__ void residual_add_kernel(float* __restrict__ residual, const T* __restrict__ delta, int64_t n,
                                    bool vectorized) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t vec_end = vectorized ? n / kVec * kVec : 0;
  for (int64_t i = first * kVec; i < vec_end; i += stride * kVec) {
    float r[kVec], d[kVec];
    load8(residual + i, r);
    load8(delta + i, d);
#pragma unroll
    for (int j = 0; j < kVec; ++j) r[j] += d[j];
    store8(residual + i, r);
  }
  for (int64_t i = vec_end + first; i < n; i += stride) residual[i] += to_float(delta[i]);
}

}  // namespace

Status residual_add(float* residual, const void* delta, DType delta_dtype, int64_t n, cudaStream_t stream) {
  if (n == 0) return Status();
  if (n < 0) return Status::error(str_cat("residual_add: bad size n=", n));
  if (!residual || !delta) return Status::error("residual_add: residual and delta must be set");
  const bool vectorized = aligned16(residual) && aligned16(delta);
  return dispatch_float_dtype(delta_dtype, "residual_add", [&](auto tag) -> Status {
    using T = decltype(tag);
    const int threads = 256;
    const int64_t work = vectorized ? (n + kVec - 1) / kVec : n;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((work + threads - 1) / threads, 65535));
    residual_add_kernel<T><<<blocks, threads, 0, stream>>>(residual, static_cast<const T*>(delta), n, vectorized);
    FUSELM_CUDA_RETURN_LAUNCH();
    return Status();
  });
}

}  // namespace fuselm
