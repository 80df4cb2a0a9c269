// Probe: a resident decode step whose weight stream does not stop at a hand-off.
//
// The engine's one-token step runs five launches a layer; at each boundary the consumer needs all of
// its producer's output, and the hand-off (producer's end -> consumer's first dependent stage) takes
// ~2 us in which DRAM streams only what the successor's resident CTAs had room to ask for. Here one
// CTA per SM stays for the whole step and takes tile tasks in a fixed order (QKV tiles, attention
// head groups, O tiles, gate/up tiles, down tiles per layer, then the LM head). A producer warp
// streams each task's weights (and attention's K/V) into a shared-memory ring with bulk copies,
// from the first task to the last, waiting only for a free slot: weights depend on nothing, so it
// runs ahead across operations while the consumers wait for the counters of what they read. A
// task counts itself done on its operation's counter once its outputs are written.
//
// Arms (same code, same tasks, same bits):
//   resident, lead      the producer runs ahead across operations (the design);
//   resident, no lead   the producer waits for a task's inputs before streaming its weights (what a
//                       counter hand-off gives without lead);
//   launches + PDL      one launch per operation in a CUDA graph, the producer streaming before
//                       griddepcontrol.wait (the engine's arrangement, with this probe's kernels).
// Ring depth is swept: the lead is bounded by the ring (one 16 KB stage ~0.5 us of an SM's share of
// the stream).
//
// The math is a CUDA-core GEMV per weight tile (one token, fp32 accumulation), the attention a real
// one-token GQA attention over a 512-token cache (four query heads per K/V head, one task per K/V
// head); norms are real RMSNorms staged by each CTA, SwiGLU is applied where down stages its input,
// and the residual adds are in the O and down epilogues. Not the engine's rounding classes and not
// batch-invariant beyond one token: a probe of the schedule, checked against a naive chain of the
// same operations.
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o resident_stream bench/lab/resident_stream.cu
// Run:   resident_stream [1b|8b|both]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../src/kernels/cuda/async_copy.cuh"
#include "lab_check.h"

constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * 32;  // 256
constexpr int kThreads = kConsumers + 32;        // and one producer warp
constexpr int kStageBytes = 16384;
constexpr int kStageElems = kStageBytes / 2;  // bf16
constexpr int kPiece = 1024;                  // weight elements a warp takes from a stage
constexpr int kMaxStages = 16;
constexpr int kMaxPartials = 64;  // pieces of one tile
constexpr int kScratchFloats = 32 + 256;
constexpr int kNormLoads = 4;  // norm weights a thread loads before the wait, in float4s: k up to 4,096
constexpr int kSignalSlots = 4;  // tasks the consumers may finish before the signaller counts them
// A traced run's record per task: the consumers' start, input ready, outputs written (ns), warp 0's
// cycles waiting for stages; the producer's first issue (ns) and cycles waiting for free slots.
constexpr int kTraceFields = 6;  // tasks the consumers may finish before the signaller counts them
constexpr int kCtx = 512;         // cached tokens attention reads
constexpr int kQPerKv = 4;        // query heads per K/V head (both shapes)

enum InputKind { kNormIn, kPlainIn, kSwigluIn, kAttnMergeIn };
enum Mode { kLead = 0, kNoLead = 1, kPdl = 2, kStreamOnly = 3 };
// Or'ed into a mode (measurement only, wrong results): the GEMV tasks take and hand back their
// stages but multiply nothing, so the schedule's own bound shows (waits, staging, hand-offs).
constexpr int kLight = 16;

struct Op {
  const __nv_bfloat16* w;  // GEMV: tile t is rows [t*tile_rows, ...) row-major; attention: see below
  const float* in;         // the input vector (a previous operation's output)
  const float* norm;       // RMSNorm weights (kNormIn)
  const float* residual;   // added to the outputs, or null
  float* out;
  int rows, k, tile_rows, tiles;  // attention: rows = cached tokens, k = head dim, tiles = K/V heads x splits
  int input;                      // InputKind
  int attention;                  // 1: a GQA attention task per (K/V head, split of kSplitTokens)
  int dep;                        // the operation whose outputs this one reads, -1: none
  unsigned dep_tiles;             // its task count
  int head_dim, splits;           // attention, and the O projection's merge (kAttnMergeIn)
  int pad_;
};

// What a CTA's warps read for one task, flattened on the host so that a task's first use of its
// operation's fields is no dependent load (each L2 round trip costs ~1 us under the stream); the
// consumers and the producer each load the next task's while working on the current one.
struct alignas(16) TaskDesc {
  Op op;
  int index;  // the operation's counter
  int tile;
  int pad_[2];
};

// Attention's K/V: per (K/V head, split) one contiguous chunk, the split's K rows then its V rows.
constexpr int kSplitTokens = 128;  // cached tokens per attention task
constexpr int kMaxSplits = kCtx / kSplitTokens;
// An attention task's output: 4 heads' unnormalised sums, then their maxima and their sums of weights.
__host__ __device__ inline int attention_state_floats(int hd) { return kQPerKv * hd + 2 * kQPerKv; }

__host__ __device__ inline int64_t task_bytes(const Op& op) {
  return op.attention ? int64_t{2} * kSplitTokens * op.k * 2 : int64_t{op.tile_rows} * op.k * 2;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The engine's mbarrier and bulk-copy primitives (mbar_*, bulk_copy_to_shared, l2_evict_first_policy).
using namespace fuselm;
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}
// The consumer warps only (the producer warp never joins).
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory"); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ TaskDesc load_desc(const TaskDesc* p) {
  TaskDesc d;
  const int4* src = reinterpret_cast<const int4*>(p);
  int4* dst = reinterpret_cast<int4*>(&d);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(TaskDesc) / 16); ++i) dst[i] = __ldg(src + i);
  return d;
}

// Until the operation `op.dep` has every task of this run counted (counters are never reset: run
// `epoch` waits for epoch x tasks).
__device__ void wait_for(const Op& op, unsigned* done, unsigned epoch, int mode) {
  if (op.dep < 0) return;
  if (mode == kPdl) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
  } else if (threadIdx.x == 0) {
    const unsigned target = epoch * op.dep_tiles;
    while (load_acquire(done + op.dep) < target) {
    }
  }
  consumers_sync();
}

// x = the GEMV's input, staged once per operation a CTA has tasks of. Every loop issues kBatch
// independent 16-byte loads a thread before it uses one: under the stream an L2 round trip takes
// ~0.5-1 us, so a loop of dependent iterations would cost that per iteration.
constexpr int kBatch = 8;

template <typename F>
__device__ __forceinline__ void for_float4s(const float* src, int n, F&& use) {  // n a multiple of 4
  const int n4 = n / 4;
  for (int base = threadIdx.x; base < n4; base += kConsumers * kBatch) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kConsumers;
      if (i < n4) v[u] = __ldcg(reinterpret_cast<const float4*>(src) + i);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kConsumers;
      if (i < n4) use(i * 4, v[u]);
    }
  }
}

// Where input element i sits in x: in each 256-element block, the first halves of the lanes' 8
// elements, then the second halves, so that the GEMV's two 16-byte loads a lane are conflict-free
// (a lane's 8 consecutive floats would put lanes 0 and 4 on the same banks).
__device__ __forceinline__ int xpos(int i) {
  const int within = i % 256, e = within % 8;
  return i - within + (e >= 4 ? 128 : 0) + (within / 8) * 4 + e % 4;
}

// The norm weights a thread applies in stage_input, loaded before the wait (they depend on nothing).
struct NormWeights {
  float4 g[kNormLoads];
};
__device__ __forceinline__ NormWeights load_norm(const Op& op) {
  NormWeights n{};
  if (op.input != kNormIn) return n;
#pragma unroll
  for (int u = 0; u < kNormLoads; ++u) {
    const int i = threadIdx.x * 4 + u * kConsumers * 4;
    if (i < op.k) n.g[u] = __ldg(reinterpret_cast<const float4*>(op.norm + i));
  }
  return n;
}

__device__ void stage_input(const Op& op, float* x, float* scratch, const NormWeights& norm) {
  const int t = threadIdx.x;
  if (op.input == kSwigluIn) {  // gate and up rows interleaved: in[2i], in[2i + 1]
    for_float4s(op.in, 2 * op.k, [&](int i, float4 v) {
      *reinterpret_cast<float2*>(x + xpos(i / 2)) =
          make_float2(v.x / (1.0f + __expf(-v.x)) * v.y, v.z / (1.0f + __expf(-v.z)) * v.w);
    });
  } else if (op.input == kPlainIn) {
    for_float4s(op.in, op.k, [&](int i, float4 v) { *reinterpret_cast<float4*>(x + xpos(i)) = v; });
  } else if (op.input == kAttnMergeIn) {
    // Attention's split states merged per query head in split order (x[head * hd + d]): first each
    // head's split weights exp(m_s - M) / sum_s exp(m_s - M) l_s, then the weighted sums.
    const int hd = op.head_dim, state = attention_state_floats(hd), heads = op.k / hd;
    float* weight = scratch + 32;  // [heads][splits]
    for (int qhead = t; qhead < heads; qhead += kConsumers) {
      const float* base = op.in + static_cast<int64_t>(qhead / kQPerKv) * op.splits * state + kQPerKv * hd;
      const int qh = qhead % kQPerKv;
      float m[kMaxSplits], l[kMaxSplits], top = -INFINITY, den = 0.0f;
#pragma unroll
      for (int sp = 0; sp < kMaxSplits; ++sp) {
        m[sp] = sp < op.splits ? __ldcg(base + sp * state + qh) : -INFINITY;
        l[sp] = sp < op.splits ? __ldcg(base + sp * state + kQPerKv + qh) : 0.0f;
      }
#pragma unroll
      for (int sp = 0; sp < kMaxSplits; ++sp) top = fmaxf(top, m[sp]);
#pragma unroll
      for (int sp = 0; sp < kMaxSplits; ++sp) den += sp < op.splits ? __expf(m[sp] - top) * l[sp] : 0.0f;
#pragma unroll
      for (int sp = 0; sp < kMaxSplits; ++sp)
        if (sp < op.splits) weight[qhead * op.splits + sp] = __expf(m[sp] - top) / den;
    }
    consumers_sync();
    for (int i = t; i < op.k; i += kConsumers) {
      const int qhead = i / hd, qh = qhead % kQPerKv, d = i % hd;
      const float* base = op.in + static_cast<int64_t>(qhead / kQPerKv) * op.splits * state + qh * hd + d;
      float v[kMaxSplits];
#pragma unroll
      for (int sp = 0; sp < kMaxSplits; ++sp) v[sp] = sp < op.splits ? __ldcg(base + sp * state) : 0.0f;
      float sum = 0.0f;
#pragma unroll
      for (int sp = 0; sp < kMaxSplits; ++sp)
        if (sp < op.splits) sum += weight[qhead * op.splits + sp] * v[sp];
      x[xpos(i)] = sum;
    }
  } else {
    float ss = 0.0f;
    for_float4s(op.in, op.k, [&](int i, float4 v) {
      *reinterpret_cast<float4*>(x + xpos(i)) = v;
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    });
    ss = warp_sum(ss);
    if (t % 32 == 0) scratch[t / 32] = ss;
    consumers_sync();
    float total = 0.0f;
    for (int w = 0; w < kConsumerWarps; ++w) total += scratch[w];
    const float rstd = rsqrtf(total / op.k + 1e-5f);
#pragma unroll
    for (int u = 0; u < kNormLoads; ++u) {
      const int i = t * 4 + u * kConsumers * 4;
      if (i >= op.k) break;
      const float4 g = norm.g[u];
      float4* xv = reinterpret_cast<float4*>(x + xpos(i));
      const float4 v = *xv;
      *xv = make_float4(v.x * rstd * g.x, v.y * rstd * g.y, v.z * rstd * g.z, v.w * rstd * g.w);
    }
  }
  consumers_sync();
}

struct Ring {
  char* stages;
  uint64_t* full;
  uint64_t* empty;
  int depth;
  bool traced;
  uint32_t it = 0;          // stages consumed so far
  long long waited = 0;     // cycles spent waiting for stages to land (traced runs)
  __device__ const char* acquire() {
    const int slot = it % depth;
    const long long t0 = traced ? clock64() : 0;
    mbar_wait(full + slot, (it / depth) & 1);
    if (traced) waited += clock64() - t0;
    return stages + static_cast<int64_t>(slot) * kStageBytes;
  }
  __device__ void release(int lane) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty + it % depth);
    ++it;
  }
};

__device__ __forceinline__ void gemv_task(const Op& op, int tile, Ring& ring, const float* x, float* partial,
                                          bool light) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k = op.k, stages = static_cast<int>(task_bytes(op) / kStageBytes);
  for (int s = 0; s < stages; ++s) {
    const uint4* w = reinterpret_cast<const uint4*>(ring.acquire()) + warp * (kPiece / 8);
    const int e0 = s * kStageElems + warp * kPiece;  // the piece's first element in the tile
    if (light) {
      const float first = __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(w + lane));
      ring.release(lane);
      if (lane == 0) partial[e0 / kPiece] = first * x[e0 % k];
      continue;
    }
    const float* xp = x + e0 % k;
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kPiece / 256; ++j) {
      const uint4 v = w[j * 32 + lane];
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
      const float4 x0 = *reinterpret_cast<const float4*>(xp + j * 256 + lane * 4);  // see xpos
      const float4 x1 = *reinterpret_cast<const float4*>(xp + j * 256 + 128 + lane * 4);
      const float2 f0 = __bfloat1622float2(h[0]), f1 = __bfloat1622float2(h[1]);
      const float2 f2 = __bfloat1622float2(h[2]), f3 = __bfloat1622float2(h[3]);
      acc += f0.x * x0.x + f0.y * x0.y + f1.x * x0.z + f1.y * x0.w;
      acc += f2.x * x1.x + f2.y * x1.y + f3.x * x1.z + f3.y * x1.w;
    }
    ring.release(lane);
    acc = warp_sum(acc);
    if (lane == 0) partial[e0 / kPiece] = acc;
  }
  consumers_sync();
  const int pieces_per_row = k / kPiece;
  for (int r = threadIdx.x; r < op.tile_rows; r += kConsumers) {
    float sum = 0.0f;
    for (int p = 0; p < pieces_per_row; ++p) sum += partial[r * pieces_per_row + p];
    const int row = tile * op.tile_rows + r;
    if (op.residual != nullptr) sum += __ldcg(op.residual + row);
    op.out[row] = sum;
  }
}

// One (K/V head, split) task: four query heads over kSplitTokens cached tokens (K stages, then V
// stages); writes the split's state for the O projection's merge.
__device__ __forceinline__ void attention_task(const Op& op, int tile, Ring& ring, float* x) {
  const int t = threadIdx.x, lane = t % 32;
  const int hd = op.k, head = tile / op.splits;
  float* q = x;                               // [4][hd]
  float* scores = x + kQPerKv * hd;           // [4][kSplitTokens]
  float* red = scores + kQPerKv * kSplitTokens;  // [groups][4][hd]
  float* stats = red + kQPerKv * 512;         // [4] maxima, [4] sums
  for (int i = t; i < kQPerKv * hd; i += kConsumers) q[i] = __ldcg(op.in + head * kQPerKv * hd + i);
  consumers_sync();
  const int tok_per_stage = kStageBytes / (hd * 2);
  const int threads_per_tok = kConsumers / tok_per_stage;  // 2 (hd 64) or 4 (hd 128): 32 dims each
  const int stages = kSplitTokens / tok_per_stage;
  const float scale = rsqrtf(static_cast<float>(hd));
  for (int s = 0; s < stages; ++s) {
    const __nv_bfloat16* kr = reinterpret_cast<const __nv_bfloat16*>(ring.acquire());
    const int tok = t / threads_per_tok, d0 = (t % threads_per_tok) * 32;
    const uint4* kp = reinterpret_cast<const uint4*>(kr + tok * hd + d0);
    float acc[kQPerKv] = {};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint4 v = kp[j];
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __bfloat1622float2(h[e]);
#pragma unroll
        for (int qh = 0; qh < kQPerKv; ++qh) {
          const float2 qv = *reinterpret_cast<const float2*>(q + qh * hd + d0 + j * 8 + 2 * e);
          acc[qh] += f.x * qv.x + f.y * qv.y;
        }
      }
    }
    ring.release(lane);
#pragma unroll
    for (int qh = 0; qh < kQPerKv; ++qh) {
      for (int o = 1; o < threads_per_tok; o <<= 1) acc[qh] += __shfl_xor_sync(0xffffffffu, acc[qh], o);
      if (t % threads_per_tok == 0) scores[qh * kSplitTokens + s * tok_per_stage + tok] = acc[qh] * scale;
    }
  }
  consumers_sync();
  const int warp = t / 32;
  if (warp < kQPerKv) {  // one query head per warp: the split's maximum and weights
    float* sc = scores + warp * kSplitTokens;
    float m = -INFINITY;
    for (int i = lane; i < kSplitTokens; i += 32) m = fmaxf(m, sc[i]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float l = 0.0f;
    for (int i = lane; i < kSplitTokens; i += 32) {
      const float p = __expf(sc[i] - m);
      sc[i] = p;
      l += p;
    }
    l = warp_sum(l);
    if (lane == 0) {
      stats[warp] = m;
      stats[kQPerKv + warp] = l;
    }
  }
  consumers_sync();
  const int pairs = hd / 2, groups = kConsumers / pairs, tok_per_group = tok_per_stage / groups;
  const int dp = t % pairs, grp = t / pairs;
  float acc[kQPerKv][2] = {};
  for (int s = 0; s < stages; ++s) {
    const __nv_bfloat16* vr = reinterpret_cast<const __nv_bfloat16*>(ring.acquire());
    for (int i = 0; i < tok_per_group; ++i) {
      const int tok = grp * tok_per_group + i;
      const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(vr + tok * hd + 2 * dp));
#pragma unroll
      for (int qh = 0; qh < kQPerKv; ++qh) {
        const float p = scores[qh * kSplitTokens + s * tok_per_stage + tok];
        acc[qh][0] += p * v.x;
        acc[qh][1] += p * v.y;
      }
    }
    ring.release(lane);
  }
#pragma unroll
  for (int qh = 0; qh < kQPerKv; ++qh) {
    red[(grp * kQPerKv + qh) * hd + 2 * dp] = acc[qh][0];
    red[(grp * kQPerKv + qh) * hd + 2 * dp + 1] = acc[qh][1];
  }
  consumers_sync();
  float* out = op.out + static_cast<int64_t>(tile) * attention_state_floats(hd);
  for (int i = t; i < kQPerKv * hd; i += kConsumers) {
    const int qh = i / hd, d = i % hd;
    float sum = 0.0f;
    for (int g = 0; g < groups; ++g) sum += red[(g * kQPerKv + qh) * hd + d];
    out[i] = sum;
  }
  if (t < 2 * kQPerKv) out[kQPerKv * hd + t] = stats[t];
}

// mode: kLead, kNoLead (one resident launch, counters between operations), kPdl (one launch per
// operation) or kStreamOnly (measurement only: no waits, no math, wrong results). op_end (optional): when each operation's last task was counted, op_end[-1] the start.
// kMinBlocks: CTAs an SM must hold (2 for the two-an-SM arm: registers capped to fit).
template <int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    resident_step(const TaskDesc* __restrict__ descs, const int* __restrict__ task_begin, unsigned* done,
                  unsigned epoch, int depth, int x_floats, int mode, unsigned long long* op_end,
                  unsigned long long* task_trace) {
  const bool light = (mode & kLight) != 0;
  mode &= ~kLight;
  extern __shared__ __align__(1024) char smem[];
  char* stages = smem;
  float* x = reinterpret_cast<float*>(smem + depth * kStageBytes);
  float* partials = x + x_floats;  // two tiles' (a fast warp starts the next tile's)
  float* scratch = partials + 2 * kMaxPartials;
  uint64_t* full = reinterpret_cast<uint64_t*>(scratch + kScratchFloats);
  uint64_t* empty = full + kMaxStages;
  uint64_t* task_written = empty + kMaxStages;        // all consumers' outputs of a task are written
  uint64_t* task_counted = task_written + kSignalSlots;  // the signaller has counted it
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < depth; ++i) {
      mbar_init(full + i, 1);
      mbar_init(empty + i, kConsumerWarps);
    }
    for (int i = 0; i < kSignalSlots; ++i) {
      mbar_init(task_written + i, kConsumers);
      mbar_init(task_counted + i, 1);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (mode == kPdl) asm volatile("griddepcontrol.launch_dependents;");
  if (op_end != nullptr && blockIdx.x == 0 && threadIdx.x == 0) op_end[-1] = global_ns();
  const int begin = task_begin[blockIdx.x], end = task_begin[blockIdx.x + 1];
  if (begin == end) return;

  if (warp == kConsumerWarps && lane == 1 && mode != kStreamOnly) {
    // The signaller: counts each task on its operation's counter once the consumers have written its
    // outputs, so that no consumer stalls on the release (a wait for its stores, ~1 us under load).
    // The consumers' arrivals release their stores to this thread (CTA scope); its release to the
    // GPU is cumulative over them.
    for (int i = begin; i < end; ++i) {
      const int n = i - begin, slot = n % kSignalSlots;
      const int index = __ldg(&descs[i].index);
      const unsigned tiles = static_cast<unsigned>(__ldg(&descs[i].op.tiles));
      mbar_wait(task_written + slot, (n / kSignalSlots) & 1);
      unsigned* counter = done + index;
      if (op_end == nullptr) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
      } else {
        unsigned before;
        asm volatile("atom.release.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(counter) : "memory");
        if (before + 1 == epoch * tiles) op_end[index] = global_ns();
      }
      mbar_arrive(task_counted + slot);
    }
    return;
  }
  if (warp == kConsumerWarps) {  // the producer: weights (and K/V) for every task, in task order
    if (lane != 0) return;
    const uint64_t policy = l2_evict_first_policy();
    uint32_t it = 0;
    TaskDesc next = load_desc(descs + begin);
    for (int i = begin; i < end; ++i) {
      const TaskDesc cur = next;
      if (i + 1 < end) next = load_desc(descs + i + 1);
      if (mode == kNoLead && cur.op.dep >= 0) {
        const unsigned target = epoch * cur.op.dep_tiles;
        while (load_acquire(done + cur.op.dep) < target) {
        }
      }
      const int64_t bytes = task_bytes(cur.op);
      const char* src = reinterpret_cast<const char*>(cur.op.w) + cur.tile * bytes;
      long long waited = 0;
      for (int64_t off = 0; off < bytes; off += kStageBytes, ++it) {
        const int slot = it % depth;
        const long long t0 = task_trace != nullptr ? clock64() : 0;
        mbar_wait(empty + slot, ((it / depth) & 1) ^ 1);
        if (task_trace != nullptr) {
          waited += clock64() - t0;
          if (off == 0) task_trace[i * kTraceFields + 4] = global_ns();
        }
        mbar_arrive_expect_tx(full + slot, kStageBytes);
        bulk_copy_to_shared(stages + static_cast<int64_t>(slot) * kStageBytes, src + off, kStageBytes, full + slot,
                            policy);
      }
      if (task_trace != nullptr) task_trace[i * kTraceFields + 5] = waited;
    }
    return;
  }

  Ring ring{stages, full, empty, depth, task_trace != nullptr};
  int staged = -1;  // the operation whose input is in x
  TaskDesc next = load_desc(descs + begin);
  for (int i = begin; i < end; ++i) {
    const TaskDesc cur = next;
    if (i + 1 < end) next = load_desc(descs + i + 1);
    unsigned long long* trace = task_trace != nullptr ? task_trace + i * kTraceFields : nullptr;
    if (trace != nullptr && threadIdx.x == 0) trace[0] = trace[1] = global_ns();
    ring.waited = 0;
    if (mode == kStreamOnly) {  // the stream's own rate: stages taken and handed back, nothing computed
      for (int64_t off = 0; off < task_bytes(cur.op); off += kStageBytes) {
        ring.acquire();
        ring.release(lane);
      }
      continue;
    }
    if (cur.op.attention) {
      wait_for(cur.op, done, epoch, mode);
      if (trace != nullptr && threadIdx.x == 0) trace[1] = global_ns();
      attention_task(cur.op, cur.tile, ring, x);
      staged = -1;
    } else {
      if (staged != cur.index) {
        const NormWeights norm = load_norm(cur.op);
        wait_for(cur.op, done, epoch, mode);
        stage_input(cur.op, x, scratch, norm);
        staged = cur.index;
        if (trace != nullptr && threadIdx.x == 0) trace[1] = global_ns();
      }
      gemv_task(cur.op, cur.tile, ring, x, partials + ((i - begin) & 1) * kMaxPartials, light);
    }
    // This thread's outputs of the task are written: hand the count to the signaller. (x is next
    // overwritten only after a wait that all consumers pass; partials alternate between tiles.)
    if (trace != nullptr && threadIdx.x == 0) {
      trace[2] = global_ns();
      trace[3] = ring.waited;
    }
    const int n = i - begin, slot = n % kSignalSlots;
    mbar_wait(task_counted + slot, ((n / kSignalSlots) & 1) ^ 1);
    mbar_arrive(task_written + slot);
  }
}
#else
template <int kMinBlocks>
__global__ void resident_step(const TaskDesc* __restrict__, const int* __restrict__, unsigned*, unsigned, int, int, int,
                              unsigned long long*, unsigned long long*) {}
#endif

// ---- the reference chain: one simple kernel per operation, fp32 ----

__global__ void ref_input(Op op, float* x) {  // one CTA
  __shared__ float red[32];
  __shared__ float rstd;
  const int t = threadIdx.x;
  if (op.input == kNormIn) {
    float ss = 0.0f;
    for (int i = t; i < op.k; i += blockDim.x) ss += op.in[i] * op.in[i];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (t % 32 == 0) red[t / 32] = ss;
    __syncthreads();
    if (t == 0) {
      float total = 0.0f;
      for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += red[w];
      rstd = rsqrtf(total / op.k + 1e-5f);
    }
    __syncthreads();
  }
  for (int i = t; i < op.k; i += blockDim.x) {  // (kAttnMergeIn: the reference's input is plain)
    if (op.input == kNormIn) {
      x[i] = op.in[i] * rstd * op.norm[i];
    } else if (op.input == kSwigluIn) {
      const float g = op.in[2 * i], u = op.in[2 * i + 1];
      x[i] = g / (1.0f + expf(-g)) * u;
    } else {
      x[i] = op.in[i];
    }
  }
}

__global__ void ref_gemv(Op op, const float* x) {  // a warp per row
  const int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= op.rows) return;
  float s = 0.0f;
  for (int c = lane; c < op.k; c += 32) s += __bfloat162float(op.w[static_cast<int64_t>(row) * op.k + c]) * x[c];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) op.out[row] = s + (op.residual ? op.residual[row] : 0.0f);
}

// A CTA per (K/V head, query head), a thread per dim; writes the normalised output (the O
// projection's plain input).
__global__ void ref_attention(Op op, float* out) {
  const int head = blockIdx.x / kQPerKv, qh = blockIdx.x % kQPerKv, hd = op.k, ctx = op.rows;
  auto k_at = [&](int tok, int d) {
    const int64_t chunk = static_cast<int64_t>(head) * op.splits + tok / kSplitTokens;
    return __bfloat162float(op.w[(chunk * 2 * kSplitTokens + tok % kSplitTokens) * hd + d]);
  };
  auto v_at = [&](int tok, int d) {
    const int64_t chunk = static_cast<int64_t>(head) * op.splits + tok / kSplitTokens;
    return __bfloat162float(op.w[(chunk * 2 * kSplitTokens + kSplitTokens + tok % kSplitTokens) * hd + d]);
  };
  const float* q = op.in + (head * kQPerKv + qh) * hd;
  __shared__ float p[kCtx];
  __shared__ float m, l;
  for (int tok = threadIdx.x; tok < ctx; tok += blockDim.x) {
    float s = 0.0f;
    for (int d = 0; d < hd; ++d) s += q[d] * k_at(tok, d);
    p[tok] = s * rsqrtf(static_cast<float>(hd));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    m = -INFINITY;
    for (int i = 0; i < ctx; ++i) m = fmaxf(m, p[i]);
    l = 0.0f;
    for (int i = 0; i < ctx; ++i) l += expf(p[i] - m);
  }
  __syncthreads();
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float o = 0.0f;
    for (int i = 0; i < ctx; ++i) o += expf(p[i] - m) * v_at(i, d);
    out[(head * kQPerKv + qh) * hd + d] = o / l;
  }
}

__global__ void fill(__nv_bfloat16* w, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32) * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 32768.0f - 1.0f) * scale);
  }
}

__global__ void clock_probe(unsigned long long* out) {
  const long long c0 = clock64();
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (clock64() - c0 < 20000000) {
  }
  unsigned long long t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  out[0] = clock64() - c0;
  out[1] = t1 - t0;
}

double sm_clock_ghz() {
  unsigned long long* d;
  CHECK(cudaMalloc(&d, 16));
  clock_probe<<<1, 1>>>(d);
  unsigned long long h[2];
  CHECK(cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d));
  return static_cast<double>(h[0]) / static_cast<double>(h[1]);
}

struct Shape {
  const char* name;
  int hidden, heads, kv_heads, head_dim, ffn, vocab, layers;
  // tile rows per operation: qkv, o, gate_up, down, lm head (each tile a whole number of stages)
  int tile_rows[5];
};

struct Model {
  std::vector<Op> ops;
  std::vector<void*> buffers;
  double bytes = 0;
  float* logits = nullptr;
  int logits_n = 0;
};

float* device_floats(Model& m, size_t n) {
  float* p;
  CHECK(cudaMalloc(&p, n * 4));
  CHECK(cudaMemset(p, 0, n * 4));
  m.buffers.push_back(p);
  return p;
}

__nv_bfloat16* device_weights(Model& m, size_t n, uint32_t seed, float scale) {
  __nv_bfloat16* p;
  CHECK(cudaMalloc(&p, n * 2));
  fill<<<2048, 256>>>(p, n, seed, scale);
  m.buffers.push_back(p);
  return p;
}

Model build(const Shape& s) {
  Model m;
  uint32_t seed = 1;
  const int qkv = (s.heads + 2 * s.kv_heads) * s.head_dim;
  auto norm_weights = [&](int n) {
    std::vector<float> h(n);
    for (int i = 0; i < n; ++i) h[i] = 1.0f + 0.1f * std::sin(0.1f * i + seed);
    float* p = device_floats(m, n);
    CHECK(cudaMemcpy(p, h.data(), n * 4, cudaMemcpyHostToDevice));
    ++seed;
    return p;
  };
  auto gemv = [&](int rows, int k, int tile_rows, int input, const float* in, const float* norm,
                  const float* residual, int dep) {
    Op op{};
    op.w = device_weights(m, static_cast<size_t>(rows) * k, 0x9e3779b9u * seed++, std::sqrt(3.0f / k));
    op.in = in;
    op.norm = norm;
    op.residual = residual;
    op.out = device_floats(m, rows);
    op.rows = rows;
    op.k = k;
    op.tile_rows = tile_rows;
    op.tiles = rows / tile_rows;
    op.input = input;
    op.dep = dep;
    if (rows % tile_rows != 0 || task_bytes(op) % kStageBytes != 0 || (tile_rows * k / kPiece) > kMaxPartials ||
        k % kPiece != 0 || (input == kNormIn && k > kNormLoads * kConsumers * 4)) {
      std::fprintf(stderr, "bad tiling %d x %d / %d\n", rows, k, tile_rows);
      std::exit(1);
    }
    m.bytes += static_cast<double>(rows) * k * 2;
    m.ops.push_back(op);
    return static_cast<int>(m.ops.size()) - 1;
  };
  std::vector<float> h0(s.hidden);
  for (int i = 0; i < s.hidden; ++i) h0[i] = std::sin(0.37f * i);
  float* h = device_floats(m, s.hidden);
  CHECK(cudaMemcpy(h, h0.data(), s.hidden * 4, cudaMemcpyHostToDevice));
  int prev = -1;  // the operation that wrote h
  for (int l = 0; l < s.layers; ++l) {
    const int q = gemv(qkv, s.hidden, s.tile_rows[0], kNormIn, h, norm_weights(s.hidden), nullptr, prev);
    Op att{};
    const int splits = kCtx / kSplitTokens;
    att.w = device_weights(m, static_cast<size_t>(s.kv_heads) * 2 * kCtx * s.head_dim, 0x51ed27u * seed++, 1.0f);
    att.in = m.ops[q].out;
    att.out = device_floats(m, static_cast<size_t>(s.kv_heads) * splits * attention_state_floats(s.head_dim));
    att.rows = kCtx;
    att.k = s.head_dim;
    att.tiles = s.kv_heads * splits;
    att.attention = 1;
    att.dep = q;
    att.head_dim = s.head_dim;
    att.splits = splits;
    m.bytes += static_cast<double>(s.kv_heads) * 2 * kCtx * s.head_dim * 2;
    m.ops.push_back(att);
    const int a = static_cast<int>(m.ops.size()) - 1;
    const int o = gemv(s.hidden, s.heads * s.head_dim, s.tile_rows[1], kAttnMergeIn, m.ops[a].out, nullptr, h, a);
    m.ops[o].head_dim = s.head_dim;
    m.ops[o].splits = splits;
    const float* h_mid = m.ops[o].out;
    const int gu = gemv(2 * s.ffn, s.hidden, s.tile_rows[2], kNormIn, h_mid, norm_weights(s.hidden), nullptr, o);
    const int d = gemv(s.hidden, s.ffn, s.tile_rows[3], kSwigluIn, m.ops[gu].out, nullptr, h_mid, gu);
    h = m.ops[d].out;
    prev = d;
  }
  const int lm = gemv(s.vocab, s.hidden, s.tile_rows[4], kNormIn, h, norm_weights(s.hidden), nullptr, prev);
  m.logits = m.ops[lm].out;
  m.logits_n = s.vocab;
  for (Op& op : m.ops) op.dep_tiles = op.dep >= 0 ? static_cast<unsigned>(m.ops[op.dep].tiles) : 0u;
  CHECK(cudaDeviceSynchronize());
  return m;
}

// Tasks of ops [first, last) handed round-robin over `grid` CTAs, continuing the rotation across
// operations so the CTAs that took an extra tile of one take none of the next.
void assign(const std::vector<Op>& ops, int first, int last, int grid, std::vector<TaskDesc>& tasks,
            std::vector<int>& begin) {
  std::vector<std::vector<TaskDesc>> per(grid);
  int cursor = 0;
  for (int o = first; o < last; ++o)
    for (int t = 0; t < ops[o].tiles; ++t) {
      TaskDesc d{};
      d.op = ops[o];
      d.index = o;
      d.tile = t;
      per[cursor++ % grid].push_back(d);
    }
  tasks.clear();
  begin.assign(1, 0);
  for (auto& v : per) {
    tasks.insert(tasks.end(), v.begin(), v.end());
    begin.push_back(static_cast<int>(tasks.size()));
  }
}

template <typename T>
T* to_device(const std::vector<T>& v) {
  T* p;
  CHECK(cudaMalloc(&p, v.size() * sizeof(T)));
  CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

double rel_l2(const float* a_dev, const float* b_dev, int n) {
  std::vector<float> a(n), b(n);
  CHECK(cudaMemcpy(a.data(), a_dev, n * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(b.data(), b_dev, n * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

void run_shape(const Shape& s, int sms) {
  Model m = build(s);
  const int n_ops = static_cast<int>(m.ops.size());
  int max_k = 0;
  for (const Op& op : m.ops) max_k = std::max(max_k, op.attention ? 0 : op.k);
  const int x_floats = std::max(max_k, kQPerKv * s.head_dim + kQPerKv * kSplitTokens + kQPerKv * 512 + 32);
  auto smem_of = [&](int depth) {
    return depth * kStageBytes + (x_floats + 2 * kMaxPartials + kScratchFloats) * 4 +
           (2 * kMaxStages + 2 * kSignalSlots) * 8;
  };
  int max_smem = 0;
  CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  const int max_depth = std::min(kMaxStages, static_cast<int>((max_smem - smem_of(0)) / kStageBytes));
  CHECK(cudaFuncSetAttribute(resident_step<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(max_depth)));
  CHECK(cudaFuncSetAttribute(resident_step<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(max_depth)));
  std::printf("\n%s: %d layers, %.1f MB streamed a step (weights + K/V), floor %.1f us at 4.61 TB/s, %.1f at 4.2; "
              "ring up to %d x 16 KB, x %d KB\n",
              s.name, s.layers, m.bytes / 1e6, m.bytes / 4.61e6, m.bytes / 4.2e6, max_depth, x_floats * 4 / 1024);

  unsigned *done, *done_by_launches;  // the launches count too (unread), on counters of their own
  CHECK(cudaMalloc(&done, n_ops * 4));
  CHECK(cudaMemset(done, 0, n_ops * 4));
  CHECK(cudaMalloc(&done_by_launches, n_ops * 4));
  std::vector<TaskDesc> tasks;
  std::vector<int> begin;
  assign(m.ops, 0, n_ops, sms, tasks, begin);
  TaskDesc* d_tasks = to_device(tasks);
  int* d_begin = to_device(begin);
  unsigned epoch = 0;

  unsigned long long* d_task_trace;
  CHECK(cudaMalloc(&d_task_trace, tasks.size() * kTraceFields * 8));
  unsigned long long* op_end_slots;  // [0]: the start, then one per operation
  CHECK(cudaMalloc(&op_end_slots, (n_ops + 1) * 8));
  auto run_resident = [&](int depth, int mode, bool traced = false) {
    if ((mode & ~kLight) != kStreamOnly) ++epoch;  // stream-only runs count nothing
    unsigned long long* op_end = traced ? op_end_slots + 1 : nullptr;
    unsigned long long* task_trace = traced ? d_task_trace : nullptr;
    void* args[] = {&d_tasks, &d_begin, &done, &epoch, &depth, const_cast<int*>(&x_floats), &mode, &op_end, &task_trace};
    // Always the largest footprint, so one CTA sits on each SM whatever the ring's depth.
    CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(resident_step<1>), dim3(sms), dim3(kThreads), args,
                                      smem_of(max_depth), 0));
  };
  // Two resident CTAs an SM (twice the consumer warps), each with a ring of what half an SM leaves,
  // where that is at least 4 stages; the tasks handed over 2 x SMs CTAs the same way.
  int pair_depth = std::min(kMaxStages, static_cast<int>((max_smem / 2 - 1024 - smem_of(0)) / kStageBytes));
  int pair_fit = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pair_fit, resident_step<2>, kThreads, smem_of(std::max(pair_depth, 0))));
  if (pair_fit < 2) pair_depth = 0;  // (the arm is left out)
  std::vector<TaskDesc> tasks2;
  std::vector<int> begin2;
  assign(m.ops, 0, n_ops, 2 * sms, tasks2, begin2);
  TaskDesc* d_tasks2 = to_device(tasks2);
  int* d_begin2 = to_device(begin2);
  unsigned* done2;
  CHECK(cudaMalloc(&done2, n_ops * 4));
  CHECK(cudaMemset(done2, 0, n_ops * 4));
  unsigned epoch2 = 0;
  auto run_pair = [&](int mode) {
    ++epoch2;
    int depth = pair_depth;
    unsigned long long* none = nullptr;
    void* args[] = {&d_tasks2, &d_begin2, &done2, &epoch2, &depth, const_cast<int*>(&x_floats), &mode, &none, &none};
    CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(resident_step<2>), dim3(2 * sms), dim3(kThreads), args,
                                      smem_of(pair_depth), 0));
  };

  // The reference chain, then the check: logits and every operation's output of the first layer.
  std::vector<float*> ref_out(n_ops);
  std::vector<Op> ref_ops = m.ops;
  for (int i = 0; i < n_ops; ++i) {
    ref_out[i] = device_floats(m, m.ops[i].attention ? s.heads * s.head_dim : m.ops[i].rows);
    ref_ops[i].out = ref_out[i];
    if (ref_ops[i].input == kAttnMergeIn) ref_ops[i].input = kPlainIn;  // the reference's attention normalises
  }
  for (int i = 0; i < n_ops; ++i) {  // inputs and residuals re-pointed at the reference's buffers
    for (int j = 0; j < n_ops; ++j) {
      if (m.ops[i].in == m.ops[j].out) ref_ops[i].in = ref_out[j];
      if (m.ops[i].residual == m.ops[j].out) ref_ops[i].residual = ref_out[j];
    }
  }
  float* xs = device_floats(m, max_k);
  for (const Op& op : ref_ops) {
    if (op.attention) {
      ref_attention<<<op.tiles / op.splits * kQPerKv, 128>>>(op, op.out);
    } else {
      ref_input<<<1, 1024>>>(op, xs);
      ref_gemv<<<(op.rows + 7) / 8, 256>>>(op, xs);
    }
  }
  CHECK(cudaDeviceSynchronize());
  const char* mode_names[3] = {"resident, lead", "resident, no lead", "launches + PDL"};
  auto check = [&](const char* what) {
    double worst = rel_l2(m.logits, ref_out[n_ops - 1], m.logits_n);
    for (int i = 0; i < 6 && i < n_ops; ++i)  // attention's split states have no reference; the O projection checks them
      if (!m.ops[i].attention) worst = std::max(worst, rel_l2(m.ops[i].out, ref_out[i], m.ops[i].rows));
    std::printf("check %-32s relative L2 error (logits, first layer): %.2e (%s)\n", what, worst,
                worst < 1e-3 ? "ok" : "WRONG");
  };

  // One launch per operation: a graph of n_ops launches with programmatic dependent launch.
  // The launches' task lists, concatenated in launch order (a traced graph's records follow it).
  std::vector<TaskDesc> launch_tasks;
  for (int o = 0; o < n_ops; ++o) {
    std::vector<TaskDesc> t1;
    std::vector<int> b1;
    assign(m.ops, o, o + 1, sms, t1, b1);
    launch_tasks.insert(launch_tasks.end(), t1.begin(), t1.end());
  }
  unsigned long long* d_launch_trace;
  CHECK(cudaMalloc(&d_launch_trace, launch_tasks.size() * kTraceFields * 8));
  auto make_graph = [&](int depth, bool light, bool traced = false) {
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<TaskDesc> t1;
    std::vector<int> b1;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    std::vector<std::pair<TaskDesc*, int*>> lists;
    std::vector<size_t> offsets;
    size_t offset = 0;
    for (int o = 0; o < n_ops; ++o) {
      assign(m.ops, o, o + 1, sms, t1, b1);
      lists.push_back({to_device(t1), to_device(b1)});
      offsets.push_back(offset);
      offset += t1.size();
    }
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int o = 0; o < n_ops; ++o) {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(sms);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = smem_of(depth);
      cfg.stream = stream;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = attr;
      cfg.numAttrs = o > 0 ? 1 : 0;
      CHECK(cudaLaunchKernelEx(&cfg, resident_step<1>, static_cast<const TaskDesc*>(lists[o].first),
                               static_cast<const int*>(lists[o].second), done_by_launches, 1u, depth, x_floats,
                               static_cast<int>(kPdl) | (light ? kLight : 0), static_cast<unsigned long long*>(nullptr),
                               traced ? d_launch_trace + offsets[o] * kTraceFields
                                      : static_cast<unsigned long long*>(nullptr)));
    }
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    return std::make_pair(exec, stream);
  };

  auto time_us = [&](auto f, cudaStream_t st) {
    const LabTime t = lab_time(f, st, 23, 3);
    return std::make_pair(t.median_us, t.min_us);
  };
  auto report = [&](const char* what, int depth, std::pair<double, double> us) {
    std::printf("%-20s ring %2d x 16 KB  %8.1f us a step (min %8.1f)  %6.3f TB/s  %7.1f steps/s  %.2f x floor@4.61\n",
                what, depth, us.first, us.second, m.bytes / us.first / 1e6, 1e6 / us.first,
                us.first / (m.bytes / 4.61e6));
  };

  std::vector<int> depths;
  for (int d : {4, 8, 12, max_depth})
    if (d <= max_depth && std::find(depths.begin(), depths.end(), d) == depths.end()) depths.push_back(d);
  for (int mode : {kLead, kNoLead}) {
    run_resident(max_depth, mode);
    CHECK(cudaDeviceSynchronize());
    check(mode_names[mode]);
  }
  if (pair_depth >= 4) {
    run_pair(kLead);
    CHECK(cudaDeviceSynchronize());
    check("resident x2/SM, lead");
  }
  struct Graph {
    int depth;
    bool light;
    std::pair<cudaGraphExec_t, cudaStream_t> exec;
  };
  std::vector<Graph> graphs;
  for (bool light : {false, true})
    for (int d : {4, max_depth}) {
      auto g = make_graph(d, light);
      CHECK(cudaGraphLaunch(g.first, g.second));
      CHECK(cudaStreamSynchronize(g.second));
      if (!light) {
        char what[64];
        std::snprintf(what, sizeof what, "%s, ring %d", mode_names[kPdl], d);
        check(what);
      }
      graphs.push_back({d, light, g});
    }
  for (int pass = 0; pass < 2; ++pass) {
    std::printf("pass %d (median of 20 runs)\n", pass + 1);
    for (int d : depths) report(mode_names[kLead], d, time_us([&] { run_resident(d, kLead); }, 0));
    report(mode_names[kNoLead], max_depth, time_us([&] { run_resident(max_depth, kNoLead); }, 0));
    for (int d : depths) report("stream only", d, time_us([&] { run_resident(d, kStreamOnly); }, 0));
    for (auto& g : graphs)
      report(g.light ? "launches + PDL, nomul" : mode_names[kPdl], g.depth,
             time_us([&] { CHECK(cudaGraphLaunch(g.exec.first, g.exec.second)); }, g.exec.second));
    for (int d : {4, max_depth})
      report("resident, lead, nomul", d, time_us([&] { run_resident(d, kLead | kLight); }, 0));
    report("resident, no lead, nomul", max_depth, time_us([&] { run_resident(max_depth, kNoLead | kLight); }, 0));
    if (pair_depth >= 4) {
      report("resident x2/SM, lead", pair_depth, time_us([&] { run_pair(kLead); }, 0));
      report("resident x2/SM, nomul", pair_depth, time_us([&] { run_pair(kLead | kLight); }, 0));
    }
  }
  // Where the step's time goes: each operation's end (its last task counted) after the previous
  // operation's end, per layer, the median over layers and over 5 traced runs per arm.
  const char* kinds[5] = {"qkv", "attention", "o", "gate_up", "down"};
  for (int mode : {kLead, kNoLead}) {
    std::vector<std::vector<double>> per_kind(6);
    for (int r = 0; r < 5; ++r) {
      run_resident(max_depth, mode, true);
      CHECK(cudaDeviceSynchronize());
      std::vector<unsigned long long> t(n_ops + 1);
      CHECK(cudaMemcpy(t.data(), op_end_slots, t.size() * 8, cudaMemcpyDeviceToHost));
      for (int o = 0; o < n_ops; ++o) per_kind[o == n_ops - 1 ? 5 : o % 5].push_back((t[o + 1] - t[o]) / 1e3);
    }
    std::printf("%-20s ring %2d, us from the previous operation's end (median):", mode_names[mode], max_depth);
    for (int k = 0; k < 6; ++k) {
      auto& v = per_kind[k];
      std::sort(v.begin(), v.end());
      std::printf(" %s %.2f", k < 5 ? kinds[k] : "lm_head", v[v.size() / 2]);
    }
    std::printf("\n");
  }
  // Where each CTA's consumers spend a run, per kind of task (means over tasks; one traced run). The
  // hand-off: from the last output of the operation a task reads (its producer's latest "written")
  // to this CTA's input staged, over each operation's first task on a CTA.
  const double ghz = sm_clock_ghz();
  auto breakdown = [&](const char* label, const std::vector<TaskDesc>& list, const unsigned long long* trace_dev) {
    std::vector<unsigned long long> tr(list.size() * kTraceFields);
    CHECK(cudaMemcpy(tr.data(), trace_dev, tr.size() * 8, cudaMemcpyDeviceToHost));
    std::vector<unsigned long long> last_written(n_ops, 0);
    for (size_t i = 0; i < list.size(); ++i)
      last_written[list[i].index] = std::max(last_written[list[i].index], tr[i * kTraceFields + 2]);
    std::printf("traced %s (SM clock %.2f GHz), us per task: hand-off = the producer's last output written -> input "
                "staged (first task of an operation on a CTA); input wait = start -> input staged (the same tasks); "
                "task = input staged -> outputs written, of which waiting for stages; producer waiting for free "
                "slots; first issue -> outputs written\n",
                label, ghz);
    const char* all_kinds[6] = {"qkv", "attention", "o", "gate_up", "down", "lm_head"};
    double total_input = 0, total_task = 0, total_stage_wait = 0;
    for (int k = 0; k < 6; ++k) {
      double n = 0, n_first = 0, handoff = 0, input = 0, task = 0, stage_wait = 0, prod_wait = 0, lead = 0;
      for (size_t i = 0; i < list.size(); ++i) {
        const int o = list[i].index, kind = o == n_ops - 1 ? 5 : o % 5;
        if (kind != k) continue;
        const unsigned long long* r = &tr[i * kTraceFields];
        n += 1;
        const bool first = r[1] > r[0];  // the task waited and staged its input
        if (first && list[i].op.dep >= 0) {
          n_first += 1;
          input += (static_cast<double>(r[1]) - static_cast<double>(r[0])) / 1e3;
          handoff += (static_cast<double>(r[1]) - static_cast<double>(last_written[list[i].op.dep])) / 1e3;
        }
        task += (r[2] - r[1]) / 1e3;
        stage_wait += r[3] / ghz / 1e3;
        prod_wait += r[5] / ghz / 1e3;
        lead += (static_cast<double>(r[2]) - static_cast<double>(r[4])) / 1e3;
      }
      total_input += input, total_task += task, total_stage_wait += stage_wait;
      std::printf("  %-9s %6.0f tasks  hand-off %6.2f  input wait %6.2f (%5.0f firsts)  task %6.2f  of which "
                  "stages %6.2f  producer waiting %6.2f  issue->written %6.2f\n",
                  all_kinds[k], n, n_first > 0 ? handoff / n_first : 0.0, n_first > 0 ? input / n_first : 0.0,
                  n_first, task / n, stage_wait / n, prod_wait / n, lead / n);
    }
    std::printf("  per CTA over the step: input waits %.1f us, tasks %.1f us (of which waiting for stages %.1f)\n",
                total_input / sms, total_task / sms, total_stage_wait / sms);
  };
  for (int traced_mode : {static_cast<int>(kLead), kLead | kLight}) {
    run_resident(max_depth, traced_mode, true);
    CHECK(cudaDeviceSynchronize());
    breakdown(traced_mode == kLead ? "resident, lead" : "resident, lead, nomul", tasks, d_task_trace);
  }
  for (bool light : {false, true}) {
    auto g = make_graph(4, light, true);
    CHECK(cudaGraphLaunch(g.first, g.second));
    CHECK(cudaStreamSynchronize(g.second));
    breakdown(light ? "launches + PDL, ring 4, nomul" : "launches + PDL, ring 4", launch_tasks, d_launch_trace);
  }
  CHECK(cudaDeviceSynchronize());
  for (void* p : m.buffers) CHECK(cudaFree(p));
}

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "both";
  int sms = 0, major = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (major < 9) {
    std::printf("needs sm_90 (bulk copies, mbarriers, griddepcontrol)\n");
    return 0;
  }
  std::printf("%d SMs, one CTA of %d threads each (8 consumer warps, 1 producer warp)\n", sms, kThreads);
  // Tile rows: a tile is a whole number of 16 KB stages and at most 64 pieces of 1,024 weights.
  const Shape b1{"Llama-3.2-1B shape, one token", 2048, 32, 8, 64, 8192, 32000, 16, {8, 4, 16, 2, 16}};
  const Shape b8{"Llama-3.1-8B shape, one token", 4096, 32, 8, 128, 14336, 32000, 32, {4, 4, 8, 4, 8}};
  if (which == "1b" || which == "both") run_shape(b1, sms);
  if (which == "8b" || which == "both") run_shape(b8, sms);
  return 0;
}
