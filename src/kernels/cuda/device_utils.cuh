#pragma once
// Building blocks shared by the elementwise and row kernels: the activation dtype dispatch points,
// 16-byte vector loads/stores of 8 elements converted to fp32, deterministic block reductions, and the
// acquiring load of a flag another CTA releases.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "core/status.h"

namespace fuselm::device {

// ---------------------------------------------------------------------------------------------
// Dispatch points: a DType becomes the C++ element type; each ends in an "unsupported" status.

template <class F>
Status dispatch_float_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::F32: return f(float{});
    case DType::F16: return f(__half{});
    case DType::BF16: return f(__nv_bfloat16{});
    default:
      return Status::error(str_cat(op, ": unsupported dtype=", dtype_name(dtype), " (supported: f32, f16, bf16)"));
  }
}

template <class F>
Status dispatch_half_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::F16: return f(__half{});
    case DType::BF16: return f(__nv_bfloat16{});
    default:
      return Status::error(str_cat(op, ": unsupported dtype=", dtype_name(dtype), " (supported: f16, bf16)"));
  }
}

// ---------------------------------------------------------------------------------------------
// Element conversions (round to nearest even, as the host conversions in core/dtype.h).

// A GPU-scope acquiring load of a flag or counter another CTA releases (its writes before the
// release are visible after this load).
__device__ __forceinline__ int load_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// ---------------------------------------------------------------------------------------------
// 16-byte vectors. Kernels move 8 elements per step (one 16-byte access for 2-byte types, two for
// fp32) so every access is as wide as the memory system serves in one transaction.

inline constexpr int kVec = 8;

template <class T>
struct alignas(16) Packed128 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};
static_assert(sizeof(Packed128<float>) == 16 && sizeof(Packed128<__nv_bfloat16>) == 16);

// Loads 8 elements starting at p (16-byte aligned) as fp32.
template <class T>
__device__ __forceinline__ void load8(const T* p, float (&out)[kVec]) {
  constexpr int n = Packed128<T>::kSize;
#pragma unroll
  for (int part = 0; part < kVec / n; ++part) {
    const Packed128<T> pk = *reinterpret_cast<const Packed128<T>*>(p + part * n);
#pragma unroll
    for (int i = 0; i < n; ++i) out[part * n + i] = to_float(pk.v[i]);
  }
}

// Stores 8 fp32 values at p (16-byte aligned) rounded to T.
template <class T>
__device__ __forceinline__ void store8(T* p, const float (&in)[kVec]) {
  constexpr int n = Packed128<T>::kSize;
#pragma unroll
  for (int part = 0; part < kVec / n; ++part) {
    Packed128<T> pk;
#pragma unroll
    for (int i = 0; i < n; ++i) pk.v[i] = from_float<T>(in[part * n + i]);
    *reinterpret_cast<Packed128<T>*>(p + part * n) = pk;
  }
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// ---------------------------------------------------------------------------------------------
// Block reductions with a fixed combination order (butterfly within warps, then warp 0 over the
// warps' partials), so the same inputs give the same bits whatever the scheduling. Every thread of
// the block must call them (blockDim.x a multiple of 32); every thread gets the result. `scratch`
// holds 32 entries in shared memory.

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = (blockDim.x + 31) / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < n_warps ? scratch[lane] : identity;
  v = warp_reduce(v, op);
  return v;
}

struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};

__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce(v, SumOp{}, 0.0f, scratch); }

}  // namespace fuselm::device
