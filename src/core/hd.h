#pragma once
// Marks small functions usable from host code and from CUDA kernels alike.
#if defined(__CUDACC__)
#define FUSELM_HD __host__ __device__ __forceinline__
#else
#define FUSELM_HD inline
#endif
