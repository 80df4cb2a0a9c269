#include "runtime/cuda/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace fuselm {

KvBlockAllocator::KvBlockAllocator(int total_blocks) : total_(total_blocks) {
  free_.reserve(total_blocks);
  for (int b = total_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool KvBlockAllocator::allocate(int n, std::vector<int32_t>& out) {
  if (n < 0 || n > free_count()) return false;
  for (int i = 0; i < n; ++i) {
    out.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvBlockAllocator::release(std::span<const int32_t> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) free_.push_back(*it);
}

KvCache::KvCache(const ModelConfig& config, DType dtype, int block_size, int num_blocks, int max_blocks_per_seq)
    : num_layers_(config.num_layers), max_blocks_per_seq_(max_blocks_per_seq), allocator_(num_blocks) {
  FUSELM_CHECK(num_blocks >= 1, "the KV cache needs at least one block");
  layout_.block_size = block_size;
  layout_.n_kv_heads = config.num_kv_heads;
  layout_.head_dim = config.head_dim;
  // Each pool starts on 256 bytes so that every block row meets the kernels' 16-byte accesses.
  layer_pool_bytes_ = (dtype_bytes(dtype, layout_.block_elems() * num_blocks) + 255) / 256 * 256;
  pool_ = DeviceBuffer::allocate(layer_pool_bytes_ * 2 * num_layers_, "the KV cache");
}

int KvCache::add_sequence() {
  const KvCacheStats s = stats();
  FUSELM_CHECK(s.live_sequences < s.total_blocks, "cannot add a sequence: ", s.live_sequences,
               " sequences are live and the KV cache has only ", s.total_blocks,
               " blocks (each sequence needs at least one); remove finished sequences first");
  const int id = next_id_++;
  sequences_.emplace(id, Sequence{});
  return id;
}

KvCache::Sequence& KvCache::find(int seq_id) {
  auto it = sequences_.find(seq_id);
  FUSELM_CHECK(it != sequences_.end(), "unknown sequence id ", seq_id,
               " (never added, or already removed)");
  return it->second;
}

const KvCache::Sequence& KvCache::find(int seq_id) const { return const_cast<KvCache*>(this)->find(seq_id); }

void KvCache::remove_sequence(int seq_id) {
  Sequence& s = find(seq_id);
  allocator_.release(s.blocks);
  sequences_.erase(seq_id);
}

int KvCache::length(int seq_id) const { return find(seq_id).length; }

const std::vector<int32_t>& KvCache::blocks(int seq_id) const { return find(seq_id).blocks; }

void KvCache::reserve(std::span<const std::pair<int, int>> new_lengths) {
  int64_t needed = 0;
  for (const auto& [seq_id, len] : new_lengths) {
    const int64_t blocks = (static_cast<int64_t>(len) + layout_.block_size - 1) / layout_.block_size;
    needed += std::max<int64_t>(0, blocks - static_cast<int64_t>(find(seq_id).blocks.size()));
  }
  FUSELM_CHECK(needed <= allocator_.free_count(), "out of KV cache: this step needs ", needed, " more blocks of ",
               layout_.block_size, " tokens, ", allocator_.free_count(), " are free of ", stats().total_blocks,
               " in total; remove finished sequences, run fewer at once, or give the cache more memory "
               "(--kv-memory-fraction)");
  for (const auto& [seq_id, len] : new_lengths) {
    Sequence& s = find(seq_id);
    const int64_t blocks = (static_cast<int64_t>(len) + layout_.block_size - 1) / layout_.block_size;
    const int64_t more = blocks - static_cast<int64_t>(s.blocks.size());
    if (more > 0) allocator_.allocate(static_cast<int>(more), s.blocks);
  }
}

void KvCache::set_length(int seq_id, int length) { find(seq_id).length = length; }

void KvCache::write_block_table(int seq_id, int32_t* row) const {
  const std::vector<int32_t>& b = find(seq_id).blocks;
  const size_t n = std::min(b.size(), static_cast<size_t>(max_blocks_per_seq_));
  std::copy(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n), row);
  std::fill(row + n, row + max_blocks_per_seq_, 0);
}

int KvCache::reserve_scratch_block() {
  std::vector<int32_t> block;
  FUSELM_CHECK(allocator_.allocate(1, block), "the KV cache has no free block left for the decode scratch block");
  ++scratch_blocks_;
  return block[0];
}

PagedKvView KvCache::layer_view(int layer, const int32_t* block_tables) const {
  PagedKvView v;
  v.k = pool_.at<void>(layer_pool_bytes_ * (2 * static_cast<size_t>(layer)));
  v.v = pool_.at<void>(layer_pool_bytes_ * (2 * static_cast<size_t>(layer) + 1));
  v.layout = layout_;
  v.block_tables = block_tables;
  v.max_blocks_per_seq = max_blocks_per_seq_;
  return v;
}

KvCacheStats KvCache::stats() const {
  return {allocator_.total() - scratch_blocks_, allocator_.free_count(), layout_.block_size,
          static_cast<int>(sequences_.size())};
}

}  // namespace fuselm
