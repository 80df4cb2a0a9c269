#include "kernels/cuda/decode_items.h"

#include <gtest/gtest.h>

#include <random>
#include <tuple>
#include <vector>

namespace fuselm {
namespace {

struct Item {
  int seq, split, group;
  bool operator==(const Item& o) const { return std::tie(seq, split, group) == std::tie(o.seq, o.split, o.group); }
};

// The numbering the kernel relies on, written out: sequences in order, then splits, then head
// groups (fastest); sequences that are empty or do not fit the plan have no items.
std::vector<Item> reference_items(const std::vector<int32_t>& lens, int groups, int64_t capacity, int split_tokens,
                                  int max_splits) {
  std::vector<Item> items;
  for (int s = 0; s < static_cast<int>(lens.size()); ++s) {
    if (lens[s] <= 0 || lens[s] > capacity) continue;
    const int splits = (lens[s] + split_tokens - 1) / split_tokens;
    if (splits > max_splits) continue;
    for (int split = 0; split < splits; ++split)
      for (int g = 0; g < groups; ++g) items.push_back({s, split, g});
  }
  return items;
}

TEST(DecodeItems, LengthsOutsideThePlanHaveNoSplits) {
  EXPECT_EQ(decode_splits(0, 1024, 256, 4), 0);
  EXPECT_EQ(decode_splits(1, 1024, 256, 4), 1);
  EXPECT_EQ(decode_splits(256, 1024, 256, 4), 1);
  EXPECT_EQ(decode_splits(257, 1024, 256, 4), 2);
  EXPECT_EQ(decode_splits(1024, 1024, 256, 4), 4);
  EXPECT_EQ(decode_splits(1025, 2048, 256, 4), 0);  // more splits than the workspace holds
  EXPECT_EQ(decode_splits(1000, 999, 256, 8), 0);   // past the block table
  EXPECT_FALSE(decode_length_ok(1025, 2048, 256, 4));
  EXPECT_TRUE(decode_length_ok(1024, 1024, 256, 4));
}

// Every item is found exactly once, in order, whether a CTA walks all of them or, as CTAs do,
// skips ahead by any amount (claims from a shared counter only grow).
TEST(DecodeItems, CursorFindsEveryItemInOrderWhateverTheStride) {
  std::mt19937 rng(3);
  const int64_t capacity = 4096;
  const int split_tokens = 256, max_splits = 12;
  for (int trial = 0; trial < 50; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 20), groups = 1 + static_cast<int>(rng() % 9);
    std::vector<int32_t> lens(batch);
    for (int32_t& len : lens) {
      const int kind = static_cast<int>(rng() % 10);
      len = kind == 0 ? 0 : kind == 1 ? 3200 : 1 + static_cast<int32_t>(rng() % 3000);  // 3200: 13 splits, too many
    }
    const std::vector<Item> want = reference_items(lens, groups, capacity, split_tokens, max_splits);

    DecodeItemCursor all;
    all.start(lens.data(), capacity, split_tokens, max_splits);
    std::vector<Item> got;
    for (int64_t item = 0; all.seek(item, lens.data(), batch, groups, capacity, split_tokens, max_splits); ++item)
      got.push_back({all.seq, all.split_of(item, groups), all.group_of(item, groups)});
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial;
    EXPECT_TRUE(got == want) << "trial " << trial;

    DecodeItemCursor skipping;
    skipping.start(lens.data(), capacity, split_tokens, max_splits);
    for (int64_t item = rng() % 5;
         skipping.seek(item, lens.data(), batch, groups, capacity, split_tokens, max_splits);
         item += 1 + rng() % 7) {
      ASSERT_LT(item, static_cast<int64_t>(want.size()));
      const Item at{skipping.seq, skipping.split_of(item, groups), skipping.group_of(item, groups)};
      EXPECT_TRUE(at == want[item]) << "trial " << trial << ", item " << item;
      EXPECT_EQ(skipping.kv_len, lens[at.seq]);
    }
  }
}

TEST(DecodeItems, NoItemsWhenNoSequenceFits) {
  const std::vector<int32_t> lens{0, 0, 5000};
  DecodeItemCursor c;
  c.start(lens.data(), 4096, 256, 32);
  EXPECT_FALSE(c.seek(0, lens.data(), 3, 8, 4096, 256, 32));
}

}  // namespace
}  // namespace fuselm
