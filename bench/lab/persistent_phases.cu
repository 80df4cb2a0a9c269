// Probe: what a kernel boundary costs in the one-token decode step, and whether a persistent kernel
// with grid-wide barriers between its phases removes it. The phases are the 8B layer's four
// projections at one token (qkv 6144x4096, o 4096x4096, gate_up 28672x4096, down 4096x14336,
// bf16 weights, 436 MB per layer), chained so each phase reads the previous one's output, for 8
// layers. Every variant runs the same GEMV code (a warp takes (row, 1024-column chunk) units, two
// at a time, 128 bytes in flight per lane, fp32 atomics into the phase's output: a lab, not
// deterministic), and differs only in what happens at a phase boundary:
//   persistent, pre-issued: one cooperative launch; a warp issues the next phase's first weight
//     loads, then its CTA waits at the grid barrier, then stages the new input in shared memory;
//   persistent, drained: the same, but the next phase's loads are issued after the barrier;
//   kernels + PDL: one launch per phase in a CUDA graph, with programmatic dependent launch: a
//     kernel issues its first weight loads before griddepcontrol.wait (the engine's arrangement,
//     but here a CTA fills its SM's registers, so the next kernel's CTAs start only as this one's
//     exit; the engine's own chain is SkinnyGemmTiming.Llama8BLayerChain);
//   barrier only: the persistent kernel with phases of no work, for the barrier's own cost.
// Checked against a naive GEMV chain (one warp per row) on the first layer.
// Build: nvcc -O3 -arch=sm_90a -std=c++17 -o persistent_phases bench/lab/persistent_phases.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lab_check.h"

constexpr int kWarps = 16;             // per CTA
constexpr int kThreads = kWarps * 32;  // 512
constexpr int kChunk = 1024;           // columns per unit: 32 lanes x 4 loads x 8 bf16
constexpr int kLoads = kChunk / 256;   // 16-byte loads per lane per unit
constexpr int kBatch = 2;              // units in flight per warp
constexpr int kMaxK = 14336;

struct Phase {
  const uint4* w;    // [rows][k] bf16, row-major
  const float* x;    // [k] input (the previous phase's output)
  float* y;          // [rows] output, zero before the phase
  float* zero_next;  // the next phase's output, zeroed during this one (may be null)
  int rows, k, zero_n;
};

__device__ __forceinline__ uint4 load_weights(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ float dot8(const uint4& w, const float* x) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    s += f.x * x[2 * i] + f.y * x[2 * i + 1];
  }
  return s;
}

// A warp's units of a phase: gw, gw + TW, ...; unit u is row u / chunks, chunk u % chunks.
struct WarpWork {
  const Phase* ph;
  int gw, tw, chunks, units;
  __device__ int batches() const {
    const int mine = gw < units ? (units - gw + tw - 1) / tw : 0;
    return (mine + kBatch - 1) / kBatch;
  }
  __device__ bool unit_of(int batch, int j, int& row, int& col0) const {
    const int u = gw + (batch * kBatch + j) * tw;
    if (u >= units) return false;
    row = u / chunks;
    col0 = (u % chunks) * kChunk;
    return true;
  }
  __device__ void issue(int batch, uint4 (&w)[kBatch][kLoads], int lane) const {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      int row, col0;
      if (!unit_of(batch, j, row, col0)) continue;
      const uint4* base = ph->w + (static_cast<int64_t>(row) * ph->k + col0) / 8;
#pragma unroll
      for (int l = 0; l < kLoads; ++l)
        if (col0 + (l * 32 + lane) * 8 < ph->k) w[j][l] = load_weights(base + l * 32 + lane);
    }
  }
  __device__ void consume(int batch, const uint4 (&w)[kBatch][kLoads], const float* xs, int lane) const {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      int row, col0;
      if (!unit_of(batch, j, row, col0)) continue;
      float s = 0.0f;
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        const int c = col0 + (l * 32 + lane) * 8;
        if (c < ph->k) s += dot8(w[j][l], xs + c);
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0) atomicAdd(ph->y + row, s);
    }
  }
};

__device__ __forceinline__ void grid_barrier(unsigned* counter, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
    unsigned seen = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

__device__ void stage_input(float* xs, const Phase& ph) {
  for (int i = threadIdx.x * 4; i < ph.k; i += kThreads * 4)
    *reinterpret_cast<float4*>(xs + i) = __ldcg(reinterpret_cast<const float4*>(ph.x + i));
  __syncthreads();
}

__device__ void zero_next(const Phase& ph) {
  if (ph.zero_next == nullptr) return;
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < ph.zero_n; i += gridDim.x * kThreads) ph.zero_next[i] = 0.0f;
}

// mode 0: the next phase's first loads issued before the barrier; 1: after it.
__global__ void __launch_bounds__(kThreads) persistent_chain(const Phase* phases, int n_phases, unsigned* counter,
                                                             int mode) {
  extern __shared__ float xs[];
  const int lane = threadIdx.x % 32;
  const int gw = blockIdx.x * kWarps + threadIdx.x / 32, tw = gridDim.x * kWarps;
  uint4 cur[kBatch][kLoads], nxt[kBatch][kLoads];
  auto work_of = [&](int p) {
    const Phase* ph = phases + p;
    const int chunks = (ph->k + kChunk - 1) / kChunk;
    return WarpWork{ph, gw, tw, chunks, ph->rows * chunks};
  };
  WarpWork work = work_of(0);
  stage_input(xs, phases[0]);
  if (work.batches() > 0) work.issue(0, cur, lane);
  for (int p = 0; p < n_phases; ++p) {
    zero_next(phases[p]);
    const int nb = work.batches();
    bool carried = false;  // the next phase's first batch is in flight
    for (int b = 0; b < nb; ++b) {
      if (b + 1 < nb) {
        work.issue(b + 1, nxt, lane);
      } else if (mode == 0 && p + 1 < n_phases) {
        const WarpWork next = work_of(p + 1);
        if (next.batches() > 0) {
          next.issue(0, nxt, lane);
          carried = true;
        }
      }
      work.consume(b, cur, xs, lane);
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
#pragma unroll
        for (int l = 0; l < kLoads; ++l) cur[j][l] = nxt[j][l];
    }
    if (p + 1 == n_phases) break;
    grid_barrier(counter, static_cast<unsigned>(p + 1) * gridDim.x);
    work = work_of(p + 1);
    if (!carried && work.batches() > 0) work.issue(0, cur, lane);
    stage_input(xs, phases[p + 1]);
  }
}

// One phase per launch, with programmatic dependent launch: the first loads before the wait.
__global__ void __launch_bounds__(kThreads) phase_kernel(const Phase* phases, int p) {
  extern __shared__ float xs[];
  const int lane = threadIdx.x % 32;
  const int gw = blockIdx.x * kWarps + threadIdx.x / 32, tw = gridDim.x * kWarps;
  const Phase* ph = phases + p;
  const int chunks = (ph->k + kChunk - 1) / kChunk;
  const WarpWork work{ph, gw, tw, chunks, ph->rows * chunks};
  uint4 cur[kBatch][kLoads], nxt[kBatch][kLoads];
  const int nb = work.batches();
  if (nb > 0) work.issue(0, cur, lane);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  zero_next(*ph);
  stage_input(xs, *ph);
  for (int b = 0; b < nb; ++b) {
    if (b + 1 < nb) work.issue(b + 1, nxt, lane);
    if (b + 1 >= nb - 1) asm volatile("griddepcontrol.launch_dependents;");
    work.consume(b, cur, xs, lane);
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
#pragma unroll
      for (int l = 0; l < kLoads; ++l) cur[j][l] = nxt[j][l];
  }
}

// Reference: one warp per row, fp32.
__global__ void naive_gemv(const uint4* w, const float* x, float* y, int rows, int k) {
  const int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  float s = 0.0f;
  for (int c = lane * 8; c < k; c += 256) s += dot8(w[(static_cast<int64_t>(row) * k + c) / 8], x + c);
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) y[row] = s;
}

__global__ void fill_weights(__nv_bfloat16* w, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 32768.0f - 1.0f) * scale);
  }
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int smem = kMaxK * 4;
  CHECK(cudaFuncSetAttribute(persistent_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK(cudaFuncSetAttribute(phase_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_chain, kThreads, smem));
  const int grid = sms * std::min(per_sm, 2);
  std::printf("%d SMs, %d CTAs of %d threads (%d per SM fit), %d KB shared each\n", sms, grid, kThreads, per_sm,
              smem / 1024);

  // One weight set per projection, shared by the layers (each is far larger than L2 but o's 33.5 MB;
  // between two uses of a matrix the other three stream 400 MB, so nothing stays cached).
  const int shapes[4][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
  const char* names[4] = {"qkv", "o", "gate_up", "down"};
  std::vector<__nv_bfloat16*> w(4);
  double layer_bytes = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t n = static_cast<size_t>(shapes[i][0]) * shapes[i][1];
    CHECK(cudaMalloc(&w[i], n * 2));
    fill_weights<<<1024, 256>>>(w[i], n, 0x9e3779b9u * (i + 1), std::sqrt(3.0f / shapes[i][1]));
    layer_bytes += n * 2.0;
  }
  constexpr int kLayers = 8;
  const int n_phases = kLayers * 4;
  // Outputs: one buffer per phase (the next phase reads it; its first k elements are the input).
  std::vector<float*> y(n_phases + 1);
  for (auto& p : y) CHECK(cudaMalloc(&p, 28672 * 4));
  std::vector<float> x0(kMaxK);
  for (int i = 0; i < kMaxK; ++i) x0[i] = std::sin(0.37f * i);
  CHECK(cudaMemcpy(y[0], x0.data(), kMaxK * 4, cudaMemcpyHostToDevice));
  std::vector<Phase> host(n_phases), empty(n_phases);
  for (int p = 0; p < n_phases; ++p) {
    const int i = p % 4;
    host[p] = Phase{reinterpret_cast<const uint4*>(w[i]), y[p], y[p + 1], p + 1 < n_phases ? y[p + 2] : nullptr,
                    shapes[i][0], shapes[i][1], p + 1 < n_phases ? shapes[(p + 1) % 4][0] : 0};
    empty[p] = host[p];
    empty[p].rows = 0;
    empty[p].zero_next = nullptr;
  }
  Phase *d_phases, *d_empty;
  unsigned* counter;
  CHECK(cudaMalloc(&d_phases, n_phases * sizeof(Phase)));
  CHECK(cudaMalloc(&d_empty, n_phases * sizeof(Phase)));
  CHECK(cudaMalloc(&counter, 4));
  CHECK(cudaMemcpy(d_phases, host.data(), n_phases * sizeof(Phase), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_empty, empty.data(), n_phases * sizeof(Phase), cudaMemcpyHostToDevice));

  auto run_persistent = [&](const Phase* phases, int mode) {
    CHECK(cudaMemsetAsync(counter, 0, 4));
    CHECK(cudaMemsetAsync(y[1], 0, 28672 * 4));
    int n = n_phases;
    void* args[] = {&phases, &n, &counter, &mode};
    CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(persistent_chain), dim3(grid), dim3(kThreads), args, smem,
                                      0));
  };
  // The per-phase kernels, captured once into a graph.
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CHECK(cudaMemsetAsync(y[1], 0, 28672 * 4, stream));
  for (int p = 0; p < n_phases; ++p) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = p > 0 ? 1 : 0;
    CHECK(cudaLaunchKernelEx(&cfg, phase_kernel, static_cast<const Phase*>(d_phases), p));
  }
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  auto run_kernels = [&] { CHECK(cudaGraphLaunch(exec, stream)); };

  // Check: every variant against the naive chain on the first layer (atomics: fp32 order differs).
  std::vector<float*> ref(5);
  for (auto& p : ref) CHECK(cudaMalloc(&p, 28672 * 4));
  CHECK(cudaMemcpy(ref[0], x0.data(), kMaxK * 4, cudaMemcpyHostToDevice));
  for (int p = 0; p < 4; ++p)
    naive_gemv<<<(shapes[p][0] + 7) / 8, 256>>>(reinterpret_cast<const uint4*>(w[p]), ref[p], ref[p + 1], shapes[p][0],
                                                 shapes[p][1]);
  CHECK(cudaDeviceSynchronize());
  auto compare = [&](const char* name) {
    double worst = 0;
    for (int p = 0; p < 4; ++p) {
      std::vector<float> a(shapes[p][0]), b(shapes[p][0]);
      CHECK(cudaMemcpy(a.data(), y[p + 1], a.size() * 4, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(b.data(), ref[p + 1], b.size() * 4, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
      worst = std::max(worst, std::sqrt(num / std::max(den, 1e-30)));
    }
    std::printf("check %-22s relative L2 error of the first layer's outputs: %.2e (%s)\n", name, worst,
                worst < 1e-4 ? "ok" : "WRONG");
  };
  run_persistent(d_phases, 0);
  CHECK(cudaDeviceSynchronize());
  compare("persistent, pre-issued");
  run_persistent(d_phases, 1);
  CHECK(cudaDeviceSynchronize());
  compare("persistent, drained");
  run_kernels();
  CHECK(cudaStreamSynchronize(stream));
  compare("kernels + PDL");

  auto time_us = [&](auto f, cudaStream_t s) { return lab_time(f, s, 22, 2).median_us; };
  const double floor_us = layer_bytes / 4.2e12 * 1e6;
  std::printf("8B layer at one token: %.0f MB of weights, %.1f us at 4.2 TB/s; %d layers per run, median of 20\n",
              layer_bytes / 1e6, floor_us, kLayers);
  for (int pass = 0; pass < 2; ++pass) {
    const double pre = time_us([&] { run_persistent(d_phases, 0); }, 0) / kLayers;
    const double drained = time_us([&] { run_persistent(d_phases, 1); }, 0) / kLayers;
    const double kernels = time_us(run_kernels, stream) / kLayers;
    const double barriers = time_us([&] { run_persistent(d_empty, 0); }, 0) / (n_phases - 1);
    std::printf("us per layer: persistent pre-issued %.1f (%.2f TB/s)  persistent drained %.1f  kernels+PDL %.1f "
                "(%.2f TB/s)  | one grid barrier %.2f us\n",
                pre, layer_bytes / pre / 1e6, drained, kernels, layer_bytes / kernels / 1e6, barriers);
  }
  // Each projection alone, as one-phase persistent launches: its own ramp and tail included.
  for (int i = 0; i < 4; ++i) {
    const Phase* one = d_phases + i;
    const double us = time_us(
        [&] {
          CHECK(cudaMemsetAsync(counter, 0, 4));
          int n = 1, mode = 0;
          void* args[] = {&one, &n, &counter, &mode};
          CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(persistent_chain), dim3(grid), dim3(kThreads), args,
                                            smem, 0));
        },
        0);
    const double bytes = static_cast<double>(shapes[i][0]) * shapes[i][1] * 2;
    std::printf("  %-8s alone: %.1f us (%.2f TB/s, floor %.1f us)\n", names[i], us, bytes / us / 1e6, bytes / 4.2e6);
  }
  CHECK(cudaDeviceSynchronize());
  return 0;
}
