#pragma once
// The paged KV cache (layout in kernels/cuda/paged_kv.h): one device pool holding every layer's K
// and V blocks, a host free list of block ids, and each sequence's length and block list. Block
// tables are written to the step inputs from the host before each step.
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda/paged_kv.h"
#include "model/config.h"
#include "runtime/cuda/device_memory.h"

namespace fuselm {

// A LIFO free list of block ids 0..total-1 (block 0 is handed out first).
class KvBlockAllocator {
 public:
  explicit KvBlockAllocator(int total_blocks);
  int total() const { return total_; }
  int free_count() const { return static_cast<int>(free_.size()); }
  // Appends n block ids to `out`; takes nothing and returns false when fewer than n are free.
  bool allocate(int n, std::vector<int32_t>& out);
  void release(std::span<const int32_t> blocks);

 private:
  int total_;
  std::vector<int32_t> free_;
};

struct KvCacheStats {
  int total_blocks = 0;
  int free_blocks = 0;
  int block_size = 0;
  int live_sequences = 0;
};

class KvCache {
 public:
  // Allocates the pool: num_blocks blocks of `block_size` tokens for every layer.
  KvCache(const ModelConfig& config, DType dtype, int block_size, int num_blocks, int max_blocks_per_seq);

  // Sequences: ids are never reused. add_sequence throws Error when as many sequences are live as
  // there are blocks (each needs one as soon as it holds a token).
  int add_sequence();
  void remove_sequence(int seq_id);  // frees its blocks; throws Error for an unknown id
  int length(int seq_id) const;
  const std::vector<int32_t>& blocks(int seq_id) const;

  // Gives each (sequence, new length) pair the blocks to hold that many tokens. All or nothing:
  // throws Error naming the blocks needed, free and in total when the pool is short.
  void reserve(std::span<const std::pair<int, int>> new_lengths);
  void set_length(int seq_id, int length);

  // Writes a sequence's block ids into a block-table row of max_blocks_per_seq entries (unused
  // entries 0, a valid block, so that a stray read never leaves the pool).
  void write_block_table(int seq_id, int32_t* row) const;

  // Takes one block out of the pool for good and returns its id: a place where the padding rows of
  // a graph-captured decode step (rows past the real batch) can write their K/V harmlessly.
  // Scratch blocks do not count in stats().
  int reserve_scratch_block();

  // Layer `layer`'s view for a step whose block tables are at `block_tables` (device).
  PagedKvView layer_view(int layer, const int32_t* block_tables) const;

  const PagedKvLayout& layout() const { return layout_; }
  int max_blocks_per_seq() const { return max_blocks_per_seq_; }
  KvCacheStats stats() const;
  size_t pool_bytes() const { return pool_.size(); }

 private:
  struct Sequence {
    int length = 0;
    std::vector<int32_t> blocks;
  };
  Sequence& find(int seq_id);
  const Sequence& find(int seq_id) const;

  PagedKvLayout layout_;
  int num_layers_;
  int max_blocks_per_seq_;
  size_t layer_pool_bytes_;  // one layer's K (or V) pool
  DeviceBuffer pool_;
  KvBlockAllocator allocator_;
  std::unordered_map<int, Sequence> sequences_;
  int scratch_blocks_ = 0;
  int next_id_ = 0;
};

}  // namespace fuselm
