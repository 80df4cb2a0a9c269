#include "kernels/cuda/decode_items.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace fuselm {
namespace {

struct Item {
  int seq, split, group;
  bool operator==(const Item& o) const { return std::tie(seq, split, group) == std::tie(o.seq, o.split, o.group); }
};

// CTAs per split in clusters: the power of two >= ceil(len / 128), at most the cluster; one without.
int reference_ranks(int len, int cluster) {
  int ranks = 1;
  while (ranks < cluster && ranks * 128 < len) ranks *= 2;
  return ranks;
}

// A split holds split_tokens keys with one CTA per split; in clusters, each of its ranks takes
// ceil(len / ranks) keys rounded up to 16, at most split_tokens.
int reference_split(int len, int split_tokens, int cluster) {
  if (cluster == 1) return split_tokens;
  const int ranks = reference_ranks(len, cluster);
  const int per_rank = std::min(split_tokens, std::max(16, (len + ranks - 1) / ranks + 15) / 16 * 16);
  return ranks * per_rank;
}

// The numbering the kernel relies on, written out: sequences in order, then splits, then head
// groups (fastest; in clusters, cluster / ranks of them per item, the item named by its first);
// sequences that are empty or do not fit the plan have no items.
std::vector<Item> reference_items(const std::vector<int32_t>& lens, int groups, int64_t capacity, int split_tokens,
                                  int max_splits, int cluster = 1) {
  std::vector<Item> items;
  for (int s = 0; s < static_cast<int>(lens.size()); ++s) {
    if (lens[s] <= 0 || lens[s] > capacity) continue;
    const int split = reference_split(lens[s], split_tokens, cluster);
    const int splits = (lens[s] + split - 1) / split;
    if (splits > max_splits) continue;
    const int per_item = cluster / reference_ranks(lens[s], cluster);
    for (int sp = 0; sp < splits; ++sp)
      for (int g = 0; g < groups; g += per_item) items.push_back({s, sp, g});
  }
  return items;
}

TEST(DecodeItems, LengthsOutsideThePlanHaveNoSplits) {
  const DecodeSplitRule rule{256, 1, 4};
  EXPECT_EQ(decode_splits(0, 1024, rule), 0);
  EXPECT_EQ(decode_splits(1, 1024, rule), 1);
  EXPECT_EQ(decode_splits(256, 1024, rule), 1);
  EXPECT_EQ(decode_splits(257, 1024, rule), 2);
  EXPECT_EQ(decode_splits(1024, 1024, rule), 4);
  EXPECT_EQ(decode_splits(1025, 2048, rule), 0);  // more splits than the workspace holds
  EXPECT_EQ(decode_splits(1000, 999, DecodeSplitRule{256, 1, 8}), 0);   // past the block table
  EXPECT_FALSE(decode_length_ok(1025, 2048, rule));
  EXPECT_TRUE(decode_length_ok(1024, 1024, rule));
}

// In clusters of 8, a sequence of up to 8 * split_tokens tokens is one split whose ranks (as many as
// give each >= 128 keys, a power of two) share it evenly (16-key steps); a longer one is cut into
// splits of 8 * split_tokens. Never
// more splits than one CTA per split would need, so the workspace sized for that serves both, and
// a ranks-th of them at most.
TEST(DecodeItems, ClusterSplitsFollowTheSequencesLength) {
  const DecodeSplitRule rule{256, 8, 16};
  EXPECT_EQ(decode_ranks(1, rule), 1);
  EXPECT_EQ(decode_rank_tokens(1, rule), 16);
  EXPECT_EQ(decode_ranks(128, rule), 1);
  EXPECT_EQ(decode_rank_tokens(128, rule), 128);
  EXPECT_EQ(decode_ranks(129, rule), 2);
  EXPECT_EQ(decode_rank_tokens(129, rule), 80);
  EXPECT_EQ(decode_ranks(512, rule), 4);
  EXPECT_EQ(decode_rank_tokens(512, rule), 128);
  EXPECT_EQ(decode_ranks(513, rule), 8);
  EXPECT_EQ(decode_rank_tokens(600, rule), 80);
  EXPECT_EQ(decode_rank_tokens(2048, rule), 256);
  EXPECT_EQ(decode_rank_tokens(2049, rule), 256);
  EXPECT_EQ(decode_ranks(100000, rule), 8);
  EXPECT_EQ(decode_split_tokens(600, rule), 640);
  EXPECT_EQ(decode_splits(600, 4096, rule), 1);
  EXPECT_EQ(decode_splits(2048, 4096, rule), 1);
  EXPECT_EQ(decode_splits(2049, 4096, rule), 2);
  EXPECT_EQ(decode_splits(4096, 4096, rule), 2);
  for (int len = 1; len <= 4096; ++len) {
    // At most ceil(ceil(len / split_tokens) / ranks): the launcher sizes its grid by that.
    ASSERT_LE(decode_splits(len, 4096, rule), ((len + 255) / 256 + 7) / 8) << len;
    ASSERT_GE(decode_split_tokens(len, rule) * decode_splits(len, 4096, rule), len) << len;
    ASSERT_EQ(decode_split_tokens(len, rule), reference_split(len, 256, 8)) << len;
    ASSERT_EQ(decode_ranks(len, rule), reference_ranks(len, 8)) << len;
  }
  EXPECT_EQ(decode_splits(4097, 4096, rule), 0);  // past the block table
}

// The one-pass shape the kernel computes per sequence agrees with the rules written out, for every
// cluster size, split size and length, including lengths past the block table or the split slots.
TEST(DecodeItems, SequenceShapeFollowsTheRules) {
  const int64_t capacity = 2048;
  const int max_splits = 6;
  for (int cluster : {1, 2, 4, 8})
    for (int split_tokens : {64, 256, 512}) {
      const DecodeSplitRule rule{split_tokens, cluster, max_splits};
      for (int len = 0; len <= 3000; ++len) {
        const DecodeSeqShape shape = decode_seq_shape(len, capacity, rule);
        const int split = reference_split(len, split_tokens, cluster);
        const int splits = (len + split - 1) / split;
        const int expected = len <= 0 || len > capacity || splits > max_splits ? 0 : splits;
        ASSERT_EQ(shape.ranks(), reference_ranks(len, cluster)) << cluster << " " << split_tokens << " " << len;
        ASSERT_EQ(shape.split_tokens(), split) << cluster << " " << split_tokens << " " << len;
        ASSERT_EQ(shape.n_splits, expected) << cluster << " " << split_tokens << " " << len;
        ASSERT_EQ(decode_seq_items(len, capacity, 8, rule), expected * ((8 + cluster / shape.ranks() - 1) /
                                                                         (cluster / shape.ranks())))
            << cluster << " " << split_tokens << " " << len;
        // Items of two passes (one CTA computing the ranks in turn): the same cut, a head group
        // per item, or two of a one-rank sequence.
        DecodeSplitRule two_passes = rule;
        two_passes.item_passes = 2;
        const DecodeSeqShape same = decode_seq_shape(len, capacity, two_passes);
        ASSERT_EQ(same.ranks(), shape.ranks());
        ASSERT_EQ(same.rank_tokens, shape.rank_tokens);
        ASSERT_EQ(same.n_splits, shape.n_splits);
        const int per_item = std::max(1, 2 / shape.ranks());
        ASSERT_EQ(decode_seq_items(len, capacity, 8, two_passes), expected * ((8 + per_item - 1) / per_item))
            << cluster << " " << split_tokens << " " << len;
      }
    }
}

// A window over `lens` filled one sequence at a time, as the kernel's threads fill it together.
template <int kWindow>
struct HostWindow {
  const std::vector<int32_t>& lens;
  int64_t capacity;
  int groups;
  DecodeSplitRule rule;
  int32_t ends[kWindow] = {}, window_lens[kWindow] = {};
  int fills = 0;

  // The kernel's ballot: the first sequence whose prefix passes rel.
  void locate(int64_t rel, int& i, int& before, int& len) const {
    i = 0;
    while (ends[i] <= rel) ++i;
    before = i > 0 ? ends[i - 1] : 0;
    len = window_lens[i];
  }
  int fill(int first_seq) {
    ++fills;
    int sum = 0;
    for (int i = 0; i < kWindow; ++i) {
      const int seq = first_seq + i;
      const int len = seq < static_cast<int>(lens.size()) ? lens[seq] : 0;
      if (seq < static_cast<int>(lens.size())) sum += decode_seq_items(len, capacity, groups, rule);
      ends[i] = sum;
      window_lens[i] = len;
    }
    return sum;
  }
};

// Every item is found exactly once, in order, whether a CTA walks all of them or, as CTAs do,
// skips ahead by any amount (claims from a shared counter only grow), for windows smaller and
// larger than the batch.
template <int kWindow>
void check_window_finds_every_item() {
  std::mt19937 rng(3 + kWindow);
  const int64_t capacity = 4096;
  const int split_tokens = 256, max_splits = 12;
  for (int trial = 0; trial < 100; ++trial) {
    const int cluster = trial % 2 == 0 ? 1 : 1 << (rng() % 4);  // one CTA per item, or clusters of 1-8
    const DecodeSplitRule rule{split_tokens, cluster, max_splits};
    const int batch = 1 + static_cast<int>(rng() % 20), groups = 1 + static_cast<int>(rng() % 9);
    std::vector<int32_t> lens(batch);
    for (int32_t& len : lens) {
      const int kind = static_cast<int>(rng() % 10);
      len = kind == 0 ? 0 : kind == 1 ? 3200 : 1 + static_cast<int32_t>(rng() % 3000);  // 3200: 13 splits, too many
    }
    const std::vector<Item> want = reference_items(lens, groups, capacity, split_tokens, max_splits, cluster);
    SCOPED_TRACE("window " + std::to_string(kWindow) + ", trial " + std::to_string(trial));

    HostWindow<kWindow> host{lens, capacity, groups, rule};
    auto fill = [&](int first_seq) { return host.fill(first_seq); };
    auto locate = [&](int64_t rel, int& i, int& before, int& len) { host.locate(rel, i, before, len); };
    DecodeItemWindow<kWindow> all;
    DecodeItemCursor cursor;
    all.start(batch, fill);
    std::vector<Item> got;
    for (int64_t item = 0; all.seek(item, batch, fill, locate, cursor, capacity, groups, rule);
         ++item) {
      got.push_back({cursor.seq, cursor.split_of(item), cursor.group_of(item)});
      EXPECT_EQ(cursor.kv_len, lens[cursor.seq]);
    }
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want);
    EXPECT_LE(host.fills, (batch + kWindow - 1) / kWindow);  // each window is filled once

    DecodeItemWindow<kWindow> skipping;
    skipping.start(batch, fill);
    for (int64_t item = rng() % 5;
         skipping.seek(item, batch, fill, locate, cursor, capacity, groups, rule);
         item += 1 + rng() % 7) {
      ASSERT_LT(item, static_cast<int64_t>(want.size()));
      const Item at{cursor.seq, cursor.split_of(item), cursor.group_of(item)};
      EXPECT_TRUE(at == want[item]) << "item " << item;
      EXPECT_EQ(cursor.kv_len, lens[at.seq]);
    }
  }
}

TEST(DecodeItems, WindowFindsEveryItemInOrderWhateverTheStride) {
  check_window_finds_every_item<1>();
  check_window_finds_every_item<3>();
  check_window_finds_every_item<8>();
  check_window_finds_every_item<32>();
}

TEST(DecodeItems, NoItemsWhenNoSequenceFits) {
  const std::vector<int32_t> lens{0, 0, 5000};
  const DecodeSplitRule rule{256, 1, 32};
  HostWindow<2> host{lens, 4096, 8, rule};
  auto fill = [&](int first_seq) { return host.fill(first_seq); };
  auto locate = [&](int64_t rel, int& i, int& before, int& len) { host.locate(rel, i, before, len); };
  DecodeItemWindow<2> window;
  DecodeItemCursor cursor;
  window.start(3, fill);
  EXPECT_FALSE(window.seek(0, 3, fill, locate, cursor, 4096, 8, rule));
}

}  // namespace
}  // namespace fuselm
