// The KV block allocator and the memory plan are host logic (no GPU needed); the cache's pool is
// device memory, so the KvCache tests need one.
#include "runtime/cuda/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "gpu_test_util.h"
#include "runtime/cuda/memory_plan.h"

namespace fuselm {
namespace {

TEST(KvBlockAllocator, HandsOutEveryBlockOnceAndTakesThemBack) {
  KvBlockAllocator a(10);
  std::vector<int32_t> got;
  ASSERT_TRUE(a.allocate(4, got));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_FALSE(a.allocate(7, got));  // all or nothing
  EXPECT_EQ(a.free_count(), 6);
  ASSERT_TRUE(a.allocate(6, got));
  EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()).size(), 10u);
  EXPECT_EQ(a.free_count(), 0);
  a.release(std::span<const int32_t>(got.data(), 3));
  EXPECT_EQ(a.free_count(), 3);
  std::vector<int32_t> again;
  ASSERT_TRUE(a.allocate(3, again));
  EXPECT_EQ(again, (std::vector<int32_t>{0, 1, 2}));
}

ModelConfig config() {
  ModelConfig c;
  c.hidden_size = 256;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.intermediate_size = 700;
  c.vocab_size = 32001;
  c.max_position_embeddings = 100000;
  return c;
}

TEST(MemoryPlan, SlicesAreAlignedDisjointAndLargeEnough) {
  EngineOptions o;
  o.dtype = DType::BF16;
  o.max_batch = 8;
  o.max_prefill_tokens = 100;
  const StepLimits l = make_step_limits(config(), o, 16);
  EXPECT_EQ(l.max_seq_len, kDefaultMaxSeqLenCap);  // the model's 100000, capped
  EXPECT_EQ(l.max_blocks_per_seq, kDefaultMaxSeqLenCap / 16);
  EXPECT_EQ(l.max_tokens, 100);
  const MemoryPlan p = plan_memory(config(), DType::BF16, l, 1 << 20, 12345);
  const ActivationPlan& a = p.activations;
  std::vector<ArenaSlice> slices = {a.residual, a.normed, a.qkv, a.q, a.attn_out, a.proj, a.gate_up, a.ffn_act,
                                    a.head_rows, a.head_normed, a.logits, a.gemm_workspace, a.attention_workspace};
  std::sort(slices.begin(), slices.end(), [](auto& x, auto& y) { return x.offset < y.offset; });
  for (size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i].offset % 256, 0u);
    if (i + 1 < slices.size()) EXPECT_LE(slices[i].offset + slices[i].bytes, slices[i + 1].offset);
  }
  EXPECT_LE(slices.back().offset + slices.back().bytes, a.total);
  EXPECT_EQ(a.residual.bytes, 100u * 256 * 4);
  EXPECT_EQ(a.qkv.bytes, 100u * (256 + 2 * 128) * 2);
  EXPECT_EQ(a.logits.bytes, 8u * 32001 * 4);
  EXPECT_EQ(p.inputs.block_tables.bytes, 8u * l.max_blocks_per_seq * 4);
  EXPECT_EQ(kv_block_bytes(config(), DType::BF16, 16), 3u * 2 * 2 * 16 * 64 * 2);
  // Without the unfused gate/up rows (SwiGLU in the prefill GEMM's output pass) that slice is empty.
  EXPECT_EQ(a.gate_up.bytes, 100u * 2 * config().intermediate_size * 2);
  const MemoryPlan fused = plan_memory(config(), DType::BF16, l, 1 << 20, 12345, /*gate_up_rows=*/false);
  EXPECT_EQ(fused.activations.gate_up.bytes, 0u);
  EXPECT_EQ(fused.activations.total, a.total - (a.gate_up.bytes + 255) / 256 * 256);
}

TEST(MemoryPlan, OptionErrorsNameTheOption) {
  EngineOptions o;
  o.dtype = DType::F32;
  try {
    make_step_limits(config(), o, 16);
    FAIL() << "f32 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype bf16"), std::string::npos) << e.what();
  }
  o.dtype = DType::BF16;
  EXPECT_THROW(make_step_limits(config(), o, 12), Error);  // not a power of two
  o.max_batch = 0;
  EXPECT_THROW(make_step_limits(config(), o, 16), Error);
  o.max_batch = 4;
  o.max_seq_len = 200000;  // over the model's: capped to it
  EXPECT_EQ(make_step_limits(config(), o, 16).max_seq_len, 100000);
}

TEST(KvCache, ReservesAllOrNothingAndFreesOnRemoval) {
  FUSELM_REQUIRE_GPU();
  KvCache cache(config(), DType::BF16, 16, 8, 64);
  const int a = cache.add_sequence(), b = cache.add_sequence();
  const std::pair<int, int> grow_a[] = {{a, 33}};  // 3 blocks
  cache.reserve(grow_a);
  cache.set_length(a, 33);
  EXPECT_EQ(cache.blocks(a).size(), 3u);
  EXPECT_EQ(cache.stats().free_blocks, 5);
  const std::pair<int, int> too_much[] = {{a, 48}, {b, 90}};  // 0 + 6 blocks, 5 free
  try {
    cache.reserve(too_much);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 6 more blocks of 16 tokens, 5 are free of 8"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.stats().free_blocks, 5);
  EXPECT_TRUE(cache.blocks(b).empty());
  std::vector<int32_t> row(64, -1);
  cache.write_block_table(a, row.data());
  EXPECT_EQ(std::vector<int32_t>(row.begin(), row.begin() + 3), cache.blocks(a));
  EXPECT_TRUE(std::all_of(row.begin() + 3, row.end(), [](int32_t v) { return v == 0; }));
  cache.remove_sequence(a);
  EXPECT_EQ(cache.stats().free_blocks, 8);
  EXPECT_THROW(cache.length(a), Error);
  const PagedKvView v0 = cache.layer_view(0, nullptr), v1 = cache.layer_view(1, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v0.k) % 256, 0u);
  EXPECT_GE(static_cast<std::byte*>(v1.k) - static_cast<std::byte*>(v0.v), 8 * 2 * 16 * 64 * 2);
}

}  // namespace
}  // namespace fuselm
