// Probe: SM copy kernels (grid-stride, block-contiguous and block-tiled, 4 to 16 loads in flight,
// with and without cache hints, 1 to 8 blocks per SM) and bulk-copy (TMA) kernels (chunk size,
// stages, stores in flight, blocks per SM, chunk order, L2 hint) against cudaMemcpy D2D on 1 GiB,
// with and without a host launch gap in the timing; whether cudaMemcpy runs on the SMs; write-only
// bandwidth. `copy_probe once` runs each kind of copy once, for a profiler; `copy_probe hints` the
// grid-stride copy with L2 eviction hints per side; `copy_probe layout` the copies with source and
// destination at several offsets in one allocation, and a software-pipelined grid-stride copy;
// `copy_probe pipe` that copy by depth, grid, block size and L2 hints; `copy_probe pipe3` deeper
// pipelines and the read-only load path; `copy_probe layouts` the pipelined copy with warp- and
// block-contiguous runs and L2 256-byte fetches. `copy_probe writes`: write-only bandwidth on 2 GiB,
// cudaMemset (0 and 0x5a) against pattern-store kernels (grid-stride by stores per iteration, grid
// and store hint; one block per 16 KiB; bulk (TMA) stores of a shared buffer), all in turns run by
// run; `copy_probe amortized`: cudaMemcpy against the tool's copy kernel on 2 and 4 GiB, one copy
// and 4 back to back per timing, then that kernel with .cs stores, L2 evict-first stores and 2/SM;
// `copy_probe chunks [small]`: a non-persistent copy of one contiguous chunk per block, by chunk and block
// size (`small`: 1-2 loads per thread).
// Build: nvcc -O3 -arch=sm_90a -std=c++17. Results are in bench/results/README.md.
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <functional>
#include <string>
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
// Block tiles: block b copies tiles b, b + grid, ... of U * blockDim vectors, each thread U
// vectors blockDim apart, so a block's loads in flight are one contiguous U * 4 KiB run.
template <int U, bool L2_256>
__global__ void __launch_bounds__(256) tiled(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  const size_t tile = (size_t)U * blockDim.x;
  size_t i = (size_t)blockIdx.x * tile + threadIdx.x;
  for (; i + (U - 1) * blockDim.x < n; i += (size_t)gridDim.x * tile) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint4* from = s + i + u * blockDim.x;
      if (L2_256)
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(from));
      else
        v[u] = *from;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) d[i + u * blockDim.x] = v[u];
  }
  for (; i < n; i += blockDim.x) d[i] = s[i];  // only the last, partial tile gets here
}
// Grid-stride with the L2 256-byte prefetch hint on the loads.
template <int U>
__global__ void __launch_bounds__(256) grid_stride_l2(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(s + i + u * stride));
#pragma unroll
    for (int u = 0; u < U; ++u) d[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) d[i] = s[i];
}
__global__ void __launch_bounds__(256) write_only(uint4* __restrict__ d, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) d[i] = make_uint4(1, 2, 3, 4);
}
// Spins for about `cycles` clocks: launched wide it holds every SM; as one warp it delays what is queued behind it.
__global__ void __launch_bounds__(1024) spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {}
}
// An L2 eviction-priority policy: 0 none, 1 evict-first, 2 evict-last.
__device__ __forceinline__ uint64_t l2_policy(int kind) {
  uint64_t p = 0;
  if (kind == 1) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  if (kind == 2) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
// Bulk copy (TMA): each block takes C-byte chunks (grid-strided, or one contiguous range) through
// S shared-memory stages, one thread issuing; chunk k is loaded into stage k % S (mbarrier), then
// stored from it as one bulk group, with up to L stores still reading their stages while S - L
// loads are in flight. Each side may carry an L2 eviction hint (0 none, 1 evict-first, 2 evict-last).
struct BulkConfig { int chunk, stages, stores, blocks_per_sm; bool contiguous; int load_hint, store_hint; };
__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void wait_read(int l) {
  switch (l) {
    case 1: asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory"); break;
    default: asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory"); break;
  }
}
constexpr int kMaxStages = 16;
__global__ void __launch_bounds__(32) bulk(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n, BulkConfig c) {
  extern __shared__ __align__(128) unsigned char st[];
  __shared__ uint64_t bar[kMaxStages];
  if (threadIdx.x != 0) return;
  const size_t C = c.chunk, S = c.stages, L = c.stores;
  const size_t total = n * 16, chunks = (total + C - 1) / C;
  size_t first = blockIdx.x, step = gridDim.x, mine = 0;
  if (c.contiguous) {
    first = chunks * blockIdx.x / gridDim.x, step = 1;
    mine = chunks * (blockIdx.x + 1) / gridDim.x - first;
  } else if (blockIdx.x < chunks) {
    mine = (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x;
  }
  if (mine == 0) return;
  const uint64_t load_policy = l2_policy(c.load_hint), store_policy = l2_policy(c.store_hint);
  for (size_t i = 0; i < S; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(&bar[i])) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n fence.proxy.async.shared::cta;" ::: "memory");
  auto off = [&](size_t k) { return (first + k * step) * C; };
  auto len = [&](size_t o) { return (uint32_t)(total - o < C ? total - o : C); };
  auto load = [&](size_t k) {
    const size_t o = off(k); const uint32_t b = len(o), m = sa(&bar[k % S]), to = sa(st + (k % S) * C);
    const char* from = (const char*)s + o;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(m), "r"(b) : "memory");
    if (c.load_hint != 0)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                   ::"r"(to), "l"(from), "r"(b), "r"(m), "l"(load_policy) : "memory");
    else
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   ::"r"(to), "l"(from), "r"(b), "r"(m) : "memory");
  };
  for (size_t k = 0; k < mine && k < S - L; ++k) load(k);
  for (size_t k = 0; k < mine; ++k) {
    uint32_t done = 0;
    do asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                    : "=r"(done) : "r"(sa(&bar[k % S])), "r"((uint32_t)((k / S) & 1)) : "memory");
    while (!done);
    const size_t o = off(k);
    const uint32_t from = sa(st + (k % S) * C), b = len(o);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    if (c.store_hint != 0)
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;"
                   ::"l"((char*)d + o), "r"(from), "r"(b), "l"(store_policy) : "memory");
    else
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"((char*)d + o), "r"(from), "r"(b)
                   : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (k + S - L < mine) {
      wait_read((int)L);
      load(k + S - L);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
int bulk_grid(BulkConfig c) {
  int sms = 0, per_sm = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaFuncSetAttribute(bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, c.chunk * c.stages);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bulk, 32, c.chunk * c.stages);
  return sms * std::min(per_sm, c.blocks_per_sm);
}
// Grid-stride with L2 eviction-priority hints chosen per side (0 none, 1 evict-first, 2 evict-last;
// loads may also take the read-only path): does keeping written lines in L2 longer (and read lines
// shorter) batch the DRAM's write turnarounds?
template <int U, int LOAD, int STORE, bool NC>
__global__ void __launch_bounds__(256) grid_stride_hint(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  const uint64_t lp = l2_policy(LOAD), sp = l2_policy(STORE);
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint4* a = s + i + u * stride;
      if (LOAD == 0 && !NC) v[u] = *a;
      else if (LOAD == 0) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(a));
      else if (NC) asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(a), "l"(lp));
      else asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(a), "l"(lp));
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      uint4* a = d + i + u * stride;
      if (STORE == 0) *a = v[u];
      else asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(a), "r"(v[u].x), "r"(v[u].y), "r"(v[u].z), "r"(v[u].w), "l"(sp) : "memory");
    }
  }
  for (; i < n; i += stride) d[i] = s[i];
}
// The pipelined grid-stride copy with an L2 eviction hint per side (as grid_stride_hint).
template <int U, int LOAD, int STORE>
__global__ void __launch_bounds__(1024) grid_stride_pipe_hint(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  const uint64_t lp = l2_policy(LOAD), sp = l2_policy(STORE);
  auto ld = [&](const uint4* a) {
    uint4 v;
    if (LOAD == 0) v = *a;
    else asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(lp));
    return v;
  };
  auto st = [&](uint4* a, uint4 v) {
    if (STORE == 0) *a = v;
    else asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(sp) : "memory");
  };
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  bool full = i + (U - 1) * stride < n;
  uint4 cur[U];
  if (full) {
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = ld(s + i + u * stride);
  }
  while (full) {
    const size_t j = i + U * stride;
    const bool next_full = j + (U - 1) * stride < n;
    uint4 nxt[U];
    if (next_full) {
#pragma unroll
      for (int u = 0; u < U; ++u) nxt[u] = ld(s + j + u * stride);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) st(d + i + u * stride, cur[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = nxt[u];
    i = j;
    full = next_full;
  }
  for (; i < n; i += stride) d[i] = s[i];
}
// Three iterations of loads in flight per thread (two issued ahead of the stores), optionally
// through the read-only path with a 256-byte L2 prefetch.
template <int U, bool NC>
__global__ void __launch_bounds__(1024) grid_stride_pipe3(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  auto ld = [&](const uint4* a) {
    uint4 v;
    if (NC) asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a));
    else v = *a;
    return v;
  };
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  auto full = [&](size_t at) { return at + (U - 1) * stride < n; };
  uint4 a[U], b[U];
  bool fa = full(i), fb = full(i + U * stride);
  if (fa) {
#pragma unroll
    for (int u = 0; u < U; ++u) a[u] = ld(s + i + u * stride);
  }
  if (fb) {
#pragma unroll
    for (int u = 0; u < U; ++u) b[u] = ld(s + i + (U + u) * stride);
  }
  while (fa) {
    const size_t k = i + 2 * U * stride;
    const bool fc = full(k);
    uint4 c[U];
    if (fc) {
#pragma unroll
      for (int u = 0; u < U; ++u) c[u] = ld(s + k + u * stride);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) d[i + u * stride] = a[u];
#pragma unroll
    for (int u = 0; u < U; ++u) { a[u] = b[u]; b[u] = c[u]; }
    i += U * stride;
    fa = fb;
    fb = fc;
  }
  for (; i < n; i += stride) d[i] = s[i];
}

// Grid-stride with the next iteration's loads issued before the current iteration's stores, so a
// thread never has an empty load queue while its stores drain; the layout of a thread's U loads:
// LAYOUT 0 grid-stride, 1 warp-contiguous (a warp's U loads are one run of U * 512 bytes), 2
// block-contiguous (a block's are one run of U * blockDim * 16 bytes); L2_256 asks L2 to fetch
// 256-byte sectors on each load.
template <int U, int LAYOUT, bool L2_256>
__global__ void __launch_bounds__(256) pipe_layout(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  const size_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  size_t base, step, inner;
  if (LAYOUT == 0) {
    base = (size_t)blockIdx.x * blockDim.x + threadIdx.x; inner = (size_t)gridDim.x * blockDim.x; step = U * inner;
  } else if (LAYOUT == 1) {
    base = ((size_t)blockIdx.x * warps + warp) * U * 32 + lane; inner = 32; step = (size_t)gridDim.x * warps * U * 32;
  } else {
    base = (size_t)blockIdx.x * U * blockDim.x + threadIdx.x; inner = blockDim.x; step = (size_t)gridDim.x * U * blockDim.x;
  }
  auto load = [&](size_t i) {
    uint4 v;
    if (L2_256)
      asm volatile("ld.global.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(s + i));
    else
      v = s[i];
    return v;
  };
  size_t i = base;
  bool full = i + (U - 1) * inner < n;
  uint4 cur[U];
  if (full) {
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = load(i + u * inner);
  }
  while (full) {
    const size_t j = i + step;
    const bool next_full = j + (U - 1) * inner < n;
    uint4 nxt[U];
    if (next_full) {
#pragma unroll
      for (int u = 0; u < U; ++u) nxt[u] = load(j + u * inner);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) d[i + u * inner] = cur[u];
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = nxt[u];
    i = j;
    full = next_full;
  }
  // The partial last iteration (the next one starts past the end: step >= U * inner).
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (i + u * inner < n) d[i + u * inner] = load(i + u * inner);
}
// ---- `writes` and `amortized`: shared pieces ----
// Index-dependent, nonzero 16 bytes (a 32-bit hash of the index over four words): nothing for a
// compressor to find. Never all 0xff bytes, so a 0xff fill shows any vector left unwritten.
__host__ __device__ inline uint4 pattern(size_t i) {
  uint32_t h = (uint32_t)i;
  h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
  return make_uint4(h, h * 0x9e3779b9u, h ^ 0x5a5a5a5au, h + 0x3c6ef372u);
}
// A 16-byte store: 0 plain, 1 st.global.cs, 2 st.global.L1::no_allocate, 3 with an L2 cache policy.
template <int KIND>
__device__ __forceinline__ void st16(uint4* a, uint4 v, uint64_t policy) {
  if constexpr (KIND == 0) *a = v;
  else if constexpr (KIND == 1) __stcs(a, v);
  else if constexpr (KIND == 2)
    asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  else
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy) : "memory");
}
// Grid-stride pattern stores, U per thread per iteration; KIND 3 stores with the L2 evict-first policy.
template <int U, int KIND>
__global__ void __launch_bounds__(1024) store_gs(uint4* __restrict__ d, size_t n) {
  const uint64_t p = KIND == 3 ? l2_policy(1) : 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
#pragma unroll
    for (int u = 0; u < U; ++u) st16<KIND>(d + i + u * stride, pattern(i + u * stride), p);
  }
  for (; i < n; i += stride) st16<KIND>(d + i, pattern(i), p);
}
// Not persistent: block b writes the contiguous 16 KiB from vector b * 1024 (4 stores per thread,
// each a 4 KiB run across the block); launched as n / 1024 blocks.
__global__ void __launch_bounds__(256) store_chunk(uint4* __restrict__ d, size_t n) {
  const size_t i = (size_t)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
  for (int u = 0; u < 4; ++u)
    if (i + u * 256 < n) d[i + u * 256] = pattern(i + u * 256);
}
// Bulk (TMA) stores: the block fills kBulkStore bytes of shared memory with pattern(0, 1, ...)
// once, then one thread stores that buffer to chunks blockIdx.x, + gridDim.x, ... with at most 4
// bulk groups still reading it (the DRAM writes may trail). Vector i ends up pattern(i % (kBulkStore / 16)).
constexpr int kBulkStore = 32768;
__global__ void __launch_bounds__(128) bulk_store(uint4* __restrict__ d, size_t n) {
  __shared__ __align__(128) uint4 buf[kBulkStore / 16];
  for (int k = threadIdx.x; k < kBulkStore / 16; k += blockDim.x) buf[k] = pattern(k);
  // Each writer's generic-proxy stores must be fenced before the async proxy (the bulk copy) reads them.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x != 0) return;
  const size_t total = n * 16, chunks = (total + kBulkStore - 1) / kBulkStore;
  for (size_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const size_t o = c * kBulkStore;
    const uint32_t len = (uint32_t)(total - o < kBulkStore ? total - o : kBulkStore);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"((char*)d + o), "r"(sa(buf)), "r"(len)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory");  // so at most 4 at the next issue
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // the buffer must outlive the copies
}
// The tool's copy before session 14 (src/bench/cuda/peak_bandwidth.cu had it until then): grid-stride,
// software-pipelined, 8 loads per thread issued ahead of the previous 8 stores; its stores through
// st16<KIND> (0 plain, 1 st.global.cs, 3 L2 evict-first).
constexpr int kThreads = 256;
constexpr int kCopyUnroll = 8;
template <int KIND>
__global__ void __launch_bounds__(kThreads) copy_kernel_st(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n_vec) {
  const uint64_t p = KIND == 3 ? l2_policy(1) : 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  bool full = i + (kCopyUnroll - 1) * stride < n_vec;
  uint4 current[kCopyUnroll];
  if (full) {
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) current[u] = src[i + u * stride];
  }
  while (full) {
    const size_t next = i + kCopyUnroll * stride;
    const bool next_full = next + (kCopyUnroll - 1) * stride < n_vec;
    uint4 ahead[kCopyUnroll];
    if (next_full) {
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) ahead[u] = src[next + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) st16<KIND>(dst + i + u * stride, current[u], p);
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) current[u] = ahead[u];
    i = next;
    full = next_full;
  }
  for (; i < n_vec; i += stride) st16<KIND>(dst + i, src[i], p);
}
constexpr auto copy_kernel = copy_kernel_st<0>;
// Counts vectors that differ from pattern(i & mask) (byte < 0) or from memset's `byte`.
__global__ void __launch_bounds__(256) count_wrong(const uint4* __restrict__ d, size_t n, size_t mask, int byte,
                                                   unsigned long long* wrong) {
  const uint32_t w = 0x01010101u * (uint32_t)(byte & 0xff);
  unsigned long long bad = 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint4 v = d[i], e = byte < 0 ? pattern(i & mask) : make_uint4(w, w, w, w);
    bad += v.x != e.x || v.y != e.y || v.z != e.z || v.w != e.w;
  }
  if (bad) atomicAdd(wrong, bad);
}
int sm_count() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  return sms;
}
std::string grid_name(const char* what, int blocks, int threads) {
  return std::string(what) + " " + std::to_string(blocks) + "x" + std::to_string(threads);
}
// Fills d with 0xff bytes, runs f once, then checks all n vectors of d (as count_wrong): "ok" or FAIL.
std::string check(const std::function<void()>& f, uint4* d, size_t n, size_t mask, int byte) {
  static unsigned long long* wrong = nullptr;
  if (!wrong) cudaMalloc(&wrong, sizeof(*wrong));
  unsigned long long h = 0;
  cudaMemset(d, 0xff, n * 16);
  cudaMemset(wrong, 0, sizeof(h));
  f();
  count_wrong<<<4 * sm_count(), 256>>>(d, n, mask, byte, wrong);
  cudaMemcpy(&h, wrong, sizeof(h), cudaMemcpyDeviceToHost);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("FAIL (") + cudaGetErrorString(e) + ")";
  return h == 0 ? "ok" : "FAIL (" + std::to_string(h) + " of " + std::to_string(n) + " vectors wrong)";
}
// Each variant's median time (ms) between two events over `runs` runs after 2 warm-ups, the
// variants taken in turn within each run and in reverse order on odd runs: clock drift falls on
// all alike, and each pair alternates ABBA.
std::vector<double> median_ms(const std::vector<std::function<void()>>& fs, int runs = 15) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<std::vector<float>> ms(fs.size());
  for (int r = -2; r < runs; ++r)
    for (size_t k = 0; k < fs.size(); ++k) {
      const size_t v = (r & 1) ? fs.size() - 1 - k : k;
      cudaEventRecord(a); fs[v](); cudaEventRecord(b); cudaEventSynchronize(b);
      float t = 0; cudaEventElapsedTime(&t, a, b);
      if (r >= 0) ms[v].push_back(t);
    }
  cudaEventDestroy(a); cudaEventDestroy(b);
  std::vector<double> med;
  for (auto& m : ms) { std::sort(m.begin(), m.end()); med.push_back(m[m.size() / 2]); }
  return med;
}
double gbs(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }
// A table row: the name, then numbers (GB/s whole, ratios below 10 to 3 places), then a note.
void row(const std::string& name, std::initializer_list<double> cols, const std::string& note = "") {
  printf("  %-44s", name.c_str());
  for (double c : cols) printf(c < 10 ? " %9.3f" : " %9.0f", c);
  printf("  %s\n", note.c_str());
}

// `copy_probe writes`: write-only bandwidth on 2 GiB, cudaMemset against store kernels (grid-stride
// by stores per iteration, grid and cache hint; one block per 16 KiB; bulk stores), in turns.
int writes_mode() {
  const size_t bytes = size_t(2) << 30, n = bytes / 16, all = ~size_t(0);
  const int sm = sm_count();
  uint4* d = nullptr;
  if (cudaMalloc(&d, bytes) != cudaSuccess) { printf("writes: cudaMalloc of 2 GiB failed\n"); return 1; }
  struct Variant { std::string name; std::function<void()> f; size_t mask; int byte; };
  std::vector<Variant> vs = {{"cudaMemset 0", [=] { cudaMemsetAsync(d, 0, bytes); }, 0, 0},
                             {"cudaMemset 0x5a", [=] { cudaMemsetAsync(d, 0x5a, bytes); }, 0, 0x5a}};
  auto add = [&](void (*k)(uint4*, size_t), const char* what, int blocks, int threads) {
    vs.push_back({grid_name(what, blocks, threads), [=] { k<<<blocks, threads>>>(d, n); }, all, -1});
  };
  const int grids[][2] = {{sm, 256}, {2 * sm, 256}, {8 * sm, 256}, {sm, 1024}};
  for (const auto& g : grids) {
    add(store_gs<1, 0>, "store U1", g[0], g[1]);
    add(store_gs<4, 0>, "store U4", g[0], g[1]);
    add(store_gs<8, 0>, "store U8", g[0], g[1]);
  }
  for (int blocks : {sm, 8 * sm}) {
    add(store_gs<8, 1>, "store U8 st.global.cs", blocks, 256);
    add(store_gs<8, 2>, "store U8 L1::no_allocate", blocks, 256);
    add(store_gs<8, 3>, "store U8 L2 evict-first", blocks, 256);
  }
  vs.push_back({grid_name("store 16 KiB/block", (int)(n / 1024), 256), [=] { store_chunk<<<n / 1024, 256>>>(d, n); }, all, -1});
  for (int blocks : {sm, 2 * sm})
    vs.push_back({grid_name("bulk store 32 KiB x4 in flight", blocks, 128), [=] { bulk_store<<<blocks, 128>>>(d, n); },
                  kBulkStore / 16 - 1, -1});
  std::vector<std::string> ok;
  std::vector<std::function<void()>> fs;
  for (const Variant& v : vs) { ok.push_back(check(v.f, d, n, v.mask, v.byte)); fs.push_back(v.f); }
  const std::vector<double> ms = median_ms(fs);
  printf("writes, 2 GiB, median of 15 runs in turns: variant (blocks x threads), GB/s written, / cudaMemset 0x5a, check\n");
  for (size_t k = 0; k < vs.size(); ++k) row(vs[k].name, {gbs(bytes, ms[k]), ms[1] / ms[k]}, ok[k]);
  printf("(%s)\n", cudaGetErrorString(cudaGetLastError()));
  cudaFree(d);
  return 0;
}
// `copy_probe amortized`: cudaMemcpy against the tool's copy on 2 and 4 GiB (source the first half,
// destination the second of one allocation), one copy and 4 back to back per timing, ABBA; then at
// 2 GiB the copy with st.global.cs stores, with L2 evict-first stores and with 2 blocks per SM.
int amortized_mode() {
  const int sm = sm_count();
  for (int gib : {2, 4}) {
    const size_t bytes = size_t(gib) << 30, n = bytes / 16;
    uint4* base = nullptr;
    if (cudaMalloc(&base, 2 * bytes) != cudaSuccess) {
      printf("copy %d GiB: cudaMalloc of %d GiB failed (%s), skipped\n", gib, 2 * gib, cudaGetErrorString(cudaGetLastError()));
      continue;
    }
    uint4 *s = base, *d = base + n;
    store_gs<8, 0><<<2 * sm, 256>>>(s, n);  // source vector i = pattern(i), so a copy checks as a write
    auto memcpy1 = [=] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); };
    auto tool = [=] { copy_kernel<<<sm, kThreads>>>(s, d, n); };
    auto times4 = [](std::function<void()> f) { return [f] { for (int k = 0; k < 4; ++k) f(); }; };
    const std::string tool_name = grid_name("copy_kernel U8", sm, kThreads), tool_ok = check(tool, d, n, ~size_t(0), -1);
    const std::vector<double> ms = median_ms({memcpy1, tool, times4(memcpy1), times4(tool)});
    printf("copy %d GiB, median of 15 runs, ABBA: GB/s (read + written), / cudaMemcpy\n", gib);
    printf(" (a) one copy per timing\n");
    row("cudaMemcpyAsync D2D", {gbs(2.0 * bytes, ms[0]), 1.0});
    row(tool_name, {gbs(2.0 * bytes, ms[1]), ms[0] / ms[1]}, tool_ok);
    printf(" (b) 4 back-to-back copies per timing\n");
    row("cudaMemcpyAsync D2D x4", {gbs(8.0 * bytes, ms[2]), 1.0});
    row(tool_name + " x4", {gbs(8.0 * bytes, ms[3]), ms[2] / ms[3]});
    if (gib == 2) {
      const std::vector<std::pair<std::string, std::function<void()>>> vs = {
          {"cudaMemcpyAsync D2D", memcpy1},
          {tool_name, tool},
          {grid_name("copy_kernel U8 st.global.cs", sm, kThreads), [=] { copy_kernel_st<1><<<sm, kThreads>>>(s, d, n); }},
          {grid_name("copy_kernel U8 L2 evict-first", sm, kThreads), [=] { copy_kernel_st<3><<<sm, kThreads>>>(s, d, n); }},
          {grid_name("copy_kernel U8", 2 * sm, kThreads), [=] { copy_kernel<<<2 * sm, kThreads>>>(s, d, n); }}};
      std::vector<std::string> ok(1);
      std::vector<std::function<void()>> fs;
      for (const auto& v : vs) {
        if (!fs.empty()) ok.push_back(check(v.second, d, n, ~size_t(0), -1));
        fs.push_back(v.second);
      }
      const std::vector<double> ms2 = median_ms(fs);
      printf("copy 2 GiB variants, (a) one copy per timing, in turns with cudaMemcpy (ABBA)\n");
      for (size_t k = 0; k < vs.size(); ++k) row(vs[k].first, {gbs(2.0 * bytes, ms2[k]), ms2[0] / ms2[k]}, ok[k]);
    }
    printf("(%s)\n", cudaGetErrorString(cudaGetLastError()));
    cudaFree(base);
  }
  return 0;
}
// Not persistent: block b copies the contiguous U * T vectors from b * U * T, all of a thread's U
// loads (T vectors apart, so each is one contiguous run across the block) before its stores;
// launched as n / (U * T) blocks, so the block scheduler keeps every SM full to the end (the store
// kernel of this shape wrote faster than cudaMemset in `writes`).
template <int U, int T>
__global__ void __launch_bounds__(T) copy_chunk(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  const size_t i = (size_t)blockIdx.x * (U * T) + threadIdx.x;
  uint4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (i + u * T < n) v[u] = s[i + u * T];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (i + u * T < n) d[i + u * T] = v[u];
}
// `copy_probe chunks`: the non-persistent chunk copy by chunk size and block size against
// cudaMemcpy and the tool's copy on 2 GiB, in turns (ABBA).
int chunks_mode(int argc, char** argv) {
  const int sm = sm_count();
  const size_t bytes = size_t(2) << 30, n = bytes / 16;
  uint4* base = nullptr;
  if (cudaMalloc(&base, 2 * bytes) != cudaSuccess) { printf("chunks: cudaMalloc of 4 GiB failed\n"); return 1; }
  uint4 *s = base, *d = base + n;
  store_gs<8, 0><<<2 * sm, 256>>>(s, n);
  std::vector<std::pair<std::string, std::function<void()>>> vs = {
      {"cudaMemcpyAsync D2D", [=] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }},
      {grid_name("copy_kernel U8", sm, kThreads), [=] { copy_kernel<<<sm, kThreads>>>(s, d, n); }}};
  auto add = [&](void (*k)(const uint4*, uint4*, size_t), int u, int t) {
    const size_t blocks = (n + (size_t)u * t - 1) / ((size_t)u * t);
    vs.push_back({"chunk " + std::to_string(u * t / 64) + " KiB U" + std::to_string(u) + " x " + std::to_string(t),
                  [=] { k<<<(unsigned)blocks, t>>>(s, d, n); }});
  };
  if (argc > 2 && std::strcmp(argv[2], "small") == 0) {  // the second pass: fewer loads, more threads
    add(copy_chunk<1, 256>, 1, 256);
    add(copy_chunk<2, 128>, 2, 128);
    add(copy_chunk<2, 256>, 2, 256);
    add(copy_chunk<1, 512>, 1, 512);
    add(copy_chunk<2, 512>, 2, 512);
    add(copy_chunk<1, 1024>, 1, 1024);
    add(copy_chunk<2, 1024>, 2, 1024);
    add(copy_chunk<4, 1024>, 4, 1024);
  } else {
    add(copy_chunk<2, 256>, 2, 256);
    add(copy_chunk<4, 128>, 4, 128);
    add(copy_chunk<4, 256>, 4, 256);
    add(copy_chunk<8, 128>, 8, 128);
    add(copy_chunk<8, 256>, 8, 256);
    add(copy_chunk<4, 512>, 4, 512);
    add(copy_chunk<16, 128>, 16, 128);
    add(copy_chunk<16, 256>, 16, 256);
    add(copy_chunk<4, 1024>, 4, 1024);
  }
  std::vector<std::string> ok(1);
  std::vector<std::function<void()>> fs;
  for (const auto& v : vs) {
    if (!fs.empty()) ok.push_back(check(v.second, d, n, ~size_t(0), -1));
    fs.push_back(v.second);
  }
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<double> ms = median_ms(fs);
    printf("copy 2 GiB, pass %d, median of 15 runs in turns (ABBA): GB/s (read + written), / cudaMemcpy, check\n", pass);
    for (size_t k = 0; k < vs.size(); ++k) row(vs[k].first, {gbs(2.0 * bytes, ms[k]), ms[0] / ms[k]}, ok[k]);
  }
  printf("(%s)\n", cudaGetErrorString(cudaGetLastError()));
  cudaFree(base);
  return 0;
}
int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "chunks") == 0) return chunks_mode(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "writes") == 0) return writes_mode();
  if (argc > 1 && std::strcmp(argv[1], "amortized") == 0) return amortized_mode();
  size_t bytes = size_t(1) << 30, n = bytes / 16;
  uint4 *s, *d; cudaMalloc(&s, bytes); cudaMalloc(&d, bytes);
  // `copy_probe once`: each copy once, nothing else, for a profiler (the memcpy first).
  if (argc > 1 && std::strcmp(argv[1], "once") == 0) {
    cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice);
    grid_stride<4, false><<<264, 256>>>(s, d, n);
    const BulkConfig c{32768, 6, 2, 1, false, 0, 0};
    bulk<<<bulk_grid(c), 32, c.chunk * c.stages>>>(s, d, n, c);
    cudaDeviceSynchronize();
    printf("once: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
  }
  cudaMemset(s, 1, bytes);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto time = [&](auto f) { std::vector<float> ms; for (int r = 0; r < 22; ++r) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float t; cudaEventElapsedTime(&t, a, b); if (r >= 2) ms.push_back(t);} std::sort(ms.begin(), ms.end()); return 2.0 * bytes / (ms[ms.size()/2] * 1e-3) / 1e9; };
  // The same, with a short spin queued ahead of the start event: the launches are then queued
  // before the GPU reaches them, so no host submission gap falls inside the timing.
  auto gated = [&](auto f) { std::vector<float> ms; for (int r = 0; r < 22; ++r) { spin<<<1, 32>>>(100000LL); cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float t; cudaEventElapsedTime(&t, a, b); if (r >= 2) ms.push_back(t);} std::sort(ms.begin(), ms.end()); return 2.0 * bytes / (ms[ms.size()/2] * 1e-3) / 1e9; };

  // `copy_probe layouts`: the pipelined copy with warp- and block-contiguous loads and the L2
  // 256-byte fetch, against cudaMemcpy and the tool's copy (grid-stride U8, 132 x 256), in turns.
  if (argc > 1 && std::strcmp(argv[1], "layouts") == 0) {
    for (int pass = 0; pass < 3; ++pass) {
      printf("memcpy %.0f  tool %.0f  gs-256B U8 %.0f | warp U4 %.0f U8 %.0f U8-256B %.0f U16 %.0f | block U4 %.0f U8 %.0f U8-256B %.0f | 2/SM: warp U4 %.0f U8 %.0f block U4 %.0f | memcpy %.0f\n",
             time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }),
             time([&] { pipe_layout<8, 0, false><<<132, 256>>>(s, d, n); }),
             time([&] { pipe_layout<8, 0, true><<<132, 256>>>(s, d, n); }),
             time([&] { pipe_layout<4, 1, false><<<132, 256>>>(s, d, n); }),
             time([&] { pipe_layout<8, 1, false><<<132, 256>>>(s, d, n); }),
             time([&] { pipe_layout<8, 1, true><<<132, 256>>>(s, d, n); }),
             time([&] { pipe_layout<16, 1, false><<<132, 256>>>(s, d, n); }),
             time([&] { pipe_layout<4, 2, false><<<132, 256>>>(s, d, n); }),
             time([&] { pipe_layout<8, 2, false><<<132, 256>>>(s, d, n); }),
             time([&] { pipe_layout<8, 2, true><<<132, 256>>>(s, d, n); }),
             time([&] { pipe_layout<4, 1, false><<<264, 256>>>(s, d, n); }),
             time([&] { pipe_layout<8, 1, false><<<264, 256>>>(s, d, n); }),
             time([&] { pipe_layout<4, 2, false><<<264, 256>>>(s, d, n); }),
             time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }));
    }
    // Every layout copies every byte, on a length that leaves a partial last iteration.
    const size_t m = n - 77;
    std::vector<uint32_t> h(m * 4), back(m * 4);
    for (size_t k = 0; k < h.size(); ++k) h[k] = (uint32_t)(k * 2654435761u);
    cudaMemcpy(s, h.data(), m * 16, cudaMemcpyHostToDevice);
    auto check = [&](const char* name, auto f) {
      cudaMemset(d, 0, bytes); f(); cudaMemcpy(back.data(), d, m * 16, cudaMemcpyDeviceToHost);
      printf("%s: %s  ", name, std::memcmp(h.data(), back.data(), m * 16) == 0 ? "copied" : "WRONG");
    };
    check("gs U8", [&] { pipe_layout<8, 0, true><<<132, 256>>>(s, d, m); });
    check("warp U8", [&] { pipe_layout<8, 1, false><<<132, 256>>>(s, d, m); });
    check("block U8", [&] { pipe_layout<8, 2, true><<<132, 256>>>(s, d, m); });
    printf("(%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
  }
  // `copy_probe pipe`: the pipelined grid-stride copy by depth, grid, block size and L2 hints.
  if (argc > 1 && std::strcmp(argv[1], "pipe") == 0) {
    for (int pass = 0; pass < 2; ++pass) {
      printf("memcpy %.0f\n", time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }));
      for (int bps : {1, 2, 3}) {
        const int g = 132 * bps;
        printf("grid %d x 256, pipe: U2 %.0f  U4 %.0f  U8 %.0f  U4 f/f %.0f  U4 -/f %.0f  U4 f/- %.0f  U2 f/f %.0f\n", g,
               time([&] { grid_stride_pipe_hint<2, 0, 0><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_pipe_hint<4, 0, 0><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_pipe_hint<8, 0, 0><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_pipe_hint<4, 1, 1><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_pipe_hint<4, 0, 1><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_pipe_hint<4, 1, 0><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_pipe_hint<2, 1, 1><<<g, 256>>>(s, d, n); }));
      }
      printf("pipe, deeper and narrower: 132x256 U16 %.0f  132x128 U16 %.0f  264x128 U8 %.0f  132x384 U8 %.0f  132x256 U8 -/f %.0f\n",
             time([&] { grid_stride_pipe_hint<16, 0, 0><<<132, 256>>>(s, d, n); }),
             time([&] { grid_stride_pipe_hint<16, 0, 0><<<132, 128>>>(s, d, n); }),
             time([&] { grid_stride_pipe_hint<8, 0, 0><<<264, 128>>>(s, d, n); }),
             time([&] { grid_stride_pipe_hint<8, 0, 0><<<132, 384>>>(s, d, n); }),
             time([&] { grid_stride_pipe_hint<8, 0, 1><<<132, 256>>>(s, d, n); }));
      for (int threads : {512, 1024}) {
        printf("grid 132 x %d, pipe: U2 %.0f  U4 %.0f  U4 f/f %.0f\n", threads,
               time([&] { grid_stride_pipe_hint<2, 0, 0><<<132, threads>>>(s, d, n); }),
               time([&] { grid_stride_pipe_hint<4, 0, 0><<<132, threads>>>(s, d, n); }),
               time([&] { grid_stride_pipe_hint<4, 1, 1><<<132, threads>>>(s, d, n); }));
      }
    }
    return 0;
  }
  // `copy_probe pipe3`: deeper pipelines and the read-only path, against the tool's copy (pipe U8, 132 x 256).
  if (argc > 1 && std::strcmp(argv[1], "pipe3") == 0) {
    for (int pass = 0; pass < 3; ++pass) {
      printf("memcpy %.0f  tool (pipe U8 132x256) %.0f  pipe3 U4 132x256 %.0f  pipe3 U4 264x256 %.0f  pipe3 U8 132x256 %.0f  "
             "pipe3 U4 nc 132x256 %.0f  pipe U8 132x512 %.0f  pipe U8 264x256 %.0f  pipe U8 132x128 %.0f  memcpy %.0f\n",
             time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }),
             time([&] { grid_stride_pipe_hint<8, 0, 0><<<132, 256>>>(s, d, n); }),
             time([&] { grid_stride_pipe3<4, false><<<132, 256>>>(s, d, n); }),
             time([&] { grid_stride_pipe3<4, false><<<264, 256>>>(s, d, n); }),
             time([&] { grid_stride_pipe3<8, false><<<132, 256>>>(s, d, n); }),
             time([&] { grid_stride_pipe3<4, true><<<132, 256>>>(s, d, n); }),
             time([&] { grid_stride_pipe_hint<8, 0, 0><<<132, 512>>>(s, d, n); }),
             time([&] { grid_stride_pipe_hint<8, 0, 0><<<264, 256>>>(s, d, n); }),
             time([&] { grid_stride_pipe_hint<8, 0, 0><<<132, 128>>>(s, d, n); }),
             time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }));
    }
    cudaMemset(d, 0, bytes);
    grid_stride_pipe3<4, true><<<132, 256>>>(s, d, n);
    std::vector<unsigned char> back(1 << 20);
    cudaMemcpy(back.data(), d + n - (1 << 16), back.size(), cudaMemcpyDeviceToHost);
    printf("pipe3 tail check: %s (%s)\n", back[0] == 1 && back.back() == 1 ? "copied" : "WRONG",
           cudaGetErrorString(cudaGetLastError()));
    return 0;
  }
  // `copy_probe layout`: source and destination in one allocation, the destination 1 GiB + off
  // after the source: does where the two halves fall on the DRAM channels change either copy?
  if (argc > 1 && std::strcmp(argv[1], "layout") == 0) {
    uint4* base = nullptr;
    cudaMalloc(&base, 2 * bytes + (size_t(64) << 20) + (1 << 16));
    cudaMemset(base, 1, bytes);
    const BulkConfig c{32768, 6, 2, 1, false, 0, 0};
    const int gb = bulk_grid(c);
    for (size_t off : {size_t(0), size_t(12288), size_t(1) << 20, (size_t(64) << 20) + 12288}) {
      uint4 *s2 = base, *d2 = base + (bytes + off) / 16;
      printf("layout off %zu: memcpy %.0f  gs4 528 %.0f  pipe4 264 %.0f  pipe4 528 %.0f  pipe2 528 %.0f  bulk 32x6 %.0f  memcpy %.0f\n",
             off, time([&] { cudaMemcpyAsync(d2, s2, bytes, cudaMemcpyDeviceToDevice); }),
             time([&] { grid_stride<4, false><<<528, 256>>>(s2, d2, n); }),
             time([&] { pipe_layout<4, 0, false><<<264, 256>>>(s2, d2, n); }),
             time([&] { pipe_layout<4, 0, false><<<528, 256>>>(s2, d2, n); }),
             time([&] { pipe_layout<2, 0, false><<<528, 256>>>(s2, d2, n); }),
             time([&] { bulk<<<gb, 32, c.chunk * c.stages>>>(s2, d2, n, c); }),
             time([&] { cudaMemcpyAsync(d2, s2, bytes, cudaMemcpyDeviceToDevice); }));
    }
    cudaMemset(d, 0, bytes);
    pipe_layout<4, 0, false><<<264, 256>>>(s, d, n);
    std::vector<unsigned char> back(1 << 20);
    cudaMemcpy(back.data(), d + n - (1 << 16), back.size(), cudaMemcpyDeviceToHost);
    printf("pipelined copy tail check: %s (%s)\n", back[0] == 1 && back.back() == 1 ? "copied" : "WRONG",
           cudaGetErrorString(cudaGetLastError()));
    return 0;
  }
  // `copy_probe hints`: the hinted grid-stride copies against cudaMemcpy, in turns.
  if (argc > 1 && std::strcmp(argv[1], "hints") == 0) {
    for (int pass = 0; pass < 2; ++pass) {
      printf("memcpy %.0f\n", time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }));
      for (int bps : {2, 4}) {
        const int g = 132 * bps;
        printf("grid %d U4 load/store hints (-: none, f: evict-first, l: evict-last, n: read-only path): "
               "--/-- %.0f  f/- %.0f  f/l %.0f  -/l %.0f  nf/l %.0f  n-/- %.0f  f/f %.0f  U8 f/l %.0f  U8 nf/l %.0f\n", g,
               time([&] { grid_stride_hint<4, 0, 0, false><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_hint<4, 1, 0, false><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_hint<4, 1, 2, false><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_hint<4, 0, 2, false><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_hint<4, 1, 2, true><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_hint<4, 0, 0, true><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_hint<4, 1, 1, false><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_hint<8, 1, 2, false><<<g, 256>>>(s, d, n); }),
               time([&] { grid_stride_hint<8, 1, 2, true><<<g, 256>>>(s, d, n); }));
      }
      const char* hint = "-fl";
      for (BulkConfig c : {BulkConfig{32768, 6, 2, 1, false, 0, 0}, BulkConfig{32768, 6, 2, 1, false, 1, 2},
                           BulkConfig{32768, 6, 2, 1, false, 0, 2}, BulkConfig{32768, 6, 2, 1, false, 1, 0}}) {
        const int g = bulk_grid(c);
        printf("bulk 32x6 L2 load/store %c/%c %.0f\n", hint[c.load_hint], hint[c.store_hint],
               time([&] { bulk<<<g, 32, c.chunk * c.stages>>>(s, d, n, c); }));
      }
    }
    cudaMemset(d, 0, bytes);
    grid_stride_hint<4, 1, 2, true><<<264, 256>>>(s, d, n);
    std::vector<unsigned char> back(1 << 20);
    cudaMemcpy(back.data(), d + n - (1 << 16), back.size(), cudaMemcpyDeviceToHost);
    printf("hinted copy tail check: %s (%s)\n", back[0] == 1 && back.back() == 1 ? "copied" : "WRONG",
           cudaGetErrorString(cudaGetLastError()));
    return 0;
  }
  {
    const BulkConfig b64{65536, 3, 1, 1, false, 0, 0}, b32{32768, 6, 2, 1, false, 0, 0};
    const int g64 = bulk_grid(b64), g32 = bulk_grid(b32);
    for (int pass = 0; pass < 2; ++pass) {
      auto t = [&](auto f) { return pass ? gated(f) : time(f); };
      printf("%s: memcpy %.0f  gs4 264 %.0f  gs4 528 %.0f  gs4cs 1056 %.0f  bulk 64x3 L1 %.0f  bulk 32x6 L2 %.0f  memcpy %.0f\n",
             pass ? "gated" : "plain", t([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }),
             t([&] { grid_stride<4, false><<<264, 256>>>(s, d, n); }),
             t([&] { grid_stride<4, false><<<528, 256>>>(s, d, n); }),
             t([&] { grid_stride<4, true><<<1056, 256>>>(s, d, n); }),
             t([&] { bulk<<<g64, 32, b64.chunk * b64.stages>>>(s, d, n, b64); }),
             t([&] { bulk<<<g32, 32, b32.chunk * b32.stages>>>(s, d, n, b32); }),
             t([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }));
    }
  }
  printf("memcpy %.0f\n", time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }));
  for (int bps : {4, 8}) {
    int g = 132 * bps;
    printf("grid %d: gs4 %.0f gs4cs %.0f gs8 %.0f gs8cs %.0f ch4 %.0f ch8 %.0f\n", g,
      time([&] { grid_stride<4, false><<<g, 256>>>(s, d, n); }), time([&] { grid_stride<4, true><<<g, 256>>>(s, d, n); }),
      time([&] { grid_stride<8, false><<<g, 256>>>(s, d, n); }), time([&] { grid_stride<8, true><<<g, 256>>>(s, d, n); }),
      time([&] { chunked<4><<<g, 256>>>(s, d, n); }), time([&] { chunked<8><<<g, 256>>>(s, d, n); }));
  }
  for (int bps : {1, 2}) {
    int g = 132 * bps;
    printf("grid %d: gs4 %.0f gs8 %.0f gs16 %.0f\n", g, time([&] { grid_stride<4, false><<<g, 256>>>(s, d, n); }),
           time([&] { grid_stride<8, false><<<g, 256>>>(s, d, n); }),
           time([&] { grid_stride<16, false><<<g, 256>>>(s, d, n); }));
  }
  // Is cudaMemcpy D2D an SM kernel? Time it on its own stream while a spinning kernel fills every SM.
  {
    cudaStream_t side, other;
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int rep = 0; rep < 3; ++rep) {
      spin<<<132 * 2, 1024, 0, other>>>(20000000LL);  // ~10 ms at ~1.98 GHz
      cudaEventRecord(e0, side);
      cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, side);
      cudaEventRecord(e1, side);
      cudaDeviceSynchronize();
      float with_spin = 0; cudaEventElapsedTime(&with_spin, e0, e1);
      printf("memcpy while every SM spins ~10 ms: %.3f ms (%s)\n", with_spin, cudaGetErrorString(cudaGetLastError()));
    }
  }
  printf("write-only gs 2/SM %.0f (GB/s of bytes written x2)\n", time([&] { write_only<<<264, 256>>>(d, n); }));
  printf("memset %.0f (x2)\n", time([&] { cudaMemsetAsync(d, 0, bytes); }));
  for (int bps : {2, 3, 4}) {
    int g = 132 * bps;
    printf("grid %d: gs4 %.0f gs4-L2pf %.0f gs8-L2pf %.0f tiled4 %.0f tiled4-L2pf %.0f tiled8 %.0f tiled8-L2pf %.0f\n", g,
           time([&] { grid_stride<4, false><<<g, 256>>>(s, d, n); }),
           time([&] { grid_stride_l2<4><<<g, 256>>>(s, d, n); }), time([&] { grid_stride_l2<8><<<g, 256>>>(s, d, n); }),
           time([&] { tiled<4, false><<<g, 256>>>(s, d, n); }), time([&] { tiled<4, true><<<g, 256>>>(s, d, n); }),
           time([&] { tiled<8, false><<<g, 256>>>(s, d, n); }), time([&] { tiled<8, true><<<g, 256>>>(s, d, n); }));
  }
  // Correctness of the bulk kernel on a length with a short last chunk: a byte pattern, copied.
  {
    const size_t m = n - 3;
    std::vector<unsigned char> h(bytes), back(bytes);
    for (size_t i = 0; i < bytes; ++i) h[i] = (unsigned char)(i * 2654435761u >> 13);
    cudaMemcpy(s, h.data(), bytes, cudaMemcpyHostToDevice);
    for (BulkConfig c : {BulkConfig{32768, 6, 2, 1, false, 0, 0}, BulkConfig{16384, 4, 1, 1, true, 1, 1}}) {
      cudaMemset(d, 0, bytes);
      bulk<<<bulk_grid(c), 32, c.chunk * c.stages>>>(s, d, m, c);
      cudaMemcpy(back.data(), d, bytes, cudaMemcpyDeviceToHost);
      const bool copied = std::memcmp(h.data(), back.data(), m * 16) == 0;
      bool rest_zero = true;
      for (size_t i = m * 16; i < bytes; ++i) rest_zero = rest_zero && back[i] == 0;
      printf("bulk %dK x%d L%d%s on %zu vectors: %s (%s)\n", c.chunk / 1024, c.stages, c.stores,
             c.contiguous ? " contiguous" : "", m, copied && rest_zero ? "correct" : "WRONG",
             cudaGetErrorString(cudaGetLastError()));
    }
  }
  printf("bulk: chunk KiB x stages, stores in flight, blocks/SM, [c]ontiguous ranges, load/store hint "
         "(-: none, f: evict-first, l: evict-last)\n");
  const BulkConfig configs[] = {{8192, 8, 2, 1, 0, 0, 0},  {16384, 4, 1, 1, 0, 0, 0}, {16384, 6, 2, 1, 0, 0, 0},
                                {32768, 4, 2, 1, 0, 0, 0}, {32768, 6, 2, 1, 0, 0, 0}, {65536, 3, 1, 1, 0, 0, 0},
                                {16384, 3, 1, 4, 0, 0, 0}, {32768, 6, 2, 1, 1, 0, 0}, {32768, 6, 2, 1, 0, 1, 1},
                                {32768, 6, 2, 1, 0, 1, 2}, {32768, 6, 2, 1, 0, 0, 2}, {32768, 6, 2, 1, 0, 1, 0}};
  for (const BulkConfig& c : configs) {
    const int g = bulk_grid(c);
    const char* hint = "-fl";
    printf("  %2dx%-2d L%d %d/SM %s %c/%c %.0f\n", c.chunk / 1024, c.stages, c.stores, g / 132, c.contiguous ? "c" : "-",
           hint[c.load_hint], hint[c.store_hint], time([&] { bulk<<<g, 32, c.chunk * c.stages>>>(s, d, n, c); }));
  }
  printf("memcpy %.0f\n", time([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); }));
  return 0;
}
