#pragma once
// Attention over the paged KV cache (see paged_kv.h), for bf16 or fp16 activations.
// Both kernels read K/V from the cache; the new tokens' K/V must already be written there.
// Determinism: the reduction order depends only on each sequence's own length and the fixed
// split size, never on the batch composition, so a sequence's output is the same in any batch.
// No atomics anywhere: partial results are merged in a fixed order (warps, then splits).
// Launchers check shapes on the host and return a failed Status; they never throw or sync.
// Device-side lengths that contradict the block table (kv_len past max_blocks_per_seq *
// block_size, fewer cached than new tokens, more splits than planned) produce NaN outputs for
// that sequence instead of reads outside the cache.
// head_dim 64 and 128 run on tensor cores; other even head_dims up to 256 run a simple CUDA-core
// fallback (attention_generic.cuh) with the same semantics and guarantees (its decode has no
// splits and leaves the workspace untouched).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/decode_items.h"
#include "kernels/cuda/kernel_trace.h"
#include "kernels/cuda/paged_kv.h"
#include "kernels/cuda/skinny_gemm.h"

namespace fuselm {

struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // supported: even values 8..256 (tensor cores for 64 and 128, CUDA cores otherwise)
  float scale = 0.0f;  // usually 1/sqrt(head_dim)
};

// Causal prefill (or chunked prefill) for a ragged batch of sequences.
// q, out: [total_tokens, n_heads, head_dim], sequences packed back to back;
// q_starts[b]..q_starts[b+1] (device, batch+1 entries) are sequence b's new tokens;
// kv_lens[b] (device): tokens of b in the cache including the new ones. The new tokens of b are
// positions kv_lens[b] - (q_starts[b+1]-q_starts[b]) .. kv_lens[b]-1; each attends to every cache
// position up to its own. max_q_len bounds q_starts[b+1]-q_starts[b] (sizes the grid).
// Tensor cores (mma.sync m16n8k16, fp32 accumulate); all query heads of a GQA group share each
// K/V tile read.
Status prefill_attention(const void* q, void* out, DType dtype, const AttentionShape& shape,
                         const PagedKvView& kv, const int32_t* q_starts, const int32_t* kv_lens,
                         int batch, int max_q_len, cudaStream_t stream);

// Split-KV decode: one new token per sequence. q, out: [batch, n_heads, head_dim];
// kv_lens[b] (device) includes the new token. Each sequence's cache is cut into chunks of
// `split_tokens` tokens (a multiple of the block size; with clusters, see cluster_ranks); partial
// results go to `workspace`, and the last CTA of each head group to finish merges them in split
// order, so results are bitwise independent of the batch and of timing. One kernel launch.
// kv_lens[b] == 0 gives zeros. Requires kv_lens[b] <= max_splits_per_seq * split_tokens.
struct DecodeAttentionPlan {
  int split_tokens = 256;       // fixed: never chosen from the batch
  int max_splits_per_seq = 0;   // ceil(max_seq_len / split_tokens)
  // CTAs per thread-block cluster (sm_90 code; 1, 2, 4 or 8). With more than one, up to that many
  // CTAs (ranks) share a split's keys, split_tokens is the most keys a CTA takes, and a sequence of
  // up to cluster_ranks * split_tokens tokens is one split merged inside its cluster
  // (decode_items.h). The bits depend on it (on the sequence's length and this, never the batch).
  int cluster_ranks = 1;
  // With clusters: a sequence takes as many ranks as give each at least this many keys (a power
  // of two, at most cluster_ranks). The bits depend on it too.
  int min_rank_keys = kMinRankKeys;
  // With clusters: launches of at least this many sequences compute each cluster's keys in one CTA,
  // rank after rank, where its shared memory fits (the same bits; more bytes in flight per SM when
  // the batch alone fills the GPU). 0 = never.
  int stacked_from_batch = 0;
  // Launch with programmatic dependent launch (sm_90+; see pdl.cuh): the kernel waits for its
  // predecessor's results first and lets its successor start at once. Same results either way.
  bool pdl = false;
  // Timeline slot (kernel_trace.h); null records nothing.
  KernelTrace* trace = nullptr;
};
// The O projection and its residual epilogue run inside decode attention's launch, for one sequence:
// skinny_gemm_residual(o, attention's output, out) computed by CTAs of their own, which wait only
// for the head group they read. The O projection's K is cut into one piece per head group (8 head
// groups, each piece group * head_dim columns); CTA rank p of a cluster multiplies piece p of a
// slice of rows from shared memory (loaded before the wait), and the ranks add the pieces in rank
// order: the rounding of the k8 skinny GEMM variants (rt1_w8, rt1_w4_k8_cta), so the same bits as
// that launch. `ready` holds 2 * 8 ints, zeroed once (every launch leaves them at zero): per head
// group a flag its output raises and a count of the CTAs that saw it. decode_o_fold_fits says
// whether a shape and plan can run it.
struct DecodeOFold {
  PackedWeight o;         // tile group 1
  SkinnyResidualOut out;  // as skinny_gemm_residual's
  int* ready = nullptr;
};
inline constexpr int kDecodeOFoldGroups = 8;
inline constexpr int kDecodeOFoldReadyInts = 2 * kDecodeOFoldGroups;
// Whether decode_attention can take `o_weights`' projection into its launch at batch 1 under
// `plan`: clusters of 8, 8 head groups of at most 16 heads, head_dim 64 or 128, K = 8 pieces of
// whole head groups, tile group 1, a slice of rows fitting the kernel's shared memory, and the
// launch's clusters all resident at once (its CTAs wait for one another).
bool decode_o_fold_fits(const AttentionShape& shape, const DecodeAttentionPlan& plan, const PackedWeight& o_weights);

// Workspace bytes decode_attention needs for `max_batch` sequences under `plan`.
size_t decode_attention_workspace_bytes(const AttentionShape& shape, const DecodeAttentionPlan& plan, int max_batch);
// Zeroes the workspace's merge counters; once, after allocating it (every launch leaves them at zero).
Status decode_attention_init_workspace(void* workspace, const AttentionShape& shape, const DecodeAttentionPlan& plan,
                                       int max_batch, cudaStream_t stream);
// With `fold` (batch 1 only; decode_o_fold_fits), the launch also runs the O projection and its
// residual epilogue from its output.
Status decode_attention(const void* q, void* out, DType dtype, const AttentionShape& shape,
                        const PagedKvView& kv, const int32_t* kv_lens, int batch,
                        const DecodeAttentionPlan& plan, void* workspace, cudaStream_t stream,
                        const DecodeOFold* fold = nullptr);

}  // namespace fuselm
