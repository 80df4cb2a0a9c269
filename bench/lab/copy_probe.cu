// Probe: SM copy kernels (grid-stride and block-contiguous, 4 or 8 loads in flight, with and
// without streaming hints) against cudaMemcpy D2D on 1 GiB. Build: nvcc -O3 -arch=sm_90a.
// Results are in bench/results/README.md.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
template <int U, bool CS>
__global__ void __launch_bounds__(256) grid_stride(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = CS ? __ldcs(s + i + u * stride) : s[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) { if (CS) __stcs(d + i + u * stride, v[u]); else d[i + u * stride] = v[u]; }
  }
  for (; i < n; i += stride) d[i] = s[i];
}
template <int U>
__global__ void __launch_bounds__(256) chunked(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  const size_t per = (n + gridDim.x - 1) / gridDim.x;
  const size_t b = blockIdx.x * per, e = min(n, b + per);
  size_t i = b + threadIdx.x;
  for (; i + (U - 1) * 256 < e; i += U * 256) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = s[i + u * 256];
#pragma unroll
    for (int u = 0; u < U; ++u) d[i + u * 256] = v[u];
  }
  for (; i < e; i += 256) d[i] = s[i];
}
int main() {
  size_t bytes = size_t(1) << 30, n = bytes / 16;
  uint4 *s, *d; cudaMalloc(&s, bytes); cudaMalloc(&d, bytes); cudaMemset(s, 1, bytes);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto time = [&](auto f) { std::vector<float> ms; for (int r = 0; r < 22; ++r) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float t; cudaEventElapsedTime(&t, a, b); if (r >= 2) ms.push_back(t);} std::sort(ms.begin(), ms.end()); return 2.0 * bytes / (ms[ms.size()/2] * 1e-3) / 1e9; };
  printf("memcpy %.0f\n", time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }));
  for (int bps : {4, 8}) {
    int g = 132 * bps;
    printf("grid %d: gs4 %.0f gs4cs %.0f gs8 %.0f gs8cs %.0f ch4 %.0f ch8 %.0f\n", g,
      time([&] { grid_stride<4, false><<<g, 256>>>(s, d, n); }), time([&] { grid_stride<4, true><<<g, 256>>>(s, d, n); }),
      time([&] { grid_stride<8, false><<<g, 256>>>(s, d, n); }), time([&] { grid_stride<8, true><<<g, 256>>>(s, d, n); }),
      time([&] { chunked<4><<<g, 256>>>(s, d, n); }), time([&] { chunked<8><<<g, 256>>>(s, d, n); }));
  }
  printf("memcpy %.0f\n", time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }));
  return 0;
}
