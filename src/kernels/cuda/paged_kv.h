#pragma once
// The paged KV cache layout shared by the cache-write and attention kernels.
//
// One pool per layer for K and one for V, each [num_blocks][n_kv_heads][block_size][head_dim]
// ("HND" within a block). Decode attention reads one (sequence, kv head) at a time, so keeping a
// head's block_size x head_dim tile contiguous turns every block visit into one long coalesced read.
// A sequence's token at position p lives in block block_table[p / block_size], slot p % block_size.
#include <cstdint>

#include "core/hd.h"

namespace fuselm {

struct PagedKvLayout {
  int block_size = 16;  // tokens per block (a power of two)
  int n_kv_heads = 0;
  int head_dim = 0;

  FUSELM_HD int64_t block_elems() const { return static_cast<int64_t>(n_kv_heads) * block_size * head_dim; }
  // Element offset of (block, kv head, slot, dim 0) within a layer's pool.
  FUSELM_HD int64_t offset(int64_t block, int kv_head, int slot) const {
    return block * block_elems() + (static_cast<int64_t>(kv_head) * block_size + slot) * head_dim;
  }
};

// One layer's view of the cache for one step: pools plus the batch's block tables.
struct PagedKvView {
  void* k = nullptr;  // this layer's K pool (dtype of the engine: bf16 or fp16)
  void* v = nullptr;  // this layer's V pool
  PagedKvLayout layout;
  const int32_t* block_tables = nullptr;  // device, [batch][max_blocks_per_seq]
  int max_blocks_per_seq = 0;
};

}  // namespace fuselm
