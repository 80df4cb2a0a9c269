#include "kernels/cuda/rmsnorm.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"

namespace fuselm {
namespace {

using namespace device;

// One block per row: a pass for the sum of squares (adding `delta` into the row first when it is
// set), then a pass that scales (the row is re-read from L1/L2, not DRAM, at these widths). Each
// thread touches the same columns in both passes, so it reads back its own writes.
template <class OutT, class DeltaT, bool kVectorized>
__global__ void rmsnorm_kernel(float* __restrict__ x, const DeltaT* __restrict__ delta, const float* __restrict__ weight,
                               float eps, int64_t dim, OutT* __restrict__ out) {
  __shared__ float scratch[32];
  float* row = x + blockIdx.x * dim;
  const DeltaT* drow = delta != nullptr ? delta + blockIdx.x * dim : nullptr;
  OutT* dst = out + blockIdx.x * dim;
  float ss = 0.0f;
  if constexpr (kVectorized) {
    for (int64_t c = threadIdx.x * kVec; c < dim; c += blockDim.x * kVec) {
      float v[kVec];
      load8(row + c, v);
      if (drow != nullptr) {
        float d[kVec];
        load8(drow + c, d);
#pragma unroll
        for (int i = 0; i < kVec; ++i) v[i] += d[i];
        store8(row + c, v);
      }
#pragma unroll
      for (int i = 0; i < kVec; ++i) ss += v[i] * v[i];
    }
  } else {
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      float v = row[c];
      if (drow != nullptr) {
        v += to_float(drow[c]);
        row[c] = v;
      }
      ss += v * v;
    }
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  if constexpr (kVectorized) {
    for (int64_t c = threadIdx.x * kVec; c < dim; c += blockDim.x * kVec) {
      float v[kVec], w[kVec];
      load8(row + c, v);
      load8(weight + c, w);
#pragma unroll
      for (int i = 0; i < kVec; ++i) v[i] = v[i] * inv * w[i];
      store8(dst + c, v);
    }
  } else {
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = from_float<OutT>(row[c] * inv * weight[c]);
  }
}

}  // namespace

Status rmsnorm(const float* x, const float* weight, float eps, int64_t n, int64_t dim, void* out, DType out_dtype,
               cudaStream_t stream) {
  if (n == 0) return Status();
  if (n < 0 || dim <= 0) return Status::error(str_cat("rmsnorm: bad shape n=", n, " dim=", dim));
  if (!x || !weight || !out) return Status::error("rmsnorm: x, weight and out must be set");
  if (!(eps > 0.0f)) return Status::error(str_cat("rmsnorm: eps=", eps, " must be positive"));
  if (n > 0x7fffffff) return Status::error(str_cat("rmsnorm: n=", n, " exceeds the grid limit"));
  const bool vectorized = dim % kVec == 0 && aligned16(x) && aligned16(weight) && aligned16(out);
  return dispatch_float_dtype(out_dtype, "rmsnorm (out)", [&](auto tag) -> Status {
    using OutT = decltype(tag);
    const int threads = dim >= 4096 ? 512 : 256;
    auto* o = static_cast<OutT*>(out);
    float* row = const_cast<float*>(x);  // not written: no delta
    if (vectorized)
      rmsnorm_kernel<OutT, float, true><<<static_cast<unsigned>(n), threads, 0, stream>>>(row, nullptr, weight, eps, dim, o);
    else
      rmsnorm_kernel<OutT, float, false><<<static_cast<unsigned>(n), threads, 0, stream>>>(row, nullptr, weight, eps, dim, o);
    FUSELM_CUDA_RETURN_LAUNCH();
    return Status();
  });
}

Status add_rmsnorm(float* x, const void* delta, DType delta_dtype, const float* weight, float eps, int64_t n,
                   int64_t dim, void* out, DType out_dtype, cudaStream_t stream) {
  if (n == 0) return Status();
  if (n < 0 || dim <= 0) return Status::error(str_cat("add_rmsnorm: bad shape n=", n, " dim=", dim));
  if (!x || !delta || !weight || !out) return Status::error("add_rmsnorm: x, delta, weight and out must be set");
  if (!(eps > 0.0f)) return Status::error(str_cat("add_rmsnorm: eps=", eps, " must be positive"));
  if (n > 0x7fffffff) return Status::error(str_cat("add_rmsnorm: n=", n, " exceeds the grid limit"));
  const bool vectorized = dim % kVec == 0 && aligned16(x) && aligned16(delta) && aligned16(weight) && aligned16(out);
  return dispatch_float_dtype(out_dtype, "add_rmsnorm (out)", [&](auto out_tag) -> Status {
    using OutT = decltype(out_tag);
    return dispatch_float_dtype(delta_dtype, "add_rmsnorm (delta)", [&](auto delta_tag) -> Status {
      using DeltaT = decltype(delta_tag);
      const int threads = dim >= 4096 ? 512 : 256;
      auto* o = static_cast<OutT*>(out);
      const auto* d = static_cast<const DeltaT*>(delta);
      if (vectorized)
        rmsnorm_kernel<OutT, DeltaT, true><<<static_cast<unsigned>(n), threads, 0, stream>>>(x, d, weight, eps, dim, o);
      else
        rmsnorm_kernel<OutT, DeltaT, false><<<static_cast<unsigned>(n), threads, 0, stream>>>(x, d, weight, eps, dim, o);
      FUSELM_CUDA_RETURN_LAUNCH();
      return Status();
    });
  });
}

}  // namespace fuselm
