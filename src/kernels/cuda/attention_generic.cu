// CUDA-core attention for head_dims without a tensor-core kernel (see attention_generic.cuh).
//
// A CTA computes one output row (one query token of one head). Its four warps take the visible
// keys round-robin (warp w: positions w, w+4, ...); each warp keeps its own online-softmax state,
// with lane l holding dims 64j + 2l + {0,1} of q and of the accumulator, so a key's K and V rows
// are read as one coalesced 2*head_dim-byte access per warp and the q.k dot product is a butterfly
// shuffle reduction (bitwise equal in every lane, as fp32 addition is commutative). The warps are
// then merged through shared memory in warp order. Every step depends only on the key positions,
// never on the batch, and nothing uses atomics.
//
// Simple rather than fast: K/V are re-read per query head and per query token (from L2 for the
// small models this serves); the tensor-core kernels cover head_dim 64 and 128.
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_generic.cuh"
#include "kernels/cuda/cuda_check.h"

namespace fuselm::attention_detail {
namespace {

constexpr int kGenericWarps = 4;
constexpr int kGenericThreads = kGenericWarps * 32;
constexpr int kPairsPerLane = kGenericMaxHeadDim / 64;  // a warp covers 64 dims per pair slot
static_assert(kGenericMaxHeadDim % 64 == 0, "pair slots must tile the maximum head_dim");

// Each warp's final online-softmax state, in shared memory for the merge.
struct GenericMerge {
  float o[kGenericWarps][kGenericMaxHeadDim];
  float max[kGenericWarps];
  float sum[kGenericWarps];
};

// Attends the query row q_row to cache positions 0 .. n_keys-1 (1 <= n_keys <= the block table's
// capacity) of kv head `kv_head` and writes out_row. Every thread of the CTA must call it (it
// synchronises); `merge` is the CTA's shared scratch, used once.
template <class T>
__device__ void attend_row(const T* __restrict__ q_row, T* __restrict__ out_row, const T* __restrict__ k_pool,
                           const T* __restrict__ v_pool, const PagedKvLayout& layout,
                           const int32_t* __restrict__ block_table, int kv_head, int n_keys, float scale_log2,
                           GenericMerge& merge) {
  const int head_dim = layout.head_dim;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  // head_dim is even, so a lane's pair never straddles the row end.
  float qv[kPairsPerLane][2];
  float acc[kPairsPerLane][2];
#pragma unroll
  for (int j = 0; j < kPairsPerLane; ++j) {
    const int d = 64 * j + 2 * lane;
    const bool on = d < head_dim;
    qv[j][0] = on ? Mma<T>::to_float(q_row[d]) : 0.0f;
    qv[j][1] = on ? Mma<T>::to_float(q_row[d + 1]) : 0.0f;
    acc[j][0] = acc[j][1] = 0.0f;
  }

  // Row max in the log2 domain (scores times scale * log2 e); -inf until the warp sees a key.
  float row_max = -INFINITY;
  float row_sum = 0.0f;
  const int block_shift = __ffs(layout.block_size) - 1;
  for (int pos = warp; pos < n_keys; pos += kGenericWarps) {
    const int64_t base = layout.offset(block_table[pos >> block_shift], kv_head, pos & (layout.block_size - 1));
    const T* k = k_pool + base;
    const T* v = v_pool + base;
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < kPairsPerLane; ++j) {
      const int d = 64 * j + 2 * lane;
      if (d < head_dim) {
        dot = fmaf(qv[j][0], Mma<T>::to_float(k[d]), dot);
        dot = fmaf(qv[j][1], Mma<T>::to_float(k[d + 1]), dot);
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);

    const float s = dot * scale_log2;
    const float new_max = fmaxf(row_max, s);
    const float rescale = exp2f(row_max - new_max);  // 0 for the first key (row_max = -inf)
    const float p = exp2f(s - new_max);
    row_max = new_max;
    row_sum = fmaf(row_sum, rescale, p);
#pragma unroll
    for (int j = 0; j < kPairsPerLane; ++j) {
      const int d = 64 * j + 2 * lane;
      if (d < head_dim) {
        acc[j][0] = fmaf(acc[j][0], rescale, p * Mma<T>::to_float(v[d]));
        acc[j][1] = fmaf(acc[j][1], rescale, p * Mma<T>::to_float(v[d + 1]));
      }
    }
  }

  // Merge the warps in warp order. Warp 0 always holds position 0, so the merged max is finite; a
  // warp that saw no key (n_keys < 4) has max -inf, weight 0 and zero sums.
  if (lane == 0) {
    merge.max[warp] = row_max;
    merge.sum[warp] = row_sum;
  }
#pragma unroll
  for (int j = 0; j < kPairsPerLane; ++j) {
    const int d = 64 * j + 2 * lane;
    if (d < head_dim) {
      merge.o[warp][d] = acc[j][0];
      merge.o[warp][d + 1] = acc[j][1];
    }
  }
  __syncthreads();
  float merged_max = -INFINITY;
#pragma unroll
  for (int w = 0; w < kGenericWarps; ++w) merged_max = fmaxf(merged_max, merge.max[w]);
  float weight[kGenericWarps];
  float sum = 0.0f;
#pragma unroll
  for (int w = 0; w < kGenericWarps; ++w) {
    weight[w] = exp2f(merge.max[w] - merged_max);
    sum = fmaf(merge.sum[w], weight[w], sum);
  }
  const float inv_sum = 1.0f / sum;
  for (int d = threadIdx.x; d < head_dim; d += kGenericThreads) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kGenericWarps; ++w) o = fmaf(merge.o[w][d], weight[w], o);
    out_row[d] = Mma<T>::from_float(o * inv_sum);
  }
}

// Fills one output row with `value` (zeros for an empty sequence, NaN for inconsistent lengths).
template <class T>
__device__ void fill_row(T* out_row, int head_dim, float value) {
  for (int d = threadIdx.x; d < head_dim; d += kGenericThreads) out_row[d] = Mma<T>::from_float(value);
}

// grid (max_q_len, n_heads, batch): x = query token within its sequence.
template <class T>
__global__ void __launch_bounds__(kGenericThreads)
    prefill_generic_kernel(const T* __restrict__ q, T* __restrict__ out, const T* __restrict__ k_pool,
                           const T* __restrict__ v_pool, PagedKvLayout layout, const int32_t* __restrict__ block_tables,
                           int max_blocks_per_seq, const int32_t* __restrict__ q_starts,
                           const int32_t* __restrict__ kv_lens, int n_heads, int group, float scale_log2) {
  __shared__ GenericMerge merge;
  const int token = blockIdx.x;
  const int head = blockIdx.y;
  const int seq = blockIdx.z;
  const int q_begin = q_starts[seq];
  const int q_len = q_starts[seq + 1] - q_begin;
  if (token >= q_len) return;  // uniform over the CTA
  const int kv_len = kv_lens[seq];
  const int64_t row = (static_cast<int64_t>(q_begin) + token) * n_heads + head;
  T* out_row = out + row * layout.head_dim;
  if (kv_len < q_len || kv_len > static_cast<int64_t>(max_blocks_per_seq) * layout.block_size) {
    // The new tokens would sit at negative positions or past the block table.
    fill_row(out_row, layout.head_dim, NAN);
    return;
  }
  // This token is at cache position kv_len - q_len + token and sees every position up to it.
  const int n_keys = kv_len - q_len + token + 1;
  attend_row(q + row * layout.head_dim, out_row, k_pool, v_pool, layout,
             block_tables + static_cast<int64_t>(seq) * max_blocks_per_seq, head / group, n_keys, scale_log2, merge);
}

// grid (n_heads, batch).
template <class T>
__global__ void __launch_bounds__(kGenericThreads)
    decode_generic_kernel(const T* __restrict__ q, T* __restrict__ out, const T* __restrict__ k_pool,
                          const T* __restrict__ v_pool, PagedKvLayout layout, const int32_t* __restrict__ block_tables,
                          int max_blocks_per_seq, const int32_t* __restrict__ kv_lens, int n_heads, int group,
                          int split_tokens, int max_splits, float scale_log2) {
  __shared__ GenericMerge merge;
  const int head = blockIdx.x;
  const int seq = blockIdx.y;
  const int kv_len = kv_lens[seq];
  const int64_t row = static_cast<int64_t>(seq) * n_heads + head;
  T* out_row = out + row * layout.head_dim;
  if (kv_len <= 0) {
    fill_row(out_row, layout.head_dim, 0.0f);
    return;
  }
  // The same length contract as the split kernel: within the block table and within the plan
  // (the plan's splits are not used here, but a length past it is a caller bug either way).
  if (kv_len > static_cast<int64_t>(max_blocks_per_seq) * layout.block_size ||
      (kv_len + static_cast<int64_t>(split_tokens) - 1) / split_tokens > max_splits) {
    fill_row(out_row, layout.head_dim, NAN);
    return;
  }
  attend_row(q + row * layout.head_dim, out_row, k_pool, v_pool, layout,
             block_tables + static_cast<int64_t>(seq) * max_blocks_per_seq, head / group, kv_len, scale_log2, merge);
}

}  // namespace

template <class T>
Status prefill_attention_generic(const void* q, void* out, const AttentionShape& shape, const PagedKvView& kv,
                                 const int32_t* q_starts, const int32_t* kv_lens, int batch, int max_q_len,
                                 cudaStream_t stream) {
  if (shape.n_heads > 65535)
    return Status::error(str_cat("prefill_attention: n_heads=", shape.n_heads, " exceeds the grid limit 65535"));
  const dim3 grid(static_cast<unsigned>(max_q_len), static_cast<unsigned>(shape.n_heads),
                  static_cast<unsigned>(batch));
  prefill_generic_kernel<T><<<grid, kGenericThreads, 0, stream>>>(
      static_cast<const T*>(q), static_cast<T*>(out), static_cast<const T*>(kv.k), static_cast<const T*>(kv.v),
      kv.layout, kv.block_tables, kv.max_blocks_per_seq, q_starts, kv_lens, shape.n_heads,
      shape.n_heads / shape.n_kv_heads, shape.scale * 1.4426950408889634f);
  FUSELM_CUDA_RETURN_LAUNCH();
  return Status();
}

template <class T>
Status decode_attention_generic(const void* q, void* out, const AttentionShape& shape, const PagedKvView& kv,
                                const int32_t* kv_lens, int batch, const DecodeAttentionPlan& plan,
                                cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(shape.n_heads), static_cast<unsigned>(batch));
  decode_generic_kernel<T><<<grid, kGenericThreads, 0, stream>>>(
      static_cast<const T*>(q), static_cast<T*>(out), static_cast<const T*>(kv.k), static_cast<const T*>(kv.v),
      kv.layout, kv.block_tables, kv.max_blocks_per_seq, kv_lens, shape.n_heads, shape.n_heads / shape.n_kv_heads,
      plan.split_tokens, plan.max_splits_per_seq, shape.scale * 1.4426950408889634f);
  FUSELM_CUDA_RETURN_LAUNCH();
  return Status();
}

template Status prefill_attention_generic<__nv_bfloat16>(const void*, void*, const AttentionShape&, const PagedKvView&,
                                                         const int32_t*, const int32_t*, int, int, cudaStream_t);
template Status prefill_attention_generic<__half>(const void*, void*, const AttentionShape&, const PagedKvView&,
                                                  const int32_t*, const int32_t*, int, int, cudaStream_t);
template Status decode_attention_generic<__nv_bfloat16>(const void*, void*, const AttentionShape&, const PagedKvView&,
                                                        const int32_t*, int, const DecodeAttentionPlan&, cudaStream_t);
template Status decode_attention_generic<__half>(const void*, void*, const AttentionShape&, const PagedKvView&,
                                                 const int32_t*, int, const DecodeAttentionPlan&, cudaStream_t);

}  // namespace fuselm::attention_detail
