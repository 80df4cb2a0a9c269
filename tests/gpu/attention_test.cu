// Prefill and decode attention against the CPU reference (cpu::attention on fp32 copies of the
// bf16/fp16 inputs), over a paged cache whose blocks are shuffled across the pool. Unused pool
// slots, the spare block that pads the block tables and the outputs are all NaN before each run,
// so a read outside a sequence's cache or an unwritten output shows up as NaN.
//
// Tolerances (fp32 accumulation; the error is the rounding of P and of the output to 16 bits):
//   bf16: ||out - ref|| / ||ref|| <= 1e-2, max |out - ref| <= 2e-2
//   fp16: ||out - ref|| / ||ref|| <= 2e-3, max |out - ref| <= 4e-3
//
// Timings: the DISABLED_ benchmarks print kernel times (CUDA events, median of 20 runs):
//   gpu_attention_test --gtest_also_run_disabled_tests --gtest_filter='AttentionBench.*'
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention.h"
#include "gpu/attention_test_util.h"
#include "gpu/gpu_timing.h"
#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/pdl.cuh"

namespace fuselm {
namespace {

using namespace attention_test;

struct Tolerance {
  double rel_l2;
  double max_abs;
};
Tolerance tolerance(DType t) { return t == DType::BF16 ? Tolerance{1e-2, 2e-2} : Tolerance{2e-3, 4e-3}; }

void expect_close(DType t, const std::vector<uint16_t>& out, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(out.size(), ref.size()) << what;
  const ErrorStats e = compare(t, out, ref);
  const Tolerance tol = tolerance(t);
  EXPECT_EQ(e.non_finite, 0) << what << ": outputs left unwritten (NaN poison) or non-finite";
  EXPECT_LE(e.rel_l2, tol.rel_l2) << what;
  EXPECT_LE(e.max_abs, tol.max_abs) << what;
}

// Reference for one sequence: its new tokens are the last q_len positions of kv_len.
std::vector<float> reference(DType t, const std::vector<uint16_t>& q_bits, const SeqKv& s, int q_len, int n_heads,
                             int n_kv_heads, int head_dim, float scale) {
  const std::vector<float> q = to_f32(t, q_bits), k = to_f32(t, s.k), v = to_f32(t, s.v);
  std::vector<int32_t> positions(q_len);
  for (int i = 0; i < q_len; ++i) positions[i] = s.kv_len - q_len + i;
  std::vector<float> out(static_cast<size_t>(q_len) * n_heads * head_dim);
  cpu::attention(q.data(), k.data(), v.data(), positions.data(), q_len, s.kv_len, n_heads, n_kv_heads, head_dim, scale,
                 out.data());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Prefill

using attention_detail::DecodeVariant;
using attention_detail::PrefillVariant;

// Every instantiated variant is checked on the same inputs; the public launchers pick one.
const std::vector<PrefillVariant> kPrefillVariants{{16, 64}, {32, 64}, {32, 32}};
// Stage counts, and grids of 1, 3 and 7 CTAs that each take many splits (one wave by default); then
// the clusters' cut computed by one CTA per item (stacked; with one rank per split the same kernel
// as the others): same bits.
const std::vector<DecodeVariant> kDecodeVariants{{2},          {3},          {4},          {2, 1},
                                                 {4, 3},       {3, 7},       {2, 0, true}, {3, 0, true},
                                                 {2, 5, true}, {2, 1, true}};

// Whether the test runs `variant` for this shape: a stacked one only where its shared memory fits.
bool runs(const DecodeVariant& variant, const AttentionShape& shape, const DecodeAttentionPlan& plan, int block_size) {
  return !variant.stacked || plan.cluster_ranks == 1 ||
         attention_detail::decode_stacked_fits(variant, shape, plan, block_size);
}

// CTAs per split: one, and where the GPU has clusters 2 and 8 (the bits depend on it; every one is
// checked against the reference, and the variants above against each other at each).
std::vector<int> decode_cluster_ranks() {
  if (!clusters_supported()) return {1};
  return {1, 2, 8};
}

std::string variant_str(const PrefillVariant& v) {
  return "rows_per_warp=" + std::to_string(v.rows_per_warp) + " keys_per_tile=" + std::to_string(v.keys_per_tile);
}

struct PrefillCase {
  DType dtype;
  int head_dim;
  int group;
  int block_size;
};

std::string prefill_case_name(const testing::TestParamInfo<PrefillCase>& info) {
  const PrefillCase& c = info.param;
  return dtype_str(c.dtype) + "_hd" + std::to_string(c.head_dim) + "_g" + std::to_string(c.group) + "_bs" +
         std::to_string(c.block_size);
}

// Runs prefill over a ragged batch and checks each sequence against the CPU reference.
void run_prefill_check(DType dtype, int head_dim, int n_kv_heads, int group, int block_size,
                       const std::vector<int>& q_lens, const std::vector<int>& prefixes, uint32_t seed) {
  std::mt19937 rng(seed);
  const int n_heads = n_kv_heads * group;
  AttentionShape shape{n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
  const int batch = static_cast<int>(q_lens.size());
  std::vector<SeqKv> seqs;
  std::vector<std::vector<uint16_t>> qs;
  std::vector<int32_t> q_starts{0};
  int max_q_len = 0;
  for (int b = 0; b < batch; ++b) {
    seqs.push_back(random_seq_kv(dtype, prefixes[b] + q_lens[b], n_kv_heads, head_dim, rng));
    // Amplitude 3 puts the scores' standard deviation near 1: peaked enough to exercise rescaling.
    qs.push_back(random_bits(dtype, static_cast<size_t>(q_lens[b]) * n_heads * head_dim, 3.0f, rng));
    q_starts.push_back(q_starts.back() + q_lens[b]);
    max_q_len = std::max(max_q_len, q_lens[b]);
  }
  std::vector<uint16_t> q_all;
  for (const auto& q : qs) q_all.insert(q_all.end(), q.begin(), q.end());

  PagedCache cache;
  std::vector<const SeqKv*> ptrs;
  for (const auto& s : seqs) ptrs.push_back(&s);
  build_paged_cache(cache, ptrs, PagedKvLayout{block_size, n_kv_heads, head_dim}, rng);
  DeviceBuffer<uint16_t> q_dev(q_all);
  DeviceBuffer<uint16_t> out_dev(std::vector<uint16_t>(q_all.size(), kNanBits));
  DeviceBuffer<int32_t> q_starts_dev(q_starts);
  ASSERT_TRUE(q_dev.get() && out_dev.get() && cache.k_pool.get() && cache.block_tables.get());

  std::vector<std::vector<uint16_t>> outs;
  for (const PrefillVariant& variant : kPrefillVariants) {
    ASSERT_TRUE(out_dev.upload(std::vector<uint16_t>(q_all.size(), kNanBits)));
    ASSERT_STATUS_OK(attention_detail::prefill_attention_variant(variant, q_dev.get(), out_dev.get(), dtype, shape,
                                                                 cache.view(), q_starts_dev.get(), cache.kv_lens.get(),
                                                                 batch, max_q_len, nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    outs.push_back(out_dev.download());
    ASSERT_EQ(outs.back().size(), q_all.size());
  }

  for (int b = 0; b < batch; ++b) {
    const std::vector<float> ref =
        reference(dtype, qs[b], seqs[b], q_lens[b], n_heads, n_kv_heads, head_dim, shape.scale);
    const size_t row = static_cast<size_t>(n_heads) * head_dim;
    for (size_t v = 0; v < kPrefillVariants.size(); ++v) {
      const std::vector<uint16_t> got(outs[v].begin() + q_starts[b] * row, outs[v].begin() + q_starts[b + 1] * row);
      expect_close(dtype, got, ref,
                   "sequence " + std::to_string(b) + " (q_len=" + std::to_string(q_lens[b]) +
                       ", prefix=" + std::to_string(prefixes[b]) + "), " + variant_str(kPrefillVariants[v]));
    }
  }
}

class PrefillTest : public testing::TestWithParam<PrefillCase> {};

// Every (q_len, cached prefix) pair from {1, 7, 64, 200} x {0, 33, 300} in one shuffled ragged batch.
TEST_P(PrefillTest, RaggedBatchMatchesCpuReference) {
  REQUIRE_CUDA_DEVICE();
  const PrefillCase& c = GetParam();
  std::vector<std::pair<int, int>> pairs;
  for (int q_len : {1, 7, 64, 200})
    for (int prefix : {0, 33, 300}) pairs.emplace_back(q_len, prefix);
  std::mt19937 rng(1234 + c.head_dim + 10 * c.group + c.block_size);
  std::shuffle(pairs.begin(), pairs.end(), rng);
  std::vector<int> q_lens, prefixes;
  for (auto [q_len, prefix] : pairs) {
    q_lens.push_back(q_len);
    prefixes.push_back(prefix);
  }
  run_prefill_check(c.dtype, c.head_dim, /*n_kv_heads=*/2, c.group, c.block_size, q_lens, prefixes, rng());
}

std::vector<PrefillCase> all_prefill_cases() {
  std::vector<PrefillCase> cases;
  for (DType t : {DType::BF16, DType::F16})
    for (int hd : {64, 128})
      for (int g : {1, 4, 8})
        for (int bs : {16, 32}) cases.push_back({t, hd, g, bs});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Attention, PrefillTest, testing::ValuesIn(all_prefill_cases()), prefill_case_name);

// ---------------------------------------------------------------------------------------------
// Decode

// Runs decode attention (the public launcher, or `variant`) on `seqs` (in that order) and returns
// the output bits.
std::vector<uint16_t> run_decode(DType dtype, const AttentionShape& shape, int block_size,
                                 const DecodeAttentionPlan& plan, const std::vector<const SeqKv*>& seqs,
                                 const std::vector<uint16_t>& q, std::mt19937& rng,
                                 const DecodeVariant* variant = nullptr, const std::vector<int32_t>* lens = nullptr) {
  PagedCache cache;
  build_paged_cache(cache, seqs, PagedKvLayout{block_size, shape.n_kv_heads, shape.head_dim}, rng);
  if (lens && !cache.kv_lens.upload(*lens)) return {};
  const int batch = static_cast<int>(seqs.size());
  DeviceBuffer<uint16_t> q_dev(q);
  DeviceBuffer<uint16_t> out_dev(std::vector<uint16_t>(q.size(), kNanBits));
  const size_t ws_bytes = decode_attention_workspace_bytes(shape, plan, batch);
  DeviceBuffer<uint8_t> workspace(ws_bytes);
  // Poison the workspace's partials: the merge must read only partials this launch wrote.
  if (cudaMemset(workspace.get(), 0xff, ws_bytes) != cudaSuccess) return {};
  EXPECT_TRUE(decode_attention_init_workspace(workspace.get(), shape, plan, batch, nullptr).ok());
  Status s = variant ? attention_detail::decode_attention_variant(*variant, q_dev.get(), out_dev.get(), dtype, shape,
                                                                  cache.view(), cache.kv_lens.get(), batch, plan,
                                                                  workspace.get(), nullptr)
                     : decode_attention(q_dev.get(), out_dev.get(), dtype, shape, cache.view(), cache.kv_lens.get(),
                                        batch, plan, workspace.get(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // The launch leaves every counter at zero, ready for the next: the work counters of the 16-byte
  // header and the merge counters (a word per head group at the head of each sequence's record).
  const std::vector<uint8_t> ws = workspace.download();
  const size_t record = (ws_bytes - 16) / batch;
  const int groups = shape.n_kv_heads * ((shape.n_heads / shape.n_kv_heads + 15) / 16);
  for (int i = 0; i < 4; ++i) {
    int32_t counter = 0;
    std::memcpy(&counter, ws.data() + i * 4, 4);
    EXPECT_EQ(counter, 0) << "header word " << i;
  }
  for (int b = 0; b < batch; ++b)
    for (int g = 0; g < groups; ++g) {
      int32_t counter = 0;
      std::memcpy(&counter, ws.data() + 16 + b * record + g * 4, 4);
      EXPECT_EQ(counter, 0) << "merge counter of sequence " << b << ", group " << g;
    }
  return out_dev.download();
}

struct DecodeCase {
  DType dtype;
  int head_dim;
  int group;
};

std::string decode_case_name(const testing::TestParamInfo<DecodeCase>& info) {
  const DecodeCase& c = info.param;
  return dtype_str(c.dtype) + "_hd" + std::to_string(c.head_dim) + "_g" + std::to_string(c.group);
}

void check_decode(DType dtype, int head_dim, int n_kv_heads, int group, int block_size, int split_tokens,
                  const std::vector<int>& lens, std::mt19937& rng, int ranks) {
  const int n_heads = n_kv_heads * group;
  const AttentionShape shape{n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
  const int max_len = *std::max_element(lens.begin(), lens.end());
  DecodeAttentionPlan plan{split_tokens, (max_len + split_tokens - 1) / split_tokens};
  plan.cluster_ranks = ranks;
  RandomSeqs data(dtype, lens, n_kv_heads, head_dim, rng);
  const auto& [seqs, ptrs] = data;
  const size_t row = static_cast<size_t>(n_heads) * head_dim;
  const std::vector<uint16_t> q = random_bits(dtype, lens.size() * row, 3.0f, rng);
  std::vector<std::vector<uint16_t>> outs;
  std::vector<DecodeVariant> ran;
  for (const DecodeVariant& variant : kDecodeVariants) {
    if (!runs(variant, shape, plan, block_size)) continue;
    ran.push_back(variant);
    outs.push_back(run_decode(dtype, shape, block_size, plan, ptrs, q, rng, &variant));
    ASSERT_EQ(outs.back().size(), q.size());
    // Every variant adds the same numbers in the same order: the bits may not change.
    EXPECT_TRUE(outs.back() == outs.front())
        << "stages " << variant.stages << ", ctas " << variant.ctas << (variant.stacked ? ", stacked" : "")
        << " differ bitwise from stages "
        << kDecodeVariants.front().stages << " (batch " << lens.size() << ", split " << split_tokens << ", ranks "
        << ranks << ")";
  }
  for (size_t b = 0; b < lens.size(); ++b) {
    const std::vector<uint16_t> q_b(q.begin() + b * row, q.begin() + (b + 1) * row);
    const std::vector<float> ref = reference(dtype, q_b, seqs[b], 1, n_heads, n_kv_heads, head_dim, shape.scale);
    for (size_t v = 0; v < outs.size(); ++v) {
      const std::vector<uint16_t> got(outs[v].begin() + b * row, outs[v].begin() + (b + 1) * row);
      expect_close(dtype, got, ref,
                   "batch " + std::to_string(lens.size()) + ", sequence " + std::to_string(b) +
                       " (kv_len=" + std::to_string(lens[b]) + ", block_size=" + std::to_string(block_size) +
                       ", split_tokens=" + std::to_string(split_tokens) + ", ranks=" + std::to_string(ranks) +
                       ", stages=" + std::to_string(ran[v].stages) + ", ctas=" + std::to_string(ran[v].ctas) +
                       (ran[v].stacked ? ", stacked)" : ")"));
    }
  }
}

// kv_len 0 gives zeros and a length past the block table NaN, whichever CTA writes them (every
// grid size), next to sequences with work and without reading outside their tables.
TEST(AttentionDecode, EmptyAndInconsistentLengths) {
  REQUIRE_CUDA_DEVICE();
  const DType dtype = DType::BF16;
  std::mt19937 rng(5);
  const int n_kv_heads = 2, group = 4, head_dim = 128, n_heads = n_kv_heads * group;
  const AttentionShape shape{n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
  std::vector<SeqKv> seqs;
  for (int len : {40, 20, 70, 20}) seqs.push_back(random_seq_kv(dtype, len, n_kv_heads, head_dim, rng));
  const std::vector<const SeqKv*> ptrs{&seqs[0], &seqs[1], &seqs[2], &seqs[3]};
  // Split 32, 3 slots: 70 tokens fit the tables (5 blocks of 16), 97 would not.
  const std::vector<int32_t> lens{40, 0, 70, 97};
  const size_t row = static_cast<size_t>(n_heads) * head_dim;
  const std::vector<uint16_t> q = random_bits(dtype, 4 * row, 3.0f, rng);
  for (int ranks : decode_cluster_ranks())
  for (const DecodeVariant& variant : kDecodeVariants) {
    DecodeAttentionPlan plan{32, 3};
    plan.cluster_ranks = ranks;
    if (!runs(variant, shape, plan, 16)) continue;
    const std::vector<uint16_t> out = run_decode(dtype, shape, 16, plan, ptrs, q, rng, &variant, &lens);
    ASSERT_EQ(out.size(), q.size());
    const std::string what = "stages " + std::to_string(variant.stages) + ", ctas " + std::to_string(variant.ctas) +
                             (variant.stacked ? ", stacked" : "") +
                             ", ranks " + std::to_string(ranks);
    for (size_t i = row; i < 2 * row; ++i) ASSERT_EQ(from_bits(dtype, out[i]), 0.0f) << what << ", kv_len 0";
    for (size_t i = 3 * row; i < 4 * row; ++i) ASSERT_TRUE(std::isnan(from_bits(dtype, out[i]))) << what << ", kv_len 97";
    for (int b : {0, 2}) {
      const std::vector<uint16_t> q_b(q.begin() + b * row, q.begin() + (b + 1) * row);
      expect_close(dtype, std::vector<uint16_t>(out.begin() + b * row, out.begin() + (b + 1) * row),
                   reference(dtype, q_b, seqs[b], 1, n_heads, n_kv_heads, head_dim, shape.scale),
                   what + ", kv_len " + std::to_string(lens[b]));
    }
  }
}

// The stacked kernel's shared memory follows the shape: where it does not fit, the launch is refused
// with the sizes, and the public launcher runs the clusters instead.
TEST(AttentionDecode, StackedRefusesWhatDoesNotFitAndTheLauncherFallsBack) {
  REQUIRE_CUDA_DEVICE();
  if (!clusters_supported()) GTEST_SKIP() << "thread-block clusters need sm_90 code on an sm_90+ GPU";
  const DType dtype = DType::BF16;
  std::mt19937 rng(8);
  const int n_kv_heads = 2, group = 16, head_dim = 128, n_heads = n_kv_heads * group;
  const AttentionShape shape{n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
  std::vector<SeqKv> seqs;
  for (int len : {300, 40}) seqs.push_back(random_seq_kv(dtype, len, n_kv_heads, head_dim, rng));
  const std::vector<const SeqKv*> ptrs{&seqs[0], &seqs[1]};
  const size_t row = static_cast<size_t>(n_heads) * head_dim;
  const std::vector<uint16_t> q = random_bits(dtype, 2 * row, 3.0f, rng);
  DecodeAttentionPlan plan{256, 2};
  plan.cluster_ranks = 8;
  const DecodeVariant four_stages{4, 0, true};
  ASSERT_FALSE(attention_detail::decode_stacked_fits(four_stages, shape, plan, 16));
  PagedCache cache;
  build_paged_cache(cache, ptrs, PagedKvLayout{16, n_kv_heads, head_dim}, rng);
  DeviceBuffer<uint16_t> q_dev(q), out_dev(q.size());
  DeviceBuffer<uint8_t> workspace(decode_attention_workspace_bytes(shape, plan, 2));
  ASSERT_TRUE(decode_attention_init_workspace(workspace.get(), shape, plan, 2, nullptr).ok());
  const std::string m = attention_detail::decode_attention_variant(four_stages, q_dev.get(), out_dev.get(), dtype,
                                                                   shape, cache.view(), cache.kv_lens.get(), 2, plan,
                                                                   workspace.get(), nullptr)
                            .message();
  EXPECT_NE(m.find("the stacked kernel needs"), std::string::npos) << m;
  EXPECT_NE(m.find("use clusters"), std::string::npos) << m;
  // The public launcher with stacked launches asked for from batch 1: the clusters' bits either way.
  DecodeAttentionPlan from_one = plan;
  from_one.stacked_from_batch = 1;
  EXPECT_EQ(run_decode(dtype, shape, 16, from_one, ptrs, q, rng), run_decode(dtype, shape, 16, plan, ptrs, q, rng));
}

// Which shapes can run the O projection in decode attention's launch (decode_o_fold_fits): the 1B
// shape; not the 8B one (its 64 slices' clusters and attention's are more than the GPU holds at
// once), nor two head groups, clusters of 4, weights in tile groups or of another width.
TEST(AttentionDecode, OProjectionFoldFitsWhereItCan) {
  REQUIRE_CUDA_DEVICE();
  if (!clusters_supported()) GTEST_SKIP() << "thread-block clusters need sm_90 code on an sm_90+ GPU";
  DecodeAttentionPlan plan{256, 32};
  plan.cluster_ranks = 8;
  const AttentionShape llama_1b{32, 8, 64, 0.125f}, llama_8b{32, 8, 128, 0.088f}, two_groups{8, 2, 64, 0.125f};
  const PackedWeight o_1b{nullptr, DType::BF16, 2048, 2048, 1};
  EXPECT_TRUE(decode_o_fold_fits(llama_1b, plan, o_1b));
  EXPECT_FALSE(decode_o_fold_fits(llama_8b, plan, PackedWeight{nullptr, DType::BF16, 4096, 4096, 1}));
  EXPECT_FALSE(decode_o_fold_fits(two_groups, plan, PackedWeight{nullptr, DType::BF16, 256, 512, 1}));
  PackedWeight grouped = o_1b, narrow = o_1b;
  grouped.tile_group = 4;
  narrow.cols = 1024;
  EXPECT_FALSE(decode_o_fold_fits(llama_1b, plan, grouped));
  EXPECT_FALSE(decode_o_fold_fits(llama_1b, plan, narrow));
  DecodeAttentionPlan four = plan;
  four.cluster_ranks = 4;
  EXPECT_FALSE(decode_o_fold_fits(llama_1b, four, o_1b));
}

// Ragged lengths in [1, 2000], with the split edges (1, 255, 256, 257, 2000) always present.
std::vector<int> ragged_lengths(int batch, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(1, 2000);
  const int edges[] = {1, 2000, 256, 257, 255};
  std::vector<int> lens;
  for (int b = 0; b < batch; ++b) lens.push_back(b < 5 && batch > 5 ? edges[b] : dist(rng));
  std::shuffle(lens.begin(), lens.end(), rng);
  return lens;
}

class DecodeTest : public testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeTest, RaggedBatchesMatchCpuReference) {
  REQUIRE_CUDA_DEVICE();
  const DecodeCase& c = GetParam();
  std::mt19937 rng(99 + c.head_dim + 10 * c.group + (c.dtype == DType::F16));
  struct Run {
    int batch, block_size, split_tokens;
  };
  for (int ranks : decode_cluster_ranks())
    // 200 sequences: the kernel finds items in windows of 32 sequences; this crosses several.
    for (Run r : {Run{1, 16, 256}, Run{7, 32, 64}, Run{64, 16, 256}, Run{23, 32, 512}, Run{200, 16, 256}}) {
      const std::vector<int> lens = ragged_lengths(r.batch, rng);
      check_decode(c.dtype, c.head_dim, /*n_kv_heads=*/2, c.group, r.block_size, r.split_tokens, lens, rng, ranks);
    }
}

std::vector<DecodeCase> all_decode_cases() {
  std::vector<DecodeCase> cases;
  for (DType t : {DType::BF16, DType::F16})
    for (int hd : {64, 128})
      for (int g : {1, 4, 8}) cases.push_back({t, hd, g});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Attention, DecodeTest, testing::ValuesIn(all_decode_cases()), decode_case_name);

// A sequence's decode output is bit-for-bit the same alone as inside a batch of others, whatever
// blocks the cache gave it and however many splits the plan allows.
TEST(AttentionDecode, OutputIsBitwiseIndependentOfBatch) {
  REQUIRE_CUDA_DEVICE();
  for (DType dtype : {DType::BF16, DType::F16}) {
    std::mt19937 rng(2024 + (dtype == DType::F16));
    const int n_kv_heads = 4, group = 4, head_dim = 128;
    const AttentionShape shape{n_kv_heads * group, n_kv_heads, head_dim, 1.0f / std::sqrt(128.0f)};
    const size_t row = static_cast<size_t>(shape.n_heads) * head_dim;
    std::vector<int> lens = ragged_lengths(40, rng);
    const int target = 17;
    lens[target] = 1537;
    RandomSeqs data(dtype, lens, n_kv_heads, head_dim, rng);
    const auto& [seqs, ptrs] = data;
    const std::vector<uint16_t> q = random_bits(dtype, lens.size() * row, 3.0f, rng);
    const std::vector<uint16_t> q_target(q.begin() + target * row, q.begin() + (target + 1) * row);

    // With clusters, a batch of at least `stacked_from` sequences runs the stacked kernel: the
    // batch of 40 then, and the sequence alone the clusters.
    for (int ranks : decode_cluster_ranks())
    for (int stacked_from : {0, 2}) {
      auto plan = [&](int max_splits) {
        DecodeAttentionPlan p{256, max_splits};
        p.cluster_ranks = ranks;
        p.stacked_from_batch = stacked_from;
        return p;
      };
      const std::vector<uint16_t> batched = run_decode(dtype, shape, 16, plan(8), ptrs, q, rng);
      const std::vector<uint16_t> alone = run_decode(dtype, shape, 16, plan(7), {&seqs[target]}, q_target, rng);
      const std::vector<uint16_t> again = run_decode(dtype, shape, 16, plan(12), {&seqs[target]}, q_target, rng);
      ASSERT_EQ(batched.size(), q.size());
      ASSERT_EQ(alone.size(), row);
      ASSERT_EQ(again.size(), row);
      const std::string what = std::string(dtype_name(dtype)) + ", ranks " + std::to_string(ranks) +
                               ", stacked from batch " + std::to_string(stacked_from);
      const std::vector<uint16_t> in_batch(batched.begin() + target * row, batched.begin() + (target + 1) * row);
      EXPECT_EQ(alone, in_batch) << what << ": decode output depends on the batch";
      EXPECT_EQ(alone, again) << what << ": decode output depends on max_splits_per_seq";
      expect_close(dtype, alone,
                   reference(dtype, q_target, seqs[target], 1, shape.n_heads, n_kv_heads, head_dim, shape.scale),
                   "target sequence, " + what);
    }
  }
}

// Prefill keeps the same promise: a sequence's rows do not depend on the rest of the batch.
TEST(AttentionPrefill, OutputIsBitwiseIndependentOfBatch) {
  REQUIRE_CUDA_DEVICE();
  const DType dtype = DType::BF16;
  std::mt19937 rng(77);
  const int n_kv_heads = 2, group = 4, head_dim = 128;
  const AttentionShape shape{n_kv_heads * group, n_kv_heads, head_dim, 1.0f / std::sqrt(128.0f)};
  const size_t row = static_cast<size_t>(shape.n_heads) * head_dim;
  const int batch = 48, target = 17;
  std::vector<int> q_lens, prefixes;
  std::uniform_int_distribution<int> q_dist(1, 100), prefix_dist(0, 300);
  for (int b = 0; b < batch; ++b) {
    q_lens.push_back(b == target ? 100 : q_dist(rng));
    prefixes.push_back(b == target ? 70 : prefix_dist(rng));
  }
  std::vector<SeqKv> seqs;
  for (int b = 0; b < batch; ++b)
    seqs.push_back(random_seq_kv(dtype, q_lens[b] + prefixes[b], n_kv_heads, head_dim, rng));
  auto run = [&](const std::vector<int>& which, int max_q_len) {
    std::vector<const SeqKv*> ptrs;
    std::vector<int32_t> starts{0};
    for (int b : which) {
      ptrs.push_back(&seqs[b]);
      starts.push_back(starts.back() + q_lens[b]);
    }
    PagedCache cache;
    build_paged_cache(cache, ptrs, PagedKvLayout{16, n_kv_heads, head_dim}, rng);
    // Same query values for a sequence in both runs: drawn from a seed fixed per sequence.
    std::vector<uint16_t> q;
    for (int b : which) {
      std::mt19937 q_rng(500 + b);
      const auto qb = random_bits(dtype, q_lens[b] * row, 3.0f, q_rng);
      q.insert(q.end(), qb.begin(), qb.end());
    }
    DeviceBuffer<uint16_t> q_dev(q), out_dev(std::vector<uint16_t>(q.size(), kNanBits));
    DeviceBuffer<int32_t> starts_dev(starts);
    Status s = prefill_attention(q_dev.get(), out_dev.get(), dtype, shape, cache.view(), starts_dev.get(),
                                 cache.kv_lens.get(), static_cast<int>(which.size()), max_q_len, nullptr);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return out_dev.download();
  };
  std::vector<int> everyone(batch);
  std::iota(everyone.begin(), everyone.end(), 0);
  const std::vector<uint16_t> batched = run(everyone, 100);
  const std::vector<uint16_t> alone = run({target}, 300);  // a larger max_q_len only adds idle CTAs
  ASSERT_EQ(alone.size(), q_lens[target] * row);
  size_t first = 0;
  for (int b = 0; b < target; ++b) first += q_lens[b] * row;
  const std::vector<uint16_t> in_batch(batched.begin() + first, batched.begin() + first + q_lens[target] * row);
  EXPECT_EQ(alone, in_batch);
}

// Both launchers can be captured into a CUDA graph (the engine replays decode steps as graphs),
// and a replay gives the same bits as a direct launch.
TEST(AttentionDecode, CapturesIntoACudaGraph) {
  REQUIRE_CUDA_DEVICE();
  const DType dtype = DType::BF16;
  std::mt19937 rng(4242);
  const int n_kv_heads = 2, group = 4, head_dim = 128;
  const AttentionShape shape{n_kv_heads * group, n_kv_heads, head_dim, 1.0f / std::sqrt(128.0f)};
  const size_t row = static_cast<size_t>(shape.n_heads) * head_dim;
  const std::vector<int> lens{700, 1, 1300};
  RandomSeqs data(dtype, lens, n_kv_heads, head_dim, rng);
  const auto& [seqs, ptrs] = data;
  PagedCache cache;
  build_paged_cache(cache, ptrs, PagedKvLayout{16, n_kv_heads, head_dim}, rng);
  const int batch = static_cast<int>(lens.size());
  const DecodeAttentionPlan plan{256, 6};
  DeviceBuffer<uint16_t> q(random_bits(dtype, batch * row, 3.0f, rng));
  DeviceBuffer<uint16_t> direct(std::vector<uint16_t>(batch * row, kNanBits));
  DeviceBuffer<uint16_t> replayed(std::vector<uint16_t>(batch * row, kNanBits));
  DeviceBuffer<uint16_t> prefill_direct(std::vector<uint16_t>(batch * row, kNanBits));
  DeviceBuffer<uint16_t> prefill_replayed(std::vector<uint16_t>(batch * row, kNanBits));
  DeviceBuffer<int32_t> starts(std::vector<int32_t>{0, 1, 2, 3});
  DeviceBuffer<uint8_t> ws(decode_attention_workspace_bytes(shape, plan, batch));
  ASSERT_TRUE(decode_attention_init_workspace(ws.get(), shape, plan, batch, nullptr).ok());
  cudaStream_t stream;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto step = [&](uint16_t* decode_out, uint16_t* prefill_out) {
    Status s = decode_attention(q.get(), decode_out, dtype, shape, cache.view(), cache.kv_lens.get(), batch, plan,
                                ws.get(), stream);
    EXPECT_TRUE(s.ok()) << s.message();
    Status p = prefill_attention(q.get(), prefill_out, dtype, shape, cache.view(), starts.get(), cache.kv_lens.get(),
                                 batch, 1, stream);
    EXPECT_TRUE(p.ok()) << p.message();
  };
  step(direct.get(), prefill_direct.get());
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  step(replayed.get(), prefill_replayed.get());
  ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_CUDA(cudaGraphLaunch(exec, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(replayed.download(), direct.download());
  EXPECT_EQ(prefill_replayed.download(), prefill_direct.download());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// decode_attention and prefill_attention with q_len = 1 compute the same function.
TEST(AttentionDecode, MatchesPrefillForSingleTokens) {
  REQUIRE_CUDA_DEVICE();
  for (DType dtype : {DType::BF16, DType::F16}) {
    std::mt19937 rng(31 + (dtype == DType::F16));
    const int n_kv_heads = 2, group = 8, head_dim = 128;
    const AttentionShape shape{n_kv_heads * group, n_kv_heads, head_dim, 1.0f / std::sqrt(128.0f)};
    const size_t row = static_cast<size_t>(shape.n_heads) * head_dim;
    const std::vector<int> lens = ragged_lengths(12, rng);
    RandomSeqs data(dtype, lens, n_kv_heads, head_dim, rng);
    const auto& [seqs, ptrs] = data;
    const std::vector<uint16_t> q = random_bits(dtype, lens.size() * row, 3.0f, rng);
    const std::vector<uint16_t> decoded = run_decode(dtype, shape, 32, DecodeAttentionPlan{256, 8}, ptrs, q, rng);

    PagedCache cache;
    build_paged_cache(cache, ptrs, PagedKvLayout{32, n_kv_heads, head_dim}, rng);
    std::vector<int32_t> starts(lens.size() + 1);
    std::iota(starts.begin(), starts.end(), 0);
    DeviceBuffer<uint16_t> q_dev(q), out_dev(std::vector<uint16_t>(q.size(), kNanBits));
    DeviceBuffer<int32_t> starts_dev(starts);
    ASSERT_STATUS_OK(prefill_attention(q_dev.get(), out_dev.get(), dtype, shape, cache.view(), starts_dev.get(),
                                       cache.kv_lens.get(), static_cast<int>(lens.size()), 1, nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    const std::vector<uint16_t> prefilled = out_dev.download();
    ASSERT_EQ(decoded.size(), q.size());
    std::vector<float> prefilled_f32 = to_f32(dtype, prefilled);
    expect_close(dtype, decoded, prefilled_f32, std::string(dtype_name(dtype)) + " decode vs prefill");
  }
}

// ---------------------------------------------------------------------------------------------
// Small shapes, quick under compute-sanitizer (run with --gtest_filter='*Small*').

TEST(AttentionSmall, PrefillRaggedBatch) {
  REQUIRE_CUDA_DEVICE();
  run_prefill_check(DType::BF16, 128, 2, 4, 16, {1, 5, 19, 70}, {0, 3, 40, 9}, 5);
  run_prefill_check(DType::F16, 64, 1, 8, 32, {3, 66}, {30, 0}, 6);
}

TEST(AttentionSmall, DecodeRaggedBatch) {
  REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(8);
  for (int ranks : decode_cluster_ranks()) {
    check_decode(DType::BF16, 128, 2, 4, 16, 32, {1, 17, 300, 64, 65}, rng, ranks);
    check_decode(DType::F16, 64, 1, 8, 32, 64, {2, 129, 33}, rng, ranks);
  }
}

// ---------------------------------------------------------------------------------------------
// Launcher checks: host-only, no device needed.

TEST(AttentionLauncher, RejectsUnsupportedShapesWithAClearMessage) {
  void* fake = reinterpret_cast<void*>(uintptr_t{4096});  // never dereferenced: checks fail first
  const int32_t* fake_i = reinterpret_cast<const int32_t*>(fake);
  PagedKvView kv;
  kv.k = kv.v = fake;
  kv.block_tables = fake_i;
  kv.max_blocks_per_seq = 4;
  kv.layout = PagedKvLayout{16, 2, 97};
  AttentionShape shape{8, 2, 97, 0.1f};
  std::string m = prefill_attention(fake, fake, DType::BF16, shape, kv, fake_i, fake_i, 1, 4, nullptr).message();
  EXPECT_NE(m.find("unsupported head_dim=97 (supported: even values 8..256; tensor cores for 64, 128)"),
            std::string::npos)
      << m;
  DecodeAttentionPlan plan{256, 4};
  m = decode_attention(fake, fake, DType::F16, shape, kv, fake_i, 1, plan, fake, nullptr).message();
  EXPECT_NE(m.find("unsupported head_dim=97 (supported: even values 8..256; tensor cores for 64, 128)"),
            std::string::npos)
      << m;

  kv.layout.head_dim = shape.head_dim = 128;
  m = decode_attention(fake, fake, DType::F32, shape, kv, fake_i, 1, plan, fake, nullptr).message();
  EXPECT_NE(m.find("unsupported dtype=f32"), std::string::npos) << m;
  m = decode_attention(fake, fake, DType::BF16, shape, kv, fake_i, 1, DecodeAttentionPlan{40, 4}, fake, nullptr)
          .message();
  EXPECT_NE(m.find("split_tokens=40"), std::string::npos) << m;
  // A split's block numbers are staged in shared memory: at most 127 blocks of 16 tokens.
  m = decode_attention(fake, fake, DType::BF16, shape, kv, fake_i, 1, DecodeAttentionPlan{2048, 4}, fake, nullptr)
          .message();
  EXPECT_NE(m.find("split_tokens=2048 spans more than 127 blocks of 16 tokens; use at most 2032"), std::string::npos)
      << m;
  DecodeAttentionPlan three_ranks{256, 4};
  three_ranks.cluster_ranks = 3;
  m = decode_attention(fake, fake, DType::BF16, shape, kv, fake_i, 1, three_ranks, fake, nullptr).message();
  EXPECT_NE(m.find("cluster_ranks=3 (supported: 1, 2, 4, 8)"), std::string::npos) << m;
  // The O projection in the launch: one sequence, and weights of the activations' dtype.
  DecodeOFold fold{PackedWeight{fake, DType::BF16, 256, 1024, 1}, SkinnyResidualOut{static_cast<float*>(fake)},
                   static_cast<int*>(fake)};
  m = decode_attention(fake, fake, DType::BF16, shape, kv, fake_i, 2, plan, fake, nullptr, &fold).message();
  EXPECT_NE(m.find("the O projection runs in its launch at batch 1, not 2"), std::string::npos) << m;
  fold.o.dtype = DType::F16;
  m = decode_attention(fake, fake, DType::BF16, shape, kv, fake_i, 1, plan, fake, nullptr, &fold).message();
  EXPECT_NE(m.find("needs weights of the activations' dtype"), std::string::npos) << m;
  kv.layout.n_kv_heads = 4;
  m = prefill_attention(fake, fake, DType::BF16, shape, kv, fake_i, fake_i, 1, 4, nullptr).message();
  EXPECT_NE(m.find("does not match"), std::string::npos) << m;
  kv.layout = PagedKvLayout{24, 2, 128};
  m = prefill_attention(fake, fake, DType::BF16, shape, kv, fake_i, fake_i, 1, 4, nullptr).message();
  EXPECT_NE(m.find("power of two"), std::string::npos) << m;
  // An empty batch is not an error and launches nothing.
  EXPECT_TRUE(prefill_attention(nullptr, nullptr, DType::BF16, AttentionShape{8, 2, 128, 0.1f},
                                PagedKvView{nullptr, nullptr, PagedKvLayout{16, 2, 128}, nullptr, 0}, nullptr, nullptr,
                                0, 0, nullptr)
                  .ok());
  // A 16-byte header, then per sequence: 8 head-group counters (32 bytes), 32 x 16 log2-sum-exps,
  // 32 x 16 x 128 partials.
  EXPECT_EQ(decode_attention_workspace_bytes(AttentionShape{32, 8, 128, 0.1f}, DecodeAttentionPlan{256, 16}, 64),
            16 + size_t{64} * (32 + 32 * 16 * 4 + 32 * 16 * 128 * 4));
}

// ---------------------------------------------------------------------------------------------
// Benchmarks: print times, never fail on speed.

// A cache of `batch` sequences in shuffled blocks, filled with one 4 MiB random pattern repeated
// (timing needs non-zero data, not distinct data; the pools are far larger than L2 anyway).
struct BenchCache {
  DeviceBuffer<uint16_t> k, v;
  DeviceBuffer<int32_t> tables, lens;
  PagedKvView view;
};

void make_bench_cache(BenchCache& c, DType dtype, int batch, const std::vector<int>& lens, int n_kv_heads, int head_dim,
                      int block_size, std::mt19937& rng) {
  const PagedKvLayout layout{block_size, n_kv_heads, head_dim};
  int max_blocks = 0, total = 0;
  for (int len : lens) {
    max_blocks = std::max(max_blocks, (len + block_size - 1) / block_size);
    total += (len + block_size - 1) / block_size;
  }
  std::vector<int32_t> order(total);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> tables(static_cast<size_t>(batch) * max_blocks, 0);
  int next = 0;
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < (lens[b] + block_size - 1) / block_size; ++i) tables[b * max_blocks + i] = order[next++];
  const size_t pool = static_cast<size_t>(total) * layout.block_elems();
  const size_t pattern = std::min<size_t>(pool, size_t{2} << 20);
  const std::vector<uint16_t> rnd = random_bits(dtype, pattern, 1.0f, rng);
  c.k = DeviceBuffer<uint16_t>(pool);
  c.v = DeviceBuffer<uint16_t>(pool);
  for (size_t off = 0; off < pool; off += pattern) {
    const size_t n = std::min(pattern, pool - off);
    cudaMemcpy(c.k.get() + off, rnd.data(), n * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(c.v.get() + off, rnd.data(), n * 2, cudaMemcpyHostToDevice);
  }
  c.tables = DeviceBuffer<int32_t>(tables);
  c.lens = DeviceBuffer<int32_t>(std::vector<int32_t>(lens.begin(), lens.end()));
  c.view = PagedKvView{c.k.get(), c.v.get(), layout, c.tables.get(), max_blocks};
}

TEST(AttentionBench, DISABLED_Ceilings) {
  REQUIRE_CUDA_DEVICE();
  // Device-to-device copy: bytes read + written over time.
  const size_t bytes = size_t{2} << 30;
  DeviceBuffer<uint8_t> a(bytes), b(bytes);
  ASSERT_TRUE(a.get() && b.get());
  ASSERT_CUDA(cudaMemset(a.get(), 1, bytes));
  const double copy_ms = test::median_ms([&] { cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice); });
  std::printf("[bench] d2d copy 2 GiB: %.3f ms = %.0f GB/s (read + write)\n", copy_ms, 2.0 * bytes / copy_ms / 1e6);

  // bf16 GEMM through cuBLAS on random data: the tensor-core ceiling for prefill.
  const int n = 8192;
  std::mt19937 rng(3);
  const std::vector<uint16_t> rnd = random_bits(DType::BF16, size_t{n} * n, 1.0f, rng);
  DeviceBuffer<uint16_t> x(rnd), y(rnd), z(size_t{n} * n);
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const float one = 1.0f, zero = 0.0f;
  const double gemm_ms = test::median_ms(
      [&] {
        cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, x.get(), CUDA_R_16BF, n, y.get(), CUDA_R_16BF, n,
                     &zero, z.get(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      },
      10);
  cublasDestroy(handle);
  std::printf("[bench] cuBLAS bf16 GEMM 8192^3: %.3f ms = %.0f TFLOP/s\n", gemm_ms, 2.0 * n * n * n / gemm_ms / 1e9);
}

TEST(AttentionBench, DISABLED_Decode) {
  REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    int batch, len, n_heads, n_kv_heads, head_dim, split;
    int slots = 0;  // split slots per sequence (max_splits_per_seq): 0 = as many as len needs
  };
  // "N slots": an engine sized for longer sequences than these (32 split slots per sequence at 8k
  // positions, 129 past 32k): the grid no longer depends on it, the workspace does.
  const Case cases[] = {
      {"llama3-8b b1 kv2000", 1, 2000, 32, 8, 128, 256},
      {"llama3-8b b1 kv2000 split64", 1, 2000, 32, 8, 128, 64},
      {"llama3-8b b8 kv4096", 8, 4096, 32, 8, 128, 256},
      {"llama3-8b b64 kv4096", 64, 4096, 32, 8, 128, 256},
      {"llama2-7b b64 kv2048 (MHA)", 64, 2048, 32, 32, 128, 256},
      {"tinyllama b64 kv4096 hd64", 64, 4096, 32, 4, 64, 256},
      {"llama3-8b b256 kv1024", 256, 1024, 32, 8, 128, 256},
      {"llama3-8b b1 kv512 32 slots", 1, 512, 32, 8, 128, 256, 32},
      {"llama3-8b b1 kv512 129 slots", 1, 512, 32, 8, 128, 256, 129},
      {"llama3.2-1b b1 kv512 129 slots", 1, 512, 32, 8, 64, 256, 129},
      {"llama3-8b b16 kv512 32 slots", 16, 512, 32, 8, 128, 256, 32},
      {"llama3-8b b64 kv512 32 slots", 64, 512, 32, 8, 128, 256, 32},
      {"llama3-8b b1 kv32768 129 slots", 1, 32768, 32, 8, 128, 256, 129},
      {"llama3-8b b16 kv8192 32 slots", 16, 8192, 32, 8, 128, 256, 32},
      {"llama3-8b b1 kv512 split128", 1, 512, 32, 8, 128, 128, 64},
      {"llama3-8b b1 kv32768 split128", 1, 32768, 32, 8, 128, 128, 257},
      {"llama3-8b b16 kv8192 split128", 16, 8192, 32, 8, 128, 128, 64},
      {"llama3.2-1b b1 kv512 split128", 1, 512, 32, 8, 64, 128, 257},
  };
  int device = 0, max_smem = 0;
  ASSERT_CUDA(cudaGetDevice(&device));
  ASSERT_CUDA(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  std::printf("[bench] %-32s %7s %10s %10s %12s %10s\n", "decode case", "stages", "ctas", "time(us)", "KV bytes",
              "GB/s");
  for (const Case& c : cases) {
    std::mt19937 rng(11);
    BenchCache cache;
    make_bench_cache(cache, DType::BF16, c.batch, std::vector<int>(c.batch, c.len), c.n_kv_heads, c.head_dim, 16, rng);
    const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(float(c.head_dim))};
    const int needed = (c.len + c.split - 1) / c.split;
    const DecodeAttentionPlan plan{c.split, std::max(needed, c.slots)};
    DeviceBuffer<uint16_t> q(random_bits(DType::BF16, size_t{1} * c.batch * c.n_heads * c.head_dim, 3.0f, rng));
    DeviceBuffer<uint16_t> out(q.size());
    DeviceBuffer<uint8_t> ws(decode_attention_workspace_bytes(shape, plan, c.batch));
    ASSERT_TRUE(cache.k.get() && q.get() && out.get() && ws.get());
    ASSERT_TRUE(decode_attention_init_workspace(ws.get(), shape, plan, c.batch, nullptr).ok());
    // Each stage count with one wave of CTAs, then the launcher's choice.
    std::vector<DecodeVariant> variants{{2}, {3}, {4}};
    variants.push_back(attention_detail::choose_decode_variant(c.head_dim, max_smem));
    for (const DecodeVariant& variant : variants) {
      auto run = [&] {
        return attention_detail::decode_attention_variant(variant, q.get(), out.get(), DType::BF16, shape, cache.view,
                                                          cache.lens.get(), c.batch, plan, ws.get(), nullptr);
      };
      ASSERT_STATUS_OK(run());
      ASSERT_CUDA(cudaDeviceSynchronize());
      const double ms = test::median_ms([&] { (void)run(); });
      const double kv_bytes = 2.0 * c.batch * c.len * c.n_kv_heads * c.head_dim * 2;
      std::printf("[bench] %-32s %7d %10d %10.1f %12.0f %10.0f\n", c.name, variant.stages, variant.ctas,
                  ms * 1e3, kv_bytes, kv_bytes / ms / 1e6);
    }
  }
}

// A bench batch for one model shape: `batch` sequences of `len` cached tokens, their queries and
// an output.
struct DecodeBenchInputs {
  AttentionShape shape;
  BenchCache cache;
  DeviceBuffer<uint16_t> q, out;
};

void make_decode_bench_inputs(DecodeBenchInputs& in, int n_heads, int n_kv_heads, int head_dim, int batch, int len) {
  std::mt19937 rng(11);
  make_bench_cache(in.cache, DType::BF16, batch, std::vector<int>(batch, len), n_kv_heads, head_dim, 16, rng);
  in.shape = AttentionShape{n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(float(head_dim))};
  in.q = DeviceBuffer<uint16_t>(random_bits(DType::BF16, size_t{1} * batch * n_heads * head_dim, 3.0f, rng));
  in.out = DeviceBuffer<uint16_t>(in.q.size());
}

// Times one decode attention launch of `variant` under `plan` (ms, median of launches bracketed by
// events), with a workspace of its own.
void time_decode(DecodeBenchInputs& in, int batch, const DecodeAttentionPlan& plan, const DecodeVariant& variant,
                 double& ms) {
  DeviceBuffer<uint8_t> ws(decode_attention_workspace_bytes(in.shape, plan, batch));
  ASSERT_TRUE(in.cache.k.get() && in.q.get() && in.out.get() && ws.get());
  ASSERT_TRUE(decode_attention_init_workspace(ws.get(), in.shape, plan, batch, nullptr).ok());
  auto run = [&] {
    return attention_detail::decode_attention_variant(variant, in.q.get(), in.out.get(), DType::BF16, in.shape,
                                                      in.cache.view, in.cache.lens.get(), batch, plan, ws.get(),
                                                      nullptr);
  };
  ASSERT_STATUS_OK(run());
  ASSERT_CUDA(cudaDeviceSynchronize());
  ms = test::median_ms([&] { (void)run(); });
}

// Split size against batch and length, with the launcher's variant: which split each length wants.
TEST(AttentionBench, DISABLED_DecodeSplits) {
  REQUIRE_CUDA_DEVICE();
  struct Shape {
    const char* name;
    int n_heads, n_kv_heads, head_dim;
  };
  const Shape shapes[] = {{"llama3-8b", 32, 8, 128}, {"llama3.2-1b", 32, 8, 64}};
  int device = 0, max_smem = 0;
  ASSERT_CUDA(cudaGetDevice(&device));
  ASSERT_CUDA(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  std::printf("[bench] %-12s %6s %6s %6s %10s %10s\n", "shape", "batch", "len", "split", "time(us)", "GB/s");
  for (const Shape& sh : shapes) {
    for (int batch : {1, 16, 64}) {
      for (int len : {512, 1024, 2048, 4096, 8192}) {
        if (sh.head_dim == 64 && len > 2048) continue;
        if (static_cast<int64_t>(batch) * len > 64 * 4096) continue;
        DecodeBenchInputs in;
        make_decode_bench_inputs(in, sh.n_heads, sh.n_kv_heads, sh.head_dim, batch, len);
        for (int split : {32, 64, 128, 256}) {
          const DecodeAttentionPlan plan{split, (len + split - 1) / split};
          const DecodeVariant variant = attention_detail::choose_decode_variant(sh.head_dim, max_smem);
          double ms = 0;
          ASSERT_NO_FATAL_FAILURE(time_decode(in, batch, plan, variant, ms));
          const double kv_bytes = 2.0 * batch * len * sh.n_kv_heads * sh.head_dim * 2;
          std::printf("[bench] %-12s %6d %6d %6d %10.1f %10.0f\n", sh.name, batch, len, split, ms * 1e3,
                      kv_bytes / ms / 1e6);
        }
      }
    }
  }
}

// Decode in clusters against one CTA per split, by batch and length (the launcher's stages, one
// wave), and the clusters' cut computed by one CTA per item (stacked, its own two stages): the wave's
// units (0: not a one-wave grid) and us per launch (isolated launches, ~5 us of launch in each).
TEST(AttentionBench, DISABLED_DecodeClusters) {
  REQUIRE_CUDA_DEVICE();
  if (!clusters_supported()) GTEST_SKIP() << "thread-block clusters need sm_90 code on an sm_90+ GPU";
  struct Shape {
    const char* name;
    int n_heads, n_kv_heads, head_dim;
  };
  struct Config {
    int ranks, min_rank_keys;
    bool stacked;
  };
  const Shape shapes[] = {{"llama3-8b", 32, 8, 128}, {"llama3.2-1b", 32, 8, 64}};
  const Config configs[] = {{1, kMinRankKeys, false}, {8, 128, false}, {8, 256, false},
                            {4, 128, false},          {2, 256, false}, {8, 128, true}};
  int device = 0, max_smem = 0;
  ASSERT_CUDA(cudaGetDevice(&device));
  ASSERT_CUDA(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  std::printf("[bench] %-12s %6s %6s %6s %6s %-8s %6s %10s %10s\n", "shape", "batch", "len", "ranks", "keys",
              "kernel", "units", "time(us)", "GB/s");
  for (const Shape& sh : shapes) {
    for (int batch : {1, 4, 16, 64}) {
      for (int len : {520, 2048, 8192}) {
        if (static_cast<int64_t>(batch) * len > 16 * 8192) continue;
        DecodeBenchInputs in;
        make_decode_bench_inputs(in, sh.n_heads, sh.n_kv_heads, sh.head_dim, batch, len);
        for (const Config& config : configs) {
          DecodeAttentionPlan plan{256, (8192 + 255) / 256};
          plan.cluster_ranks = config.ranks;
          plan.min_rank_keys = config.min_rank_keys;
          DecodeVariant variant = attention_detail::choose_decode_variant(sh.head_dim, max_smem);
          if (config.stacked) {
            variant.stacked = true;
            variant.stages = attention_detail::kStackedStages;
            if (!attention_detail::decode_stacked_fits(variant, in.shape, plan, 16)) continue;
          }
          double ms = 0;
          ASSERT_NO_FATAL_FAILURE(time_decode(in, batch, plan, variant, ms));
          const double kv_bytes = 2.0 * batch * len * sh.n_kv_heads * sh.head_dim * 2;
          const int units = config.stacked ? 0 : attention_detail::decode_wave_units(variant, sh.head_dim, config.ranks);
          std::printf("[bench] %-12s %6d %6d %6d %6d %-8s %6d %10.1f %10.0f\n", sh.name, batch, len, config.ranks,
                      config.min_rank_keys, config.stacked ? "stacked" : "split", units, ms * 1e3,
                      kv_bytes / ms / 1e6);
        }
      }
    }
  }
}

TEST(AttentionBench, DISABLED_Prefill) {
  REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    int batch, q_len, prefix, n_heads, n_kv_heads, head_dim;
  };
  const Case cases[] = {
      {"llama3-8b 1x4096", 1, 4096, 0, 32, 8, 128},
      {"llama3-8b 4x1024", 4, 1024, 0, 32, 8, 128},
      {"llama3-8b chunk 512 @3584", 1, 512, 3584, 32, 8, 128},
      {"llama2-7b 1x4096 (MHA)", 1, 4096, 0, 32, 32, 128},
      {"tinyllama 1x4096 hd64", 1, 4096, 0, 32, 4, 64},
      {"llama3-8b 8x4096", 8, 4096, 0, 32, 8, 128},
  };
  std::printf("[bench] %-30s %9s %10s %10s %10s\n", "prefill case", "rows/keys", "time(us)", "GFLOP", "TFLOP/s");
  for (const Case& c : cases) {
    std::mt19937 rng(12);
    const int len = c.prefix + c.q_len;
    BenchCache cache;
    make_bench_cache(cache, DType::BF16, c.batch, std::vector<int>(c.batch, len), c.n_kv_heads, c.head_dim, 16, rng);
    const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(float(c.head_dim))};
    const size_t tokens = size_t{1} * c.batch * c.q_len;
    DeviceBuffer<uint16_t> q(random_bits(DType::BF16, tokens * c.n_heads * c.head_dim, 3.0f, rng));
    DeviceBuffer<uint16_t> out(q.size());
    std::vector<int32_t> starts(c.batch + 1);
    for (int b = 0; b <= c.batch; ++b) starts[b] = b * c.q_len;
    DeviceBuffer<int32_t> starts_dev(starts);
    ASSERT_TRUE(cache.k.get() && q.get() && out.get());
    // Causal FLOPs actually needed: 4 * head_dim per (query, visible key, head).
    double pairs = 0;
    for (int t = 0; t < c.q_len; ++t) pairs += c.prefix + t + 1;
    const double flops = 4.0 * c.head_dim * c.n_heads * c.batch * pairs;
    for (const PrefillVariant& variant : kPrefillVariants) {
      auto run = [&] {
        return attention_detail::prefill_attention_variant(variant, q.get(), out.get(), DType::BF16, shape, cache.view,
                                                           starts_dev.get(), cache.lens.get(), c.batch, c.q_len,
                                                           nullptr);
      };
      ASSERT_STATUS_OK(run());
      ASSERT_CUDA(cudaDeviceSynchronize());
      const double ms = test::median_ms([&] { (void)run(); });
      std::printf("[bench] %-30s %5d/%-3d %10.1f %10.1f %10.0f\n", c.name, variant.rows_per_warp, variant.keys_per_tile,
                  ms * 1e3, flops / 1e9, flops / ms / 1e9);
    }
  }
}

}  // namespace
}  // namespace fuselm
