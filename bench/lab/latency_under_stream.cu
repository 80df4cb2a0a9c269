// Probe: what does one dependent read cost a CTA while the rest of the GPU streams weights?
// Every decode-step timeline puts each link of decode attention's chain before its wait (find the
// item from the lengths, stage the block numbers, issue the K/V prologue) at ~1.0-1.6 us, whatever
// the link reads, while the QKV projection streams at ~4 TB/s. Three causes would look the same in
// the timeline: a DRAM read queued behind the stream, an L2 hit queued behind it, or the link's
// code fetched cold. This probe separates them:
//   - a pointer chase (each load's address is the previous load's value) by one thread of one CTA,
//     over lines in DRAM or lines just read into L2, with the GPU idle or with a
//     streaming kernel reading a 2 GB buffer on the other SMs (16-byte loads, plain or L2
//     evict-first as the decode GEMMs' weights are);
//   - a dependent chain of arithmetic through ~64 KB of straight-line code, first run after the L2
//     was flushed and again right after, idle and under the stream: the cost of fetching code;
//   - a cluster's hand-off through shared memory with each kind of barrier (releasing or relaxed
//     arrive, a cluster fence, a GPU fence), with and without a global store before it, and the
//     same hand-off by st.async into the reader's shared memory, completing its mbarrier's bytes.
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a latency_under_stream.cu
// Run: ./a.out   (prints one line per case: ns per dependent load or per code pass, and the
// stream's read rate over the probe's lifetime, so that a case is known to have overlapped it)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "lab_check.h"

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The stream: each CTA reads its slice of `bytes` `passes` times, 16 bytes a thread a load, eight
// loads in flight a thread, into a sum that is written once (so the loads stay). [0] and [1] of
// `span` get the first start and the last end over the CTAs.
__global__ void __launch_bounds__(512) stream_read(const int4* __restrict__ data, size_t n16, int passes,
                                                   bool evict_first, unsigned long long* span, int* sink) {
  if (threadIdx.x == 0) atomicMin(&span[0], static_cast<unsigned long long>(now_ns()));
  uint64_t policy = 0;
  if (evict_first) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  const size_t per_cta = n16 / gridDim.x;
  const int4* base = data + blockIdx.x * per_cta;
  int acc = 0;
  for (int p = 0; p < passes; ++p) {
    for (size_t i = threadIdx.x; i + 7 * blockDim.x < per_cta; i += 8 * blockDim.x) {
      int4 v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int4* src = base + i + j * blockDim.x;
        if (evict_first)
          asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.s32 {%0,%1,%2,%3}, [%4], %5;"
                       : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w)
                       : "l"(src), "l"(policy));
        else
          asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w)
                       : "l"(src));
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
  }
  if (acc == 0x12345678) *sink = acc;  // practically never: keeps the loads
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(&span[1], static_cast<unsigned long long>(now_ns()));
}

// With a stream running (`started` = its span), a probe first waits until the stream's first CTA
// has started and 20 us more have passed, so that it runs in the stream's steady state.
__device__ __forceinline__ void wait_for_stream(const unsigned long long* started) {
  if (started == nullptr) return;
  const volatile unsigned long long* first = started;
  while (*first == ~0ull) {
  }
  const uint64_t t = now_ns();
  while (now_ns() < t + 20000) {
  }
}

// The chase: `hops` loads, each at the index the previous one returned (cached in L2 only, so an
// L1 hit never hides the trip). out: [0] ns for the hops, [1] start, [2] end (globaltimer).
__global__ void chase(const uint32_t* __restrict__ next, int hops, const unsigned long long* started,
                      unsigned long long* out) {
  if (threadIdx.x != 0) return;
  wait_for_stream(started);
  uint32_t i = 0;
  // One load first, so that the timed hops start from a register the chase itself produced.
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(i) : "l"(next));
  const uint64_t t0 = now_ns();
  for (int h = 0; h < hops; ++h) asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(i) : "l"(next + i));
  const uint64_t t1 = now_ns();
  out[0] = t1 - t0 + (i == 0xffffffffu ? 1 : 0);  // uses i: the last load has landed
  out[1] = t0;
  out[2] = t1;
}

// ~64 KB of straight-line code: a dependent chain of multiply-adds, each its own instruction.
// (m and c are runtime values, so nothing folds: 4096 instructions of 16 bytes.)
template <int N>
__device__ __forceinline__ uint32_t code_chain(uint32_t x, uint32_t m, uint32_t c) {
#pragma unroll
  for (int k = 0; k < N; ++k) asm volatile("mad.lo.u32 %0, %0, %1, %2;" : "+r"(x) : "r"(m), "r"(c));
  return x;
}

__global__ void code_pass(uint32_t seed, const unsigned long long* started, unsigned long long* out) {
  if (threadIdx.x == 0) wait_for_stream(started);
  __syncwarp();
  const uint64_t t0 = now_ns();
  const uint32_t x = code_chain<4096>(seed + threadIdx.x, seed | 1u, seed >> 1);
  const uint64_t t1 = now_ns();
  if (threadIdx.x == 0) {
    out[0] = t1 - t0 + (x == 0x9e3779b9u ? 1 : 0);
    out[1] = t0;
    out[2] = t1;
  }
}

// What a cluster's CTAs pay to hand each other shared memory: every iteration writes this CTA's
// slot, meets the cluster at a barrier of the chosen kind, and reads the next rank's slot (as the
// decode merges and the skinny GEMM's K-split epilogues do). With `store_first` each iteration also
// stores to global memory before the barrier (an epilogue's output): a releasing arrive waits for it.
// out: [0] ns per iteration (rank 0, thread 0), [1] start, [2] end.
enum BarrierKind {
  kClusterRelease = 0,  // barrier.cluster.arrive (release) + wait (acquire): cluster_barrier()
  kClusterRelaxed,      // barrier.cluster.arrive.relaxed + wait: orders nothing
  kFenceClusterThenRelaxed,  // fence.acq_rel.cluster, then the relaxed barrier
  kCtaOnly,                  // __syncthreads() alone (no cluster; reads a neighbour's slot in its CTA)
  kFenceGpuThenCta,          // __threadfence() (fence.sc.gpu) then __syncthreads()
  kStAsync,  // st.async into the next rank's slot, completing its mbarrier's bytes; wait on our own
  kBarrierKinds
};
__global__ void __launch_bounds__(128) barrier_cost(int kind, int iterations, bool store_first, int* scratch,
                                                    const unsigned long long* started, unsigned long long* out) {
  __shared__ int slot[128];
  __shared__ uint64_t arrived;  // kStAsync: the bytes of the previous rank's slot have landed
  unsigned my_rank = 0, ranks = 1;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(my_rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ranks));
  const unsigned peer = (my_rank + 1) % ranks;
  uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(&slot[threadIdx.x]));
  uint32_t remote = local;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(peer));
  const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&arrived));
  uint32_t remote_bar = bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(bar), "r"(peer));
  if (kind == kStAsync) {
    if (threadIdx.x == 0)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n\tfence.mbarrier_init.release.cluster;" ::"r"(bar)
                   : "memory");
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  }
  if (threadIdx.x == 0) wait_for_stream(started);
  __syncthreads();
  int acc = 0;
  const uint64_t t0 = now_ns();
  for (int i = 0; i < iterations; ++i) {
    if (kind == kStAsync) {
      if (store_first) scratch[(blockIdx.x * 128 + threadIdx.x) % 4096] = i;
      if (threadIdx.x == 0)
        asm volatile("mbarrier.arrive.expect_tx.relaxed.cta.shared::cta.b64 _, [%0], 512;" ::"r"(bar) : "memory");
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];" ::"r"(remote),
                   "r"(i + acc), "r"(remote_bar)
                   : "memory");
      uint32_t done = 0;
      while (!done)
        asm volatile(
            "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(bar), "r"(i & 1)
            : "memory");
      acc += slot[threadIdx.x] & 1;
      // Our slot is written again next iteration by the previous rank: every thread has read it.
      asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
      continue;
    }
    slot[threadIdx.x] = i + acc;
    if (store_first) scratch[(blockIdx.x * 128 + threadIdx.x) % 4096] = i;
    switch (kind) {
      case kClusterRelease:
        asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
        break;
      case kClusterRelaxed:
        asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
        break;
      case kFenceClusterThenRelaxed:
        asm volatile("fence.acq_rel.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::
                         : "memory");
        break;
      case kCtaOnly: __syncthreads(); break;
      default: __threadfence(); __syncthreads(); break;
    }
    int v = 0;
    if (kind <= kFenceClusterThenRelaxed)
      asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(remote) : "memory");
    else
      v = slot[(threadIdx.x + 1) % 128];
    acc += v & 1;
    // The slot is written again next iteration: every peer's read of it must be done.
    if (kind <= kFenceClusterThenRelaxed)
      asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
    else
      __syncthreads();
  }
  const uint64_t t1 = now_ns();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[0] = (t1 - t0) / iterations + (acc == -1 ? 1 : 0);
    out[1] = t0;
    out[2] = t1;
  }
}

// Writes `bytes` of a scratch buffer: the L2 holds nothing of the probes afterwards.
__global__ void flush_l2(int4* scratch, size_t n16) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += gridDim.x * blockDim.x)
    scratch[i] = make_int4(static_cast<int>(i), 0, 0, 0);
}

struct Stream {
  int4* data = nullptr;
  size_t bytes = 0;
  int ctas = 0;
  unsigned long long* span = nullptr;
  int* sink = nullptr;
};

int main() {
  int device = 0, sms = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  cudaStream_t s_stream, s_probe;
  CHECK(cudaStreamCreateWithFlags(&s_stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s_probe, cudaStreamNonBlocking));

  // The stream keeps 8 SMs free for the probes (one CTA an SM: its shared memory leaves room for a
  // probe's CTA but not for a second stream CTA), or runs on every SM.
  Stream st;
  st.bytes = size_t{2} << 30;
  st.ctas = sms - 8;
  CHECK(cudaMalloc(&st.data, st.bytes));
  CHECK(cudaMemset(st.data, 1, st.bytes));
  CHECK(cudaMalloc(&st.span, 2 * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&st.sink, sizeof(int)));
  const int stream_smem = 160 * 1024;
  CHECK(cudaFuncSetAttribute(stream_read, cudaFuncAttributeMaxDynamicSharedMemorySize, stream_smem));

  // Chains: a random cycle over line-spaced slots (128 bytes apart) of a 16 MB buffer after an L2
  // flush (DRAM; few pages, so that TLB misses stay out of it) or of a 1 MB one read once right
  // before the chase (L2).
  auto make_chain = [](size_t buffer_bytes, uint32_t seed) {
    const size_t slots = buffer_bytes / 128;
    std::vector<uint32_t> order(slots);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin() + 1, order.end(), std::mt19937(seed));
    std::vector<uint32_t> next(buffer_bytes / 4, 0);
    for (size_t k = 0; k < slots; ++k) next[size_t{order[k]} * 32] = order[(k + 1) % slots] * 32;
    uint32_t* d = nullptr;
    CHECK(cudaMalloc(&d, buffer_bytes));
    CHECK(cudaMemcpy(d, next.data(), buffer_bytes, cudaMemcpyHostToDevice));
    return d;
  };
  uint32_t* dram_chain = make_chain(size_t{16} << 20, 1);
  uint32_t* l2_chain = make_chain(size_t{1} << 20, 2);
  int4* scratch = nullptr;
  const size_t scratch_bytes = size_t{256} << 20;
  CHECK(cudaMalloc(&scratch, scratch_bytes));
  unsigned long long* out = nullptr;
  CHECK(cudaMalloc(&out, 3 * sizeof(unsigned long long)));

  auto start_stream = [&](bool evict_first) {
    const unsigned long long init[2] = {~0ull, 0ull};
    CHECK(cudaMemcpyAsync(st.span, init, sizeof(init), cudaMemcpyHostToDevice, s_stream));
    CHECK(cudaStreamSynchronize(s_stream));
    stream_read<<<st.ctas, 512, stream_smem, s_stream>>>(st.data, st.bytes / 16, 3, evict_first, st.span, st.sink);
    CHECK(cudaGetLastError());
  };
  auto stream_span = [&](double& gbs, unsigned long long& t0, unsigned long long& t1) {
    CHECK(cudaStreamSynchronize(s_stream));
    unsigned long long span[2];
    CHECK(cudaMemcpy(span, st.span, sizeof(span), cudaMemcpyDeviceToHost));
    t0 = span[0], t1 = span[1];
    gbs = 3.0 * static_cast<double>(st.bytes) / static_cast<double>(t1 - t0);
  };
  auto read_out = [&](unsigned long long (&h)[3]) {
    CHECK(cudaStreamSynchronize(s_probe));
    CHECK(cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost));
  };

  // The window covers the L2 chain; the persisting set-aside is 4 MB.
  CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, size_t{4} << 20));
  auto set_persisting = [&](bool on) {
    cudaStreamAttrValue attr = {};
    attr.accessPolicyWindow.base_ptr = l2_chain;
    attr.accessPolicyWindow.num_bytes = on ? size_t{1} << 20 : 0;
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    CHECK(cudaStreamSetAttribute(s_probe, cudaStreamAttributeAccessPolicyWindow, &attr));
    if (!on) CHECK(cudaCtxResetPersistingL2Cache());
  };
  // One row: the probe's time (out[0] / divisor), and with a stream its read rate and whether the
  // probe ran inside it.
  auto report = [&](const char* name, bool streamed, int divisor) {
    unsigned long long h[3];
    read_out(h);
    double gbs = 0;
    bool overlap = false;
    if (streamed) {
      unsigned long long t0 = 0, t1 = 0;
      stream_span(gbs, t0, t1);
      overlap = h[1] >= t0 && h[2] <= t1;
    }
    std::printf("%-62s %10.1f %12.0f %10s\n", name, static_cast<double>(h[0]) / divisor, gbs,
                !streamed ? "-" : overlap ? "yes" : "NO");
  };
  const int hops = 256;
  std::printf("%-62s %10s %12s %10s\n", "case", "ns", "stream GB/s", "overlap");
  for (int rep = 0; rep < 3; ++rep) {
    // 0 idle, 1 stream plain, 2 stream evict-first, 3 stream plain with the L2 chain's lines
    // persisting (an access policy window on the probe's launches; L2 chase only), 4 stream
    // evict-first on every SM, so that the probe shares its SM with a streaming CTA (chases only)
    for (int mode = 0; mode < 5; ++mode) {
      const char* mode_name = mode == 0   ? "idle"
                              : mode == 1 ? "stream"
                              : mode == 2 ? "stream evict-first"
                              : mode == 3 ? "stream, chain persisting"
                                          : "stream on its SM too";
      set_persisting(mode == 3);
      st.ctas = mode == 4 ? sms : sms - 8;
      for (int kind = 0; kind < 4; ++kind) {  // 0 DRAM chase, 1 L2 chase, 2 code cold, 3 code warm
        if (mode == 3 && kind != 1) continue;
        if (mode == 4 && kind > 1) continue;
        flush_l2<<<sms * 4, 256, 0, s_probe>>>(scratch, scratch_bytes / 16);
        if (kind == 1) chase<<<1, 32, 0, s_probe>>>(l2_chain, static_cast<int>((size_t{1} << 20) / 128), nullptr, out);
        if (kind == 3) code_pass<<<1, 32, 0, s_probe>>>(7, nullptr, out);
        CHECK(cudaStreamSynchronize(s_probe));
        const unsigned long long* started = mode > 0 ? st.span : nullptr;
        if (mode > 0) start_stream(mode == 2 || mode == 4);
        if (kind <= 1)
          chase<<<1, 32, 0, s_probe>>>(kind == 0 ? dram_chain : l2_chain, hops, started, out);
        else
          code_pass<<<1, 32, 0, s_probe>>>(11, started, out);
        CHECK(cudaGetLastError());
        const char* kind_name = kind == 0   ? "chase, DRAM lines (ns a load)"
                                : kind == 1 ? "chase, L2 lines (ns a load)"
                                : kind == 2 ? "code, after an L2 flush (ns a pass)"
                                            : "code, run just before (ns a pass)";
        char name[96];
        std::snprintf(name, sizeof(name), "%s, %s", mode_name, kind_name);
        report(name, mode > 0, kind <= 1 ? hops : 1);
      }
    }
  }
  std::printf("(code pass: 4096 dependent mad.lo.u32, ~64 KB of code; its time idle and warm is its arithmetic)\n");

  // Barriers: one cluster of 8 CTAs (or 8 lone CTAs for the CTA-only kinds), 512 iterations, idle
  // and with the stream on every SM but 8 (the cluster's CTAs fit beside the stream's).
  const char* kind_names[kBarrierKinds] = {"cluster barrier, releasing arrive", "cluster barrier, relaxed arrive",
                                           "fence.acq_rel.cluster + relaxed barrier", "__syncthreads only",
                                           "__threadfence + __syncthreads", "st.async + mbarrier, relaxed barrier"};
  int* store_scratch = nullptr;
  CHECK(cudaMalloc(&store_scratch, 4096 * sizeof(int)));
  std::printf("\n%-62s %10s %12s %10s\n", "barrier case (ns an iteration)", "ns", "stream GB/s", "overlap");
  st.ctas = sms - 8;
  for (int rep = 0; rep < 3; ++rep) {
    for (int mode = 0; mode < 2; ++mode) {
      for (int store = 0; store < 2; ++store) {
        for (int kind = 0; kind < kBarrierKinds; ++kind) {
          const unsigned long long* started = mode > 0 ? st.span : nullptr;
          if (mode > 0) start_stream(true);
          cudaLaunchConfig_t config{};
          config.gridDim = dim3(8);
          config.blockDim = dim3(128);
          config.stream = s_probe;
          cudaLaunchAttribute attr{};
          attr.id = cudaLaunchAttributeClusterDimension;
          attr.val.clusterDim.x = kind <= kFenceClusterThenRelaxed || kind == kStAsync ? 8 : 1;
          attr.val.clusterDim.y = 1;
          attr.val.clusterDim.z = 1;
          config.attrs = &attr;
          config.numAttrs = 1;
          CHECK(cudaLaunchKernelEx(&config, barrier_cost, kind, 512, store == 1, store_scratch, started, out));
          char name[128];
          std::snprintf(name, sizeof(name), "%s, %s%s", mode == 0 ? "idle" : "stream", kind_names[kind],
                        store ? ", a global store before" : "");
          report(name, mode > 0, 1);
        }
      }
    }
  }
  return 0;
}
