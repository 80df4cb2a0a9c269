// Probe: does the order in which a decode GEMM's CTAs read their weights change the DRAM read rate?
// The skinny GEMM's CTA pipeline streams, per CTA, several row tiles whose K ranges are each one
// contiguous run (a region of its own per CTA, read as S streams in chunks of C bytes per stage).
// At any moment a few thousand streams sit at scattered addresses. The alternative lays the same
// bytes out stage-major: stage t of every CTA is one block, CTA after CTA, so the grid sweeps the
// matrix front to back as a window. Both read the same bytes with the same grid, stages and bulk
// copies; only the addresses differ. Also: plain 16-byte loads with warps as streams (and in tile
// groups), and the grid-stride read kernel of `fuselm bench`'s peak as the reference.
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a read_pattern_probe.cu
// Run: ./a.out [bytes_per_window]   (default 235 MB, the 8B gate/up matrix)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "lab_check.h"

// kTileGroup (plain loads only): each CTA's bytes one run, its warps side by side at each 512-byte
// step (a tile group of the decode GEMM's register pipeline: mma_packing.h).
enum Order { kRegion = 0, kStageMajor = 1, kTileGroup = 2 };

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// Byte offset of stream j's chunk at stage t of CTA c.
__device__ __forceinline__ size_t chunk_offset(int order, size_t c, size_t t, size_t j, size_t grid, size_t streams,
                                               size_t chunk, size_t stages_total) {
  if (order == kRegion) {
    const size_t per_cta = stages_total * streams * chunk, per_stream = stages_total * chunk;
    return c * per_cta + j * per_stream + t * chunk;
  }
  return ((t * grid + c) * streams + j) * chunk;
}

// One thread issues S bulk copies per stage into a ring of `depth` stages; all threads wait for a
// stage, read 16 bytes each from it, meet at a barrier, and the stage is issued again.
__global__ void __launch_bounds__(128) bulk_read(const char* __restrict__ w, int order, int streams, int chunk,
                                                  int depth, int stages_total, unsigned long long* __restrict__ sink) {
  extern __shared__ __align__(128) char ring[];
  __shared__ __align__(8) uint64_t full[16];
  const int stage_bytes = streams * chunk;
  const size_t c = blockIdx.x, grid = gridDim.x;
  if (threadIdx.x == 0) {
    for (int i = 0; i < depth; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&full[i])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int t) {
    const int slot = t % depth;
    const uint32_t bar = smem_addr(&full[slot]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(stage_bytes) : "memory");
    for (int j = 0; j < streams; ++j) {
      const char* src = w + chunk_offset(order, c, t, j, grid, streams, chunk, stages_total);
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
              smem_addr(ring + slot * stage_bytes + j * chunk)),
          "l"(src), "r"(chunk), "r"(bar)
          : "memory");
    }
  };
  if (threadIdx.x == 0)
    for (int t = 0; t < depth && t < stages_total; ++t) issue(t);
  unsigned long long acc = 0;
  for (int t = 0; t < stages_total; ++t) {
    const int slot = t % depth;
    const uint32_t bar = smem_addr(&full[slot]), parity = (t / depth) & 1;
    uint32_t done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done)
                   : "r"(bar), "r"(parity)
                   : "memory");
    const uint4 v = reinterpret_cast<const uint4*>(ring + slot * stage_bytes)[threadIdx.x % (stage_bytes / 16)];
    acc += v.x ^ v.w;
    __syncthreads();
    if (threadIdx.x == 0 && t + depth < stages_total) issue(t + depth);
  }
  if (acc == 0x12345) sink[0] = acc;
}

// Plain loads: warp j of a CTA is stream j; per iteration a lane loads U x 16 bytes, a warp U x 512.
template <int U>
__global__ void __launch_bounds__(256) plain_read(const char* __restrict__ w, int order, int stages_total,
                                                   unsigned long long* __restrict__ sink) {
  const int lane = threadIdx.x % 32, j = threadIdx.x / 32, streams = blockDim.x / 32;
  constexpr int kChunk = U * 512;
  unsigned long long acc = 0;
  const size_t per_cta = static_cast<size_t>(stages_total) * streams * kChunk;
  for (int t = 0; t < stages_total; ++t) {
    const char* p = w + chunk_offset(order, blockIdx.x, t, j, gridDim.x, streams, kChunk, stages_total);
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const char* at = order == kTileGroup
                           ? w + blockIdx.x * per_cta + ((static_cast<size_t>(t) * U + u) * streams + j) * 512
                           : p + u * 512;
      v[u] = __ldcs(reinterpret_cast<const uint4*>(at) + lane);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc += v[u].x ^ v[u].w;
  }
  if (acc == 0x12345) sink[0] = acc;
}

__global__ void __launch_bounds__(256) grid_stride_read(const uint4* __restrict__ d, size_t n,
                                                         unsigned long long* __restrict__ sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = d[i + u * stride];
#pragma unroll
    for (int u = 0; u < 4; ++u) acc += v[u].x ^ v[u].w;
  }
  if (acc == 0x12345) sink[0] = acc;
}

int main(int argc, char** argv) {
  const size_t window = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 234881024;  // 28672 x 4096 x 2
  constexpr int kWindows = 8;  // rotated so that no launch finds its bytes in L2
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  char* base = nullptr;
  unsigned long long* sink = nullptr;
  CHECK(cudaMalloc(&base, window * kWindows + (1 << 20)));
  CHECK(cudaMalloc(&sink, 64));
  CHECK(cudaMemset(base, 1, window * kWindows));
  CHECK(cudaFuncSetAttribute(bulk_read, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));

  // Times `launch(window_base, bytes)` over rotated windows; returns {us per launch, TB/s}.
  auto time = [&](auto launch, size_t bytes) {
    constexpr int kReps = 40;
    for (int i = 0; i < 8; ++i) launch(base + (i % kWindows) * window);
    CHECK(cudaEventRecord(a));
    for (int i = 0; i < kReps; ++i) launch(base + (i % kWindows) * window);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    const double us = 1e3 * ms / kReps;
    return std::pair<double, double>{us, bytes / us * 1e-6};
  };

  std::printf("window %zu bytes, %d SMs\n", window, sms);
  std::printf("%-44s %8s %8s\n", "kernel", "us", "TB/s");
  for (int round = 0; round < 2; ++round) {
    {
      const size_t n = window / 16;
      auto r = time([&](char* w) { grid_stride_read<<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(w), n, sink); },
                    window);
      std::printf("%-44s %8.2f %8.3f\n", "grid-stride 16B loads (peak kernel)", r.first, r.second);
    }
    struct Bulk {
      int grid, streams, chunk, depth;
    };
    // 448 x 8 x 1 KB x 4: the 8B gate/up rt1_w8_k2_cta shape (8 row tiles, 2 k-tiles a stage).
    const Bulk bulks[] = {{448, 8, 1024, 4}, {448, 4, 2048, 4},  {448, 16, 512, 4}, {448, 1, 8192, 4},
                          {448, 8, 2048, 4}, {448, 8, 1024, 8},  {264, 8, 1024, 4}, {396, 8, 1024, 4},
                          {528, 8, 1024, 4}, {896, 4, 1024, 4},
                          // One CTA an SM with 30-32 KB stages (the wide CTA pipeline: 16 row tiles x
                          // 2 KB, 12 x 2.5 KB) against 4 x 2 KB stages at four CTAs an SM (rt1_w4_k8_cta).
                          {128, 16, 2048, 4}, {128, 16, 2048, 3}, {96, 16, 2048, 4}, {128, 12, 2560, 4},
                          {512, 4, 2048, 4}};
    for (const Bulk& k : bulks) {
      const size_t stage = static_cast<size_t>(k.streams) * k.chunk;
      const int stages_total = static_cast<int>(window / (stage * k.grid));
      const size_t bytes = stage * k.grid * stages_total;
      for (int order : {kRegion, kStageMajor}) {
        auto r = time(
            [&](char* w) {
              bulk_read<<<k.grid, 128, stage * k.depth>>>(w, order, k.streams, k.chunk, k.depth, stages_total, sink);
            },
            bytes);
        char name[96];
        std::snprintf(name, sizeof name, "bulk g%d s%d c%d d%d %s", k.grid, k.streams, k.chunk, k.depth,
                      order == kRegion ? "region" : "stage-major");
        std::printf("%-44s %8.2f %8.3f\n", name, r.first, r.second);
      }
    }
    for (int grid : {sms * 2, sms * 4, 448}) {
      constexpr int kU = 4;
      const size_t stage = 8 * kU * 512;
      const int stages_total = static_cast<int>(window / (stage * grid));
      const size_t bytes = stage * grid * stages_total;
      for (int order : {kRegion, kStageMajor, kTileGroup}) {
        auto r = time([&](char* w) { plain_read<kU><<<grid, 256>>>(w, order, stages_total, sink); }, bytes);
        char name[96];
        std::snprintf(name, sizeof name, "plain g%d 8 warps 2KB %s", grid,
                      order == kRegion ? "region" : order == kStageMajor ? "stage-major" : "tile-group");
        std::printf("%-44s %8.2f %8.3f\n", name, r.first, r.second);
      }
    }
  }
  return 0;
}
