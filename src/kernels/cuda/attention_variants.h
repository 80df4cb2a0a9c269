#pragma once
// The kernel variants behind prefill_attention and decode_attention, selectable for tests and
// benchmarks; the public launchers run the variant the table below picks for their shape.
// Every variant computes the same function with the same determinism guarantees.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/paged_kv.h"

namespace fuselm::attention_detail {

struct PrefillVariant {
  // Query rows per warp: 16 (one mma row tile, Q fragments in registers) or 32 (two row tiles
  // share every K/V fragment read from shared memory; Q re-read from shared memory).
  int rows_per_warp = 16;
  int keys_per_tile = 64;  // keys per K/V tile in shared memory (32 halves the score registers)
};

struct DecodeVariant {
  int stages = 2;  // K/V stages of 64 keys in shared memory: 2, 3 or 4 (1, 2 or 3 loads in flight)
  // CTAs of the launch; each takes work items (one split of one head group of one sequence)
  // x, x + ctas, ... 0 = one wave, as many as fit on the GPU at once. Same bits for any count.
  int ctas = 0;
  // With clusters (DecodeAttentionPlan::cluster_ranks > 1): each cluster's item computed by one CTA,
  // its ranks one after another (attention_decode_stacked.cu). The same bits as the clusters.
  bool stacked = false;
};

// The variants prefill_attention / decode_attention run (measurements: docs/kernels/attention.md).
// The prefill tiling is fixed per head_dim, never chosen from the batch: two tilings round
// differently in the last bits, so a batch-dependent choice would make a sequence's output depend
// on its batch. The decode stage count and grid size change no bit (every stage count runs the
// same warps over the same keys in the same order; each split is computed alike by whichever CTA
// takes it, and merged in split order by whichever finishes last); the stage count follows the
// GPU's shared memory.
PrefillVariant choose_prefill_variant(int head_dim);
DecodeVariant choose_decode_variant(int head_dim, int max_smem_per_block);

Status prefill_attention_variant(const PrefillVariant& variant, const void* q, void* out, DType dtype,
                                 const AttentionShape& shape, const PagedKvView& kv, const int32_t* q_starts,
                                 const int32_t* kv_lens, int batch, int max_q_len, cudaStream_t stream);

// CTAs (clusters, with cluster_ranks > 1) of one wave of the decode kernel with `variant`'s stages
// on this GPU: the grid when variant.ctas is 0, unless the step has fewer items. 0 for a head_dim
// without a tensor-core kernel.
int decode_wave_units(const DecodeVariant& variant, int head_dim, int cluster_ranks);

// K/V stages per team the public launcher gives the stacked kernel: two teams of two 64-key stages
// are 128 KB at head_dim 128, about what one CTA per SM has room for next to its other buffers.
inline constexpr int kStackedStages = 2;

// Whether the stacked kernel (variant.stacked, with plan.cluster_ranks > 1) has the shared memory it
// needs on this GPU for `shape`, `plan` and KV blocks of `block_size` tokens.
bool decode_stacked_fits(const DecodeVariant& variant, const AttentionShape& shape, const DecodeAttentionPlan& plan,
                         int block_size);

Status decode_attention_variant(const DecodeVariant& variant, const void* q, void* out, DType dtype,
                                const AttentionShape& shape, const PagedKvView& kv, const int32_t* kv_lens, int batch,
                                const DecodeAttentionPlan& plan, void* workspace, cudaStream_t stream,
                                const DecodeOFold* fold = nullptr);

}  // namespace fuselm::attention_detail
