#include "kernels/cuda/sampling.h"

#include <cmath>
#include <limits>

#include "core/rng.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/pdl.cuh"

namespace fuselm {
namespace {

using namespace device;

constexpr int kThreads = 512;

// Ranking key: larger sorts first; the value's ordered bits, then the complemented id so that ties
// rank the lower id first. Every token has a distinct key, so "the k best" is always exactly k.
__device__ __forceinline__ uint64_t rank_key(float s, int id) {
  const uint32_t bits = __float_as_uint(s);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(id));
}

// Unnormalised probability relative to the largest scaled logit (an infinite one takes all the mass).
__device__ __forceinline__ float weight(float s, float s_max) {
  if (isinf(s_max)) return s == s_max ? 1.0f : 0.0f;
  return expf(s - s_max);
}

// Exclusive prefix sum over the block in thread order, with a fixed combination order.
__device__ float block_exclusive_scan(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  float inclusive = v;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += y;
  }
  float exclusive = __shfl_up_sync(0xffffffffu, inclusive, 1);
  if (lane == 0) exclusive = 0.0f;
  __syncthreads();
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    float w = lane < n_warps ? scratch[lane] : 0.0f;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, w, offset);
      if (lane >= offset) w += y;
    }
    scratch[lane] = w;
  }
  __syncthreads();
  return warp > 0 ? scratch[warp - 1] + exclusive : exclusive;
}

__device__ __forceinline__ void put_token(int32_t* tokens, int32_t* host_tokens, int row, int32_t id) {
  tokens[row] = id;
  if (host_tokens != nullptr) host_tokens[row] = id;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(float* __restrict__ logits, int vocab,
                                                          const SampleParams* __restrict__ all_params,
                                                          const int32_t* __restrict__ history, int history_stride,
                                                          int32_t* __restrict__ tokens,
                                                          int32_t* __restrict__ host_tokens,
                                                          bool greedy_picked) {
  __shared__ float f_scratch[32];
  __shared__ int i_scratch[32];
  const int row = blockIdx.x;
  // A row the logits' kernel picked is done: leave without waiting for that kernel.
  if (greedy_picked && greedy_without_penalty(all_params[row])) return;
  wait_for_previous_grid();  // the logits (a no-op unless launched early)
  const SampleParams p = all_params[row];
  float* l = logits + static_cast<int64_t>(row) * vocab;

  // Repetition penalty: a thread per window entry; only an id's first occurrence applies it, so no
  // logit is touched twice.
  const int history_len = min(max(p.history_len, 0), history_stride);
  if (p.repetition_penalty != 1.0f && history_len > 0) {
    const int32_t* h = history + static_cast<int64_t>(row) * history_stride;
    for (int i = threadIdx.x; i < history_len; i += blockDim.x) {
      const int32_t id = h[i];
      if (id < 0 || id >= vocab) continue;
      bool seen_before = false;
      for (int j = 0; j < i && !seen_before; ++j) seen_before = h[j] == id;
      if (!seen_before) {
        const float v = l[id];
        l[id] = v > 0.0f ? v / p.repetition_penalty : v * p.repetition_penalty;
      }
    }
    __syncthreads();
  }

  if (p.temperature <= 0.0f) {  // greedy: the largest logit, the lowest id among equals
    // One pass, 16 bytes a load where the row allows: each thread keeps its best and the lowest id
    // holding it (NaN never compares greater), then the block takes the best, then the lowest id.
    float best = -INFINITY;
    int best_id = vocab;
    auto consider = [&](float v, int i) {
      if (v > best || (v == best && i < best_id)) {
        best = v;
        best_id = i;
      }
    };
    int scalar_from = 0;
    if (vocab % 4 == 0 && reinterpret_cast<uintptr_t>(l) % 16 == 0) {
      // kBatch loads issued before the first is used: a loop that uses each load before the next
      // waits one L2 round trip per 16 bytes a thread (16 in a row for a 32k vocabulary).
      constexpr int kBatch = 8;
      const float4* l4 = reinterpret_cast<const float4*>(l);
      const int n4 = vocab / 4;
      for (int base = threadIdx.x; base < n4; base += kBatch * blockDim.x) {
        float4 v[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int i = base + j * static_cast<int>(blockDim.x);
          v[j] = i < n4 ? l4[i] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int i = base + j * static_cast<int>(blockDim.x);
          if (i >= n4) break;
          consider(v[j].x, 4 * i);
          consider(v[j].y, 4 * i + 1);
          consider(v[j].z, 4 * i + 2);
          consider(v[j].w, 4 * i + 3);
        }
      }
      scalar_from = vocab;
    }
    for (int i = scalar_from + threadIdx.x; i < vocab; i += blockDim.x) consider(l[i], i);
    const float top = block_reduce(best, MaxOp{}, -INFINITY, f_scratch);
    best_id = block_reduce(best == top ? best_id : vocab, [](int a, int b) { return a < b ? a : b; }, vocab,
                           i_scratch);
    if (threadIdx.x == 0) put_token(tokens, host_tokens, row, best_id < vocab ? best_id : -1);
    return;
  }

  // Temperature, in place; NaN logits can never be drawn.
  float s_max = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    float s = l[i] / p.temperature;
    if (isnan(s)) s = -INFINITY;
    l[i] = s;
    s_max = fmaxf(s_max, s);
  }
  s_max = block_reduce(s_max, MaxOp{}, -INFINITY, f_scratch);
  if (s_max == -INFINITY) {
    if (threadIdx.x == 0) put_token(tokens, host_tokens, row, -1);
    return;
  }

  // Every filter keeps a top-ranked prefix: tokens whose key is >= `threshold`. Each threshold is
  // found by bisection over the 64-bit keys with block-wide counts or masses.
  uint64_t threshold = 0;
  if (p.top_k > 0 && p.top_k < vocab) {  // the k-th best key: the largest t with count(key >= t) >= k
    uint64_t lo = 0, hi = ~uint64_t{0};
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2 + ((hi - lo) & 1);
      int count = 0;
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) count += rank_key(l[i], i) >= mid;
      count = block_reduce(count, SumOp{}, 0, i_scratch);
      if (count >= p.top_k) lo = mid; else hi = mid - 1;
    }
    threshold = lo;
  }
  if (p.top_p < 1.0f) {  // the largest t >= threshold with mass(key >= t) >= top_p * mass(key >= threshold)
    auto mass_from = [&](uint64_t t) {
      float m = 0.0f;
      for (int i = threadIdx.x; i < vocab; i += blockDim.x)
        if (rank_key(l[i], i) >= t) m += weight(l[i], s_max);
      return block_sum(m, f_scratch);
    };
    const float target = p.top_p * mass_from(threshold);
    uint64_t lo = threshold, hi = ~uint64_t{0};
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2 + ((hi - lo) & 1);
      if (mass_from(mid) >= target) lo = mid; else hi = mid - 1;
    }
    threshold = lo;
  }
  auto kept_weight = [&](int i) {
    const float w = weight(l[i], s_max);
    return rank_key(l[i], i) >= threshold && w >= p.min_p ? w : 0.0f;
  };

  // The draw: each thread owns a contiguous run of ids, so a prefix sum over threads orders the
  // mass by id; the last thread with mass whose run starts at or below the target walks its run.
  const int run = (vocab + blockDim.x - 1) / blockDim.x;
  const int begin = min(vocab, static_cast<int>(threadIdx.x) * run), end = min(vocab, begin + run);
  float local = 0.0f;
  for (int i = begin; i < end; ++i) local += kept_weight(i);
  const float before = block_exclusive_scan(local, f_scratch);
  float total = before + local;
  total = block_reduce(total, MaxOp{}, 0.0f, f_scratch);  // the last run's end: the total mass
  const float u = static_cast<float>(splitmix64(p.rng_state) >> 40) * (1.0f / (1 << 24));
  const float target = u * total;
  const int owner = block_reduce(local > 0.0f && before <= target ? static_cast<int>(threadIdx.x) : -1,
                                 MaxOp{}, -1, i_scratch);
  if (owner < 0) {  // nothing kept (min_p > 1)
    if (threadIdx.x == 0) put_token(tokens, host_tokens, row, -1);
    return;
  }
  if (static_cast<int>(threadIdx.x) == owner) {
    const float rest = target - before;
    float acc = 0.0f;
    int chosen = -1;
    for (int i = begin; i < end; ++i) {
      const float w = kept_weight(i);
      if (w <= 0.0f) continue;
      acc += w;
      chosen = i;  // rounding can leave `rest` at or above the run's sum: the last kept id then
      if (rest < acc) break;
    }
    put_token(tokens, host_tokens, row, chosen);
  }
}

}  // namespace

Status sample_tokens(float* logits, int rows, int vocab, const SampleParams* params, const int32_t* history,
                     int history_stride, int32_t* tokens, cudaStream_t stream, int32_t* host_tokens, bool pdl,
                     bool greedy_picked) {
  if (rows == 0) return Status();
  if (rows < 0 || vocab <= 0)
    return Status::error(str_cat("sample_tokens: bad shape rows=", rows, " vocab=", vocab));
  if (!logits || !params || !tokens) return Status::error("sample_tokens: logits, params and tokens must be set");
  if (history_stride < 0 || (history_stride > 0 && !history))
    return Status::error("sample_tokens: history must be set when history_stride > 0");
  FUSELM_CUDA_RETURN(launch_kernel(sample_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream, pdl,
                                   logits, vocab, params, history, history_stride, tokens, host_tokens,
                                   greedy_picked));
  return Status();
}

}  // namespace fuselm
