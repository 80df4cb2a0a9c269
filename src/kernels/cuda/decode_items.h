#pragma once
// The work items of split-KV decode attention (attention_decode.cu) and the order in which its CTAs
// take them. Host-compilable, so the enumeration is tested without a GPU.
//
// An item is one split (DecodeSplitRule) of one sequence for one head
// group (the up to 16 query heads that share a KV head). A step's items are numbered sequence by
// sequence; within a sequence, split by split, and within a split, head group by head group (head
// group fastest). So CTAs that run at the same time read the same KV blocks, which hold every KV
// head of their tokens: in a split-fastest order, each CTA reading one head's 4 KB of every block,
// a 32k-token sequence took 55% longer (docs/kernels/attention.md).
#include <cstdint>

#include "core/hd.h"

namespace fuselm {

// How a sequence's cache is cut into splits. One CTA per split (ranks == 1): every split is
// split_tokens long. A cluster of `ranks` CTAs per split: rank r attends keys r * rank_tokens ..
// (r + 1) * rank_tokens - 1 of the split, rank_tokens following the sequence's own length
// (ceil(kv_len / ranks) rounded up to 16 keys, at most split_tokens), so a sequence of up to
// ranks * split_tokens tokens is one split, merged inside its cluster, and a longer one is cut
// into splits of ranks * split_tokens tokens. Either way the cut depends on the sequence alone.
struct DecodeSplitRule {
  int split_tokens = 0;  // keys per CTA at most (a whole split when ranks == 1)
  int ranks = 1;         // CTAs per split (the cluster size)
  int max_splits = 0;    // split slots per sequence in the workspace
};

FUSELM_HD int decode_rank_tokens(int kv_len, const DecodeSplitRule& rule) {
  if (rule.ranks <= 1) return rule.split_tokens;
  const int even = (kv_len + rule.ranks - 1) / rule.ranks;
  const int rounded = even <= 16 ? 16 : (even + 15) / 16 * 16;
  return rounded < rule.split_tokens ? rounded : rule.split_tokens;
}

FUSELM_HD int decode_split_tokens(int kv_len, const DecodeSplitRule& rule) {
  return rule.ranks * decode_rank_tokens(kv_len, rule);
}

// Whether a sequence of kv_len tokens fits the plan: within its block table's capacity and within
// the workspace's split slots. The kernel writes NaN for a sequence that does not.
FUSELM_HD bool decode_length_ok(int kv_len, int64_t capacity, const DecodeSplitRule& rule) {
  if (kv_len > capacity) return false;
  const int split = decode_split_tokens(kv_len, rule);
  return (static_cast<int64_t>(kv_len) + split - 1) / split <= rule.max_splits;
}

// Splits of a sequence with work to do: 0 for an empty sequence or one that does not fit the plan.
FUSELM_HD int decode_splits(int kv_len, int64_t capacity, const DecodeSplitRule& rule) {
  if (kv_len <= 0 || !decode_length_ok(kv_len, capacity, rule)) return 0;
  const int split = decode_split_tokens(kv_len, rule);
  return (kv_len + split - 1) / split;
}

// Maps item numbers to (sequence, split, head group). A CTA asks for its items in increasing order,
// so the cursor only moves forward: reading the lengths costs O(batch + items) per CTA.
struct DecodeItemCursor {
  int seq = 0, n_splits = 0, kv_len = 0;  // the current sequence
  int64_t first_item = 0;                 // number of its first item

  // Starts at sequence 0 (batch > 0).
  FUSELM_HD void start(const int32_t* kv_lens, int64_t capacity, const DecodeSplitRule& rule) {
    seq = 0;
    first_item = 0;
    load(kv_lens, capacity, rule);
  }
  // Moves to the sequence that holds `item` (>= every item asked before); false past the last item.
  FUSELM_HD bool seek(int64_t item, const int32_t* kv_lens, int batch, int groups, int64_t capacity,
                      const DecodeSplitRule& rule) {
    while (seq < batch) {
      if (item < first_item + static_cast<int64_t>(n_splits) * groups) return true;
      first_item += static_cast<int64_t>(n_splits) * groups;
      if (++seq < batch) load(kv_lens, capacity, rule);
    }
    return false;
  }
  // The split and head group of `item`, once seek(item) returned true.
  FUSELM_HD int split_of(int64_t item, int groups) const { return static_cast<int>((item - first_item) / groups); }
  FUSELM_HD int group_of(int64_t item, int groups) const { return static_cast<int>((item - first_item) % groups); }

 private:
  FUSELM_HD void load(const int32_t* kv_lens, int64_t capacity, const DecodeSplitRule& rule) {
    kv_len = kv_lens[seq];
    n_splits = decode_splits(kv_len, capacity, rule);
  }
};

}  // namespace fuselm
