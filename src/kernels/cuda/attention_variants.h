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
  int stages = 2;  // K/V stages of 64 keys in shared memory: 2 or 3 (1 or 2 loads in flight)
};

// The variants prefill_attention / decode_attention run (measurements: docs/kernels/attention.md).
// Prefill takes 32 rows per warp when the grid still fills every multiprocessor twice over, else
// 16; both use 64-key tiles, so every row sees the same arithmetic in the same order and the
// choice, which depends on the batch, never changes a sequence's output bits.
PrefillVariant choose_prefill_variant(const AttentionShape& shape, int batch, int max_q_len, int multiprocessors);
DecodeVariant choose_decode_variant(const AttentionShape& shape);

Status prefill_attention_variant(const PrefillVariant& variant, const void* q, void* out, DType dtype,
                                 const AttentionShape& shape, const PagedKvView& kv, const int32_t* q_starts,
                                 const int32_t* kv_lens, int batch, int max_q_len, cudaStream_t stream);

Status decode_attention_variant(const DecodeVariant& variant, const void* q, void* out, DType dtype,
                                const AttentionShape& shape, const PagedKvView& kv, const int32_t* kv_lens, int batch,
                                const DecodeAttentionPlan& plan, void* workspace, cudaStream_t stream);

}  // namespace fuselm::attention_detail
