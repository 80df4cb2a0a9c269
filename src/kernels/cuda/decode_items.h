#pragma once
// The work items of split-KV decode attention (attention_decode.cu) and the order in which its CTAs
// take them. Host-compilable, so the enumeration is tested without a GPU.
//
// An item is one split (DecodeSplitRule) of one sequence for one head group (the up to 16 query
// heads that share a KV head), or in clusters for a few consecutive head groups. A step's items are
// numbered sequence by sequence; within a sequence, split by split, and within a split, head group
// by head group (head group fastest). So CTAs that run at the same time read the same KV blocks, which hold every KV
// head of their tokens: in a split-fastest order, each CTA reading one head's 4 KB of every block,
// a 32k-token sequence took 55% longer (docs/kernels/attention.md).
#include <cstdint>

#include "core/hd.h"

namespace fuselm {

// A CTA stages the block numbers of its keys in shared memory per item, so a split may span at most
// this many KV blocks: split_tokens / block_size + 1 (a split may start inside a block).
inline constexpr int kDecodeMaxSplitBlocks = 128;

// A CTA of a cluster attends at least this many keys where the sequence allows (fewer ranks for
// shorter sequences), so that each CTA's load latency is spent on a worthwhile share of them.
inline constexpr int kMinRankKeys = 128;

// How a sequence's cache is cut into splits, and who attends them. The cut depends on the sequence
// alone (its length, the split size and the cluster size), never on the batch.
//
// One CTA per item (cluster == 1): every split is split_tokens long, and an item is one split of
// one head group.
//
// Clusters of `cluster` CTAs: a sequence's splits are attended by `ranks` CTAs each, ranks =
// the power of two >= ceil(kv_len / min_rank_keys), at most `cluster`; rank r of a split attends its
// keys r * rank_tokens .. (r + 1) * rank_tokens - 1, rank_tokens = ceil(kv_len / ranks) rounded up
// to 16 keys, at most split_tokens. So a sequence of up to cluster * split_tokens tokens is one
// split, merged by its ranks in distributed shared memory, and a longer one is cut into splits of
// cluster * split_tokens tokens. An item is what one cluster takes: one split of cluster / ranks
// head groups (consecutive), one per `ranks` CTAs, so short sequences fill the cluster with head
// groups instead of leaving CTAs idle.
struct DecodeSplitRule {
  int split_tokens = 0;  // keys per CTA at most (a whole split when cluster == 1)
  int cluster = 1;       // CTAs per cluster: 1, or a power of two
  int max_splits = 0;    // split slots per sequence in the workspace
  int min_rank_keys = kMinRankKeys;
  // CTA passes (rank stretches) an item holds: a cluster's worth (0 = `cluster`), or fewer where one
  // CTA computes the ranks in turn (attention_decode_stacked.cu): then an item takes
  // max(1, item_passes / ranks) head groups. The cut itself does not change.
  int item_passes = 0;
};

// log2 of a power of two. The counts below divide by powers of two (ranks, the cluster, head groups
// per item) with shifts: the kernel's CTAs evaluate them before their first loads, and a division
// is a long instruction sequence there.
FUSELM_HD int log2_of_pow2(int v) {
  int shift = 0;
  while ((1 << shift) < v) ++shift;
  return shift;
}

// How one sequence's cache is cut, from its length and the plan alone. Computed once per sequence
// and handed on: the kernel's CTAs work it out before their first loads, where every inlined copy
// of these few lines is code fetched cold (docs/kernels/attention.md, session 11).
struct DecodeSeqShape {
  int rank_shift = 0;   // log2 of the CTAs that attend one split
  int rank_tokens = 0;  // keys per rank (the last ranks of the last split may have fewer, or none)
  int n_splits = 0;     // 0 for an empty sequence or one that does not fit the plan
  FUSELM_HD int ranks() const { return 1 << rank_shift; }
  FUSELM_HD int split_tokens() const { return rank_tokens << rank_shift; }
};

FUSELM_HD DecodeSeqShape decode_seq_shape(int kv_len, int64_t capacity, const DecodeSplitRule& rule) {
  DecodeSeqShape shape;
  while ((1 << shape.rank_shift) < rule.cluster &&
         (static_cast<int64_t>(rule.min_rank_keys) << shape.rank_shift) < kv_len)
    ++shape.rank_shift;
  if (rule.cluster <= 1) {
    shape.rank_tokens = rule.split_tokens;
  } else {
    const int even = (kv_len + shape.ranks() - 1) >> shape.rank_shift;
    const int rounded = even <= 16 ? 16 : (even + 15) / 16 * 16;
    shape.rank_tokens = rounded < rule.split_tokens ? rounded : rule.split_tokens;
  }
  // Within the block table's capacity and within the workspace's split slots (ceil(kv_len / split)
  // <= max_splits, without a 64-bit division); the kernel writes NaN for a sequence that does not fit.
  const int split = shape.split_tokens();
  if (kv_len > 0 && kv_len <= capacity && static_cast<int64_t>(split) * rule.max_splits >= kv_len)
    shape.n_splits = (kv_len + split - 1) / split;
  return shape;
}

// CTAs that attend one split of a sequence of kv_len tokens.
FUSELM_HD int decode_ranks(int kv_len, const DecodeSplitRule& rule) {
  return decode_seq_shape(kv_len, kv_len, rule).ranks();
}

// Keys per rank of a split (the last ranks of a sequence's last split may have fewer, or none).
FUSELM_HD int decode_rank_tokens(int kv_len, const DecodeSplitRule& rule) {
  return decode_seq_shape(kv_len, kv_len, rule).rank_tokens;
}

FUSELM_HD int decode_split_tokens(int kv_len, const DecodeSplitRule& rule) {
  return decode_seq_shape(kv_len, kv_len, rule).split_tokens();
}

// Whether a sequence of kv_len tokens fits the plan: within its block table's capacity and within
// the workspace's split slots. The kernel writes NaN for a sequence that does not.
FUSELM_HD bool decode_length_ok(int kv_len, int64_t capacity, const DecodeSplitRule& rule) {
  if (kv_len > capacity) return false;
  return static_cast<int64_t>(decode_split_tokens(kv_len, rule)) * rule.max_splits >= kv_len;
}

// Splits of a sequence with work to do: 0 for an empty sequence or one that does not fit the plan.
FUSELM_HD int decode_splits(int kv_len, int64_t capacity, const DecodeSplitRule& rule) {
  return decode_seq_shape(kv_len, capacity, rule).n_splits;
}

// log2 of the head groups one item (one cluster) takes for a sequence of this shape: cluster / ranks
// (item_passes / ranks, at least 1, where item_passes is set).
FUSELM_HD int decode_per_item_shift(const DecodeSeqShape& shape, const DecodeSplitRule& rule) {
  const int shift = log2_of_pow2(rule.item_passes > 0 ? rule.item_passes : rule.cluster) - shape.rank_shift;
  return shift > 0 ? shift : 0;
}

// Items of a sequence of the given shape: its splits, times the items each split takes (the head
// groups over the head groups per item).
FUSELM_HD int decode_items_of(const DecodeSeqShape& shape, int groups, const DecodeSplitRule& rule) {
  const int per_item_shift = decode_per_item_shift(shape, rule);
  return shape.n_splits * ((groups + (1 << per_item_shift) - 1) >> per_item_shift);
}

FUSELM_HD int decode_seq_items(int kv_len, int64_t capacity, int groups, const DecodeSplitRule& rule) {
  return decode_items_of(decode_seq_shape(kv_len, capacity, rule), groups, rule);
}

// Where an item is: its sequence (and that sequence's length and shape of work), from which the
// item's split and first head group follow.
struct DecodeItemCursor {
  int seq = 0, n_splits = 0, kv_len = 0;  // the item's sequence
  int ranks = 1;                          // CTAs per split of it
  int rank_shift = 0;                     // log2(ranks)
  int rank_tokens = 0;                    // keys per rank
  int groups_per_item = 1;                // head groups per item: cluster / ranks
  int64_t first_item = 0;                 // number of its first item

  // Places the cursor at sequence `s` of `len` tokens, whose first item is `first`.
  FUSELM_HD void at(int s, int len, int64_t first, int64_t capacity, int groups, const DecodeSplitRule& rule) {
    seq = s;
    first_item = first;
    kv_len = len;
    const DecodeSeqShape shape = decode_seq_shape(len, capacity, rule);
    n_splits = shape.n_splits;
    rank_shift = shape.rank_shift;
    rank_tokens = shape.rank_tokens;
    ranks = shape.ranks();
    const int per_item_shift = decode_per_item_shift(shape, rule);
    groups_per_item = 1 << per_item_shift;
    items_per_split = (groups + groups_per_item - 1) >> per_item_shift;
  }
  // The split and first head group of an item of this sequence (a sequence's items fit an int).
  FUSELM_HD int split_of(int64_t item) const { return static_cast<int>(item - first_item) / items_per_split; }
  FUSELM_HD int group_of(int64_t item) const {
    return static_cast<int>(item - first_item) % items_per_split * groups_per_item;
  }

 private:
  int items_per_split = 1;
};

// Finds items among a batch's sequences kWindow sequences at a time. Two callbacks hold the window:
// `fill(first_seq)` takes in sequences first_seq .. first_seq + kWindow - 1 (no items past the
// batch) and returns their items (decode_seq_items summed); `locate(rel, i, before, len)` finds the
// window's sequence i that holds its item number `rel` (< the window's items), the items of the
// window's sequences before it and its length. In the kernel a warp's lanes take one sequence each
// (a prefix sum by shuffles, a ballot to locate): one round trip per window instead of one per
// sequence. Items must be asked for in increasing order (claims only grow).
template <int kWindow>
struct DecodeItemWindow {
  int first_seq = 0;       // the window's first sequence
  int64_t first_item = 0;  // the number of its first item
  int items = 0;           // its items

  template <class Fill>
  FUSELM_HD void start(int batch, Fill&& fill) {
    first_seq = 0;
    first_item = 0;
    items = batch > 0 ? fill(0) : 0;
  }
  // Places `cursor` at the sequence that holds `item`; false past the batch's last item.
  template <class Fill, class Locate>
  FUSELM_HD bool seek(int64_t item, int batch, Fill&& fill, Locate&& locate, DecodeItemCursor& cursor,
                      int64_t capacity, int groups, const DecodeSplitRule& rule) {
    while (item >= first_item + items) {
      if (first_seq + kWindow >= batch) return false;
      first_item += items;
      first_seq += kWindow;
      items = fill(first_seq);
    }
    int i = 0, before = 0, len = 0;
    locate(item - first_item, i, before, len);
    cursor.at(first_seq + i, len, first_item + before, capacity, groups, rule);
    return true;
  }
};

}  // namespace fuselm
