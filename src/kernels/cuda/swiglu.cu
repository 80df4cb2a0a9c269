#include "kernels/cuda/swiglu.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"

namespace fuselm {
namespace {

using namespace device;

__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// A grid-stride loop over groups of kVectorized ? 8 : 1 outputs.
template <class T, bool kVectorized>
__global__ void swiglu_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t n_tokens, int64_t ffn) {
  constexpr int width = kVectorized ? kVec : 1;
  const int64_t groups_per_row = ffn / width;
  const int64_t total = n_tokens * groups_per_row;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = g / groups_per_row, c = (g % groups_per_row) * width;
    const T* gate = gate_up + t * 2 * ffn + c;
    const T* up = gate + ffn;
    T* dst = out + t * ffn + c;
    if constexpr (kVectorized) {
      float a[kVec], b[kVec];
      load8(gate, a);
      load8(up, b);
#pragma unroll
      for (int i = 0; i < kVec; ++i) a[i] = silu_times(a[i], b[i]);
      store8(dst, a);
    } else {
      *dst = from_float<T>(silu_times(to_float(*gate), to_float(*up)));
    }
  }
}

}  // namespace

Status swiglu(const void* gate_up, void* out, DType dtype, int64_t n_tokens, int64_t ffn, cudaStream_t stream) {
  if (n_tokens == 0) return Status();
  if (n_tokens < 0 || ffn <= 0) return Status::error(str_cat("swiglu: bad shape n_tokens=", n_tokens, " ffn=", ffn));
  if (!gate_up || !out) return Status::error("swiglu: gate_up and out must be set");
  const bool vectorized = ffn % kVec == 0 && aligned16(gate_up) && aligned16(out);
  return dispatch_float_dtype(dtype, "swiglu", [&](auto tag) -> Status {
    using T = decltype(tag);
    const int threads = 256;
    const int64_t groups = n_tokens * (vectorized ? ffn / kVec : ffn);
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((groups + threads - 1) / threads, 65535));
    const auto* in = static_cast<const T*>(gate_up);
    auto* o = static_cast<T*>(out);
    if (vectorized)
      swiglu_kernel<T, true><<<blocks, threads, 0, stream>>>(in, o, n_tokens, ffn);
    else
      swiglu_kernel<T, false><<<blocks, threads, 0, stream>>>(in, o, n_tokens, ffn);
    FUSELM_CUDA_RETURN_LAUNCH();
    return Status();
  });
}

}  // namespace fuselm
