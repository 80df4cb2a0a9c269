#pragma once
// What the two decode attention kernels share: the workspace layout, the tile sizes, finding the
// step's items 32 sequences at a time, and the merge of a sequence's splits. attention_decode.cu
// attends a split with one CTA (or with a cluster's CTAs, one stretch of keys each);
// attention_decode_stacked.cu runs a cluster's cut of the keys in one CTA, stretch after stretch,
// with the same arithmetic, so both give the same bits.
#include <cstdint>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/decode_items.h"
#include "kernels/cuda/kernel_trace.h"
#include "kernels/cuda/pdl.cuh"

namespace fuselm::attention_detail {

// The workspace: a header of two counters (the next work item to claim, the CTAs done), then one
// record per sequence, at a place that does not depend on the batch of a launch (so counters a
// launch leaves at zero stay where any later launch looks for them): [merge counter per head
// group][log2-sum-exp per (head, split)][partial output per (head, split)].
struct DecodeWorkspaceLayout {
  static constexpr int64_t kHeaderBytes = 16;
  int64_t lse_offset = 0, out_offset = 0, record_bytes = 0;  // within a record
};
DecodeWorkspaceLayout decode_workspace_layout(const AttentionShape& shape, const DecodeAttentionPlan& plan);

inline constexpr int kMaxClusterRanks = 8;  // the portable cluster size

template <int HEAD_DIM, int STAGES>
struct DecodeConfig {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRows = 16;  // query heads per CTA (one mma row tile)
  static constexpr int kKeys = 64;  // keys per K/V stage, 16 per warp
  static constexpr int kQTileBytes = kRows * HEAD_DIM * 2;
  static constexpr int kKvTileBytes = kKeys * HEAD_DIM * 2;
  // After the key loop the K/V stages are reused to merge the warps' fp32 states; rows are padded
  // by 4 floats so that the quads of a warp land on different banks.
  static constexpr int kMergeStride = HEAD_DIM + 4;
  static constexpr int kMergeBytes = (kWarps * kRows * kMergeStride + kWarps * kRows * 2) * 4;
  // A cluster's ranks read each other's merged state (o unnormalised, then max and sum per row),
  // placed after the merge area.
  static constexpr int kRankStateBytes = (kRows * HEAD_DIM + kRows * 2) * 4;
  static constexpr int kSmemBytes = kQTileBytes + 2 * STAGES * kKvTileBytes;
  static_assert(kMergeBytes + kRankStateBytes <= 2 * STAGES * kKvTileBytes,
                "the merge area and the rank state must fit in the K/V stages");
};

// Items a launch can have at most, which bounds its grid (idle CTAs would hold SMs that the next
// kernel's CTAs, launched early with PDL, could use): with clusters of `ranks` and splits of at least
// min_rank_keys, a sequence with fewer ranks than the cluster is one split (of at most n_groups
// items), and one with a full cluster has ceil(max_splits_per_seq / ranks) splits at most.
inline int64_t decode_items_bound(int batch, int n_groups, const DecodeAttentionPlan& plan, int ranks) {
  const int64_t splits = ranks > 1 && plan.split_tokens >= plan.min_rank_keys
                             ? (plan.max_splits_per_seq + ranks - 1) / ranks
                             : plan.max_splits_per_seq;
  return static_cast<int64_t>(batch) * n_groups * splits;
}

template <class F>
Status dispatch_stages(int stages, F&& f) {
  switch (stages) {
    case 2: return f(IntConst<2>{});
    case 3: return f(IntConst<3>{});
    case 4: return f(IntConst<4>{});
    default: return Status::error(str_cat("decode_attention: unsupported stages=", stages, " (supported: 2, 3, 4)"));
  }
}

// The items' sequences, found 32 at a time: a warp's lanes load one length each and sum the items
// by shuffles, redundantly in every warp, with no barrier (walking the lengths one sequence at a
// time was a round trip per sequence before a CTA's first item: at batch 64 most of the kernel's
// time). Used through DecodeItemWindow<32>: fill() and locate() are its two callbacks.
struct WarpSeqWindow {
  const int32_t* kv_lens;
  int batch;
  int64_t capacity;
  int n_groups;
  DecodeSplitRule rule;
  int lane;
  int lane_len = 0, lane_items_end = 0;  // the window's sequence first_seq + lane: length, items up to it

  __device__ __forceinline__ int fill(int first_seq) {
    const int seq = first_seq + lane;
    lane_len = seq < batch ? kv_lens[seq] : 0;
    int items = seq < batch ? decode_seq_items(lane_len, capacity, n_groups, rule) : 0;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const int below = __shfl_up_sync(0xffffffffu, items, offset);
      if (lane >= offset) items += below;
    }
    lane_items_end = items;
    return __shfl_sync(0xffffffffu, items, 31);
  }
  __device__ __forceinline__ void locate(int64_t rel, int& i, int& before, int& len) const {
    i = __ffs(__ballot_sync(0xffffffffu, lane_items_end > rel)) - 1;
    const int previous_end = __shfl_sync(0xffffffffu, lane_items_end, i > 0 ? i - 1 : 0);
    before = i > 0 ? previous_end : 0;
    len = __shfl_sync(0xffffffffu, lane_len, i);
  }
};

// out = sum_s 2^lse_s * partial_s / sum_s 2^lse_s over a head group's splits, in split order, by the
// CTA that counted the group's last split in. `lse_rows` and `part_rows` point at the group's first
// head; a head's slots are max_splits apart.
template <class T, int HEAD_DIM, int THREADS>
__device__ __forceinline__ void merge_split_partials(const float* lse_rows, const float* part_rows, int max_splits,
                                                     int n_splits, int n_rows, uint16_t* group_out, int tid) {
  constexpr int kQuads = HEAD_DIM / 4;
  for (int idx = tid; idx < n_rows * kQuads; idx += THREADS) {
    const int row = idx / kQuads;
    const int d = (idx % kQuads) * 4;
    const float* lse = lse_rows + static_cast<int64_t>(row) * max_splits;
    const float* part = part_rows + static_cast<int64_t>(row) * max_splits * HEAD_DIM + d;
    // In chunks of kChunk splits whose loads are issued together (a loop with a use after each
    // load waits a round trip per split); the max and the sums still run in split order.
    constexpr int kChunk = 4;
    float max_lse = -INFINITY;
    for (int s0 = 0; s0 < n_splits; s0 += kChunk) {
      float l[kChunk];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) l[j] = s0 + j < n_splits ? __ldcg(lse + s0 + j) : -INFINITY;
#pragma unroll
      for (int j = 0; j < kChunk; ++j) max_lse = fmaxf(max_lse, l[j]);
    }
    float sum = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s0 = 0; s0 < n_splits; s0 += kChunk) {
      float l[kChunk];
      float4 o[kChunk];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        const bool valid = s0 + j < n_splits;
        l[j] = valid ? __ldcg(lse + s0 + j) : 0.0f;
        o[j] = valid ? __ldcg(reinterpret_cast<const float4*>(part + static_cast<int64_t>(s0 + j) * HEAD_DIM))
                     : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        if (s0 + j >= n_splits) break;
        const float weight = exp2f(l[j] - max_lse);
        sum += weight;
        acc.x += o[j].x * weight;
        acc.y += o[j].y * weight;
        acc.z += o[j].z * weight;
        acc.w += o[j].w * weight;
      }
    }
    const float inv_sum = 1.0f / sum;
    *reinterpret_cast<uint2*>(group_out + row * HEAD_DIM + d) =
        make_uint2(Mma<T>::pack(acc.x * inv_sum, acc.y * inv_sum), Mma<T>::pack(acc.z * inv_sum, acc.w * inv_sum));
  }
}

// The launch's items when one window holds the whole batch (its sum, known to every CTA before the
// first claim), else -1. Exactly one claim is made per item and claims return 0, 1, ..., so the
// claim that returns items - 1 is the launch's last: its CTA sets the counter back to zero for the
// next launch, and no CTA counts itself out at the exit (an atomic whose answer the last CTA waited
// for before leaving, and the next kernel waits for that exit). Larger batches count at the exit.
template <int kWindow>
__device__ __forceinline__ int64_t decode_launch_items(int batch, const DecodeItemWindow<kWindow>& window) {
  return batch <= kWindow ? static_cast<int64_t>(window.items) : -1;
}
__device__ __forceinline__ void reset_after_last_claim(int claim, int64_t launch_items, int* next_unclaimed) {
  if (launch_items > 0 && claim == launch_items - 1) atomicExch(next_unclaimed, 0);
}

// A head group's output is written and visible to other SMs: raised once per launch for a folded O
// projection (attention_decode_o.cuh) by the thread that ends the group's output, after a barrier
// that orders its peers' stores before its own.
__device__ __forceinline__ void announce_group_output(int* ready, int group) {
  __threadfence();
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(ready + group), "r"(1) : "memory");
}

// After the items: sequences without any (nothing to attend to gives zeros, a sequence longer than
// the plan allows NaN), written after the wait (an earlier kernel may still read `out`) by the `ctas`
// attending CTAs in turn, and announced to a folded O projection (`ready`: its flags per head group,
// attention_decode_o.cuh); then, with `count_exit` (launch items not known: decode_launch_items),
// the last CTA to finish (every claim is made by then) leaves the header at zero for the next launch.
template <class T, int HEAD_DIM, int THREADS>
__device__ __forceinline__ void finish_decode_launch(const int32_t* kv_lens, int batch, int64_t capacity,
                                                     const DecodeSplitRule& rule, int n_heads, uint16_t* out,
                                                     bool waited, int* next_unclaimed, int* ctas_done,
                                                     bool count_exit, KernelTrace* trace, int tid,
                                                     int ctas, int* ready = nullptr, int n_groups = 0) {
  for (int seq = blockIdx.x; seq < batch; seq += ctas) {
    const int kv_len = kv_lens[seq];
    if (decode_splits(kv_len, capacity, rule) > 0) continue;
    if (!waited) {
      wait_for_previous_grid();
      waited = true;
      if (tid == 0) trace_released(trace);
    }
    const uint16_t fill = Mma<T>::pack(kv_len <= 0 ? 0.0f : NAN, 0.0f) & 0xffffu;
    uint16_t* seq_out = out + static_cast<int64_t>(seq) * n_heads * HEAD_DIM;
    for (int i = tid; i < n_heads * HEAD_DIM; i += THREADS) seq_out[i] = fill;
    if (ready != nullptr) {
      __syncthreads();
      if (tid < n_groups) announce_group_output(ready, tid);
    }
  }
  __syncthreads();
  if (tid == 0) trace_end(trace);
  if (count_exit && tid == 0 && atomicAdd(ctas_done, 1) == ctas - 1) {
    atomicExch(next_unclaimed, 0);
    atomicExch(ctas_done, 0);
  }
}

// The stacked kernel (attention_decode_stacked.cu): a cluster's cut of a split computed by one CTA.
// Same arguments as the split kernel's launch; `variant.stages` K/V stages. Its shared memory
// follows the shape (query heads per group, cluster size, split size): an error when it does not
// fit the GPU.
Status decode_attention_stacked(const DecodeVariant& variant, const void* q, void* out, DType dtype,
                                const AttentionShape& shape, const PagedKvView& kv, const int32_t* kv_lens, int batch,
                                const DecodeAttentionPlan& plan, void* workspace, cudaStream_t stream);

}  // namespace fuselm::attention_detail
