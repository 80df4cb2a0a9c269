#pragma once
// The work items of split-KV decode attention (attention_decode.cu) and the order in which its CTAs
// take them. Host-compilable, so the enumeration is tested without a GPU.
//
// An item is one split (a fixed chunk of split_tokens cached tokens) of one sequence for one head
// group (the up to 16 query heads that share a KV head). A step's items are numbered sequence by
// sequence; within a sequence, split by split, and within a split, head group by head group (head
// group fastest). So CTAs that run at the same time read the same KV blocks, which hold every KV
// head of their tokens: in a split-fastest order, each CTA reading one head's 4 KB of every block,
// a 32k-token sequence took 55% longer (docs/kernels/attention.md).
#include <cstdint>

#include "core/hd.h"

namespace fuselm {

// Whether a sequence of kv_len tokens fits the plan: within its block table's capacity and within
// the workspace's split slots. The kernel writes NaN for a sequence that does not.
FUSELM_HD bool decode_length_ok(int kv_len, int64_t capacity, int split_tokens, int max_splits) {
  return kv_len <= capacity && (kv_len + split_tokens - 1) / split_tokens <= max_splits;
}

// Splits of a sequence with work to do: 0 for an empty sequence or one that does not fit the plan.
FUSELM_HD int decode_splits(int kv_len, int64_t capacity, int split_tokens, int max_splits) {
  return kv_len > 0 && decode_length_ok(kv_len, capacity, split_tokens, max_splits)
             ? (kv_len + split_tokens - 1) / split_tokens
             : 0;
}

// Maps item numbers to (sequence, split, head group). A CTA asks for its items in increasing order,
// so the cursor only moves forward: reading the lengths costs O(batch + items) per CTA.
struct DecodeItemCursor {
  int seq = 0, n_splits = 0, kv_len = 0;  // the current sequence
  int64_t first_item = 0;                 // number of its first item

  // Starts at sequence 0 (batch > 0).
  FUSELM_HD void start(const int32_t* kv_lens, int64_t capacity, int split_tokens, int max_splits) {
    seq = 0;
    first_item = 0;
    load(kv_lens, capacity, split_tokens, max_splits);
  }
  // Moves to the sequence that holds `item` (>= every item asked before); false past the last item.
  FUSELM_HD bool seek(int64_t item, const int32_t* kv_lens, int batch, int groups, int64_t capacity,
                      int split_tokens, int max_splits) {
    while (seq < batch) {
      if (item < first_item + static_cast<int64_t>(n_splits) * groups) return true;
      first_item += static_cast<int64_t>(n_splits) * groups;
      if (++seq < batch) load(kv_lens, capacity, split_tokens, max_splits);
    }
    return false;
  }
  // The split and head group of `item`, once seek(item) returned true.
  FUSELM_HD int split_of(int64_t item, int groups) const { return static_cast<int>((item - first_item) / groups); }
  FUSELM_HD int group_of(int64_t item, int groups) const { return static_cast<int>((item - first_item) % groups); }

 private:
  FUSELM_HD void load(const int32_t* kv_lens, int64_t capacity, int split_tokens, int max_splits) {
    kv_len = kv_lens[seq];
    n_splits = decode_splits(kv_len, capacity, split_tokens, max_splits);
  }
};

}  // namespace fuselm
