#pragma once
// RoPE and the KV-cache write, in one pass over the QKV projection's output: q is rotated into its
// own buffer (the layout attention reads), k is rotated and v copied into the paged cache.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/paged_kv.h"

namespace fuselm {

struct RopeKvShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // even
};

// qkv: [n_tokens][q_dim + 2 * kv_dim] (q heads, then k heads, then v heads), q_dim = n_heads * head_dim,
// kv_dim = n_kv_heads * head_dim; q_out: [n_tokens][q_dim]; all in `dtype` (f16 or bf16), as are the
// cache pools in `kv`. Token t sits at position positions[t] of the sequence in batch row
// token_batch[t], whose block table is row token_batch[t] of kv.block_tables; the blocks must be
// allocated. Rotation is rotate-half (HF layout): pair i is (i, i + head_dim/2), rotated by
// positions[t] * inv_freq[i] (inv_freq: device, head_dim/2 fp32 values with any scaling applied).
Status rope_kv(const void* qkv, void* q_out, DType dtype, const RopeKvShape& shape, int64_t n_tokens,
               const int32_t* positions, const int32_t* token_batch, const float* inv_freq, const PagedKvView& kv,
               cudaStream_t stream);

}  // namespace fuselm
