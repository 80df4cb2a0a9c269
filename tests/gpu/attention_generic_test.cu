// The CUDA-core attention fallback (attention_generic.cu) for head_dims without a tensor-core
// kernel, through the public prefill_attention / decode_attention launchers, against the CPU
// reference (cpu::attention on fp32 copies of the bf16/fp16 inputs). As in attention_test.cu the
// cache blocks are shuffled across the pool, and unused pool slots, the spare block that pads the
// block tables and the outputs are NaN before each run, so a read outside a sequence's cache or an
// unwritten output shows up as NaN. The helpers below are a copy of that file's.
//
// Tolerances (fp32 accumulation; the error is the rounding of the output to 16 bits):
//   bf16: ||out - ref|| / ||ref|| <= 1e-2, max |out - ref| <= 2e-2
//   fp16: ||out - ref|| / ||ref|| <= 2e-3, max |out - ref| <= 4e-3
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

namespace fuselm {
namespace {

using namespace attention_test;

constexpr int kBlockSize = 16;
constexpr int kNumKvHeads = 2;

void expect_close(DType t, const std::vector<uint16_t>& out, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(out.size(), ref.size()) << what;
  const ErrorStats e = compare(t, out, ref);
  const double rel_tol = t == DType::BF16 ? 1e-2 : 2e-3;
  const double abs_tol = t == DType::BF16 ? 2e-2 : 4e-3;
  EXPECT_EQ(e.non_finite, 0) << what << ": outputs left unwritten (NaN poison) or non-finite";
  EXPECT_LE(e.rel_l2, rel_tol) << what;
  EXPECT_LE(e.max_abs, abs_tol) << what;
}

// Reference for one sequence: its new tokens are the last q_len positions of kv_len.
std::vector<float> reference(DType t, const std::vector<uint16_t>& q_bits, const SeqKv& s, int q_len,
                             const AttentionShape& shape) {
  const std::vector<float> q = to_f32(t, q_bits), k = to_f32(t, s.k), v = to_f32(t, s.v);
  std::vector<int32_t> positions(q_len);
  for (int i = 0; i < q_len; ++i) positions[i] = s.kv_len - q_len + i;
  std::vector<float> out(static_cast<size_t>(q_len) * shape.n_heads * shape.head_dim);
  cpu::attention(q.data(), k.data(), v.data(), positions.data(), q_len, s.kv_len, shape.n_heads, shape.n_kv_heads,
                 shape.head_dim, shape.scale, out.data());
  return out;
}

AttentionShape make_shape(int head_dim, int group) {
  return AttentionShape{kNumKvHeads * group, kNumKvHeads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
}

struct GenericCase {
  DType dtype;
  int head_dim;
  int group;
};

std::string case_name(const testing::TestParamInfo<GenericCase>& info) {
  const GenericCase& c = info.param;
  return std::string(dtype_name(c.dtype)) + "_hd" + std::to_string(c.head_dim) + "_g" + std::to_string(c.group);
}

std::vector<GenericCase> all_cases() {
  std::vector<GenericCase> cases;
  for (DType t : {DType::BF16, DType::F16})
    for (int hd : {16, 32, 80, 256})
      for (int g : {1, 4}) cases.push_back({t, hd, g});
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Prefill

// Runs prefill over one ragged batch and checks each sequence against the CPU reference.
void run_prefill_check(DType dtype, const AttentionShape& shape, const std::vector<int>& q_lens,
                       const std::vector<int>& prefixes, std::mt19937& rng) {
  const int batch = static_cast<int>(q_lens.size());
  std::vector<SeqKv> seqs;
  std::vector<std::vector<uint16_t>> qs;
  std::vector<int32_t> q_starts{0};
  int max_q_len = 0;
  for (int b = 0; b < batch; ++b) {
    seqs.push_back(random_seq_kv(dtype, prefixes[b] + q_lens[b], shape.n_kv_heads, shape.head_dim, rng));
    // Amplitude 3 puts the scores' standard deviation near 1: peaked enough to exercise rescaling.
    qs.push_back(random_bits(dtype, static_cast<size_t>(q_lens[b]) * shape.n_heads * shape.head_dim, 3.0f, rng));
    q_starts.push_back(q_starts.back() + q_lens[b]);
    max_q_len = std::max(max_q_len, q_lens[b]);
  }
  std::vector<uint16_t> q_all;
  for (const auto& q : qs) q_all.insert(q_all.end(), q.begin(), q.end());

  PagedCache cache;
  std::vector<const SeqKv*> ptrs;
  for (const auto& s : seqs) ptrs.push_back(&s);
  build_paged_cache(cache, ptrs, PagedKvLayout{kBlockSize, shape.n_kv_heads, shape.head_dim}, rng);
  DeviceBuffer<uint16_t> q_dev(q_all);
  DeviceBuffer<uint16_t> out_dev(std::vector<uint16_t>(q_all.size(), kNanBits));
  DeviceBuffer<int32_t> q_starts_dev(q_starts);
  ASSERT_TRUE(q_dev.get() && out_dev.get() && cache.k_pool.get() && cache.block_tables.get());
  ASSERT_STATUS_OK(prefill_attention(q_dev.get(), out_dev.get(), dtype, shape, cache.view(), q_starts_dev.get(),
                                     cache.kv_lens.get(), batch, max_q_len, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  const std::vector<uint16_t> out = out_dev.download();
  ASSERT_EQ(out.size(), q_all.size());

  const size_t row = static_cast<size_t>(shape.n_heads) * shape.head_dim;
  for (int b = 0; b < batch; ++b) {
    const std::vector<uint16_t> got(out.begin() + q_starts[b] * row, out.begin() + q_starts[b + 1] * row);
    expect_close(dtype, got, reference(dtype, qs[b], seqs[b], q_lens[b], shape),
                 "sequence " + std::to_string(b) + " (q_len=" + std::to_string(q_lens[b]) +
                     ", prefix=" + std::to_string(prefixes[b]) + ")");
  }
}

class GenericPrefillTest : public testing::TestWithParam<GenericCase> {};

// Every (q_len, cached prefix) pair from {1, 7, 33} x {0, 40}, in two ragged batches of three.
TEST_P(GenericPrefillTest, RaggedBatchMatchesCpuReference) {
  REQUIRE_CUDA_DEVICE();
  const GenericCase& c = GetParam();
  const AttentionShape shape = make_shape(c.head_dim, c.group);
  std::mt19937 rng(4321 + c.head_dim + 10 * c.group + (c.dtype == DType::F16));
  run_prefill_check(c.dtype, shape, {1, 7, 33}, {0, 40, 0}, rng);
  run_prefill_check(c.dtype, shape, {33, 1, 7}, {40, 40, 0}, rng);
}

INSTANTIATE_TEST_SUITE_P(AttentionGeneric, GenericPrefillTest, testing::ValuesIn(all_cases()), case_name);

// ---------------------------------------------------------------------------------------------
// Decode

DecodeAttentionPlan plan_for(const std::vector<const SeqKv*>& seqs, int split_tokens) {
  int max_len = 1;
  for (const SeqKv* s : seqs) max_len = std::max(max_len, s->kv_len);
  return DecodeAttentionPlan{split_tokens, (max_len + split_tokens - 1) / split_tokens};
}

// Runs decode attention on `seqs` (in that order) with the cache's lengths replaced by `lens`
// when given, and returns the output bits.
std::vector<uint16_t> run_decode(DType dtype, const AttentionShape& shape, const std::vector<const SeqKv*>& seqs,
                                 const std::vector<uint16_t>& q, std::mt19937& rng,
                                 const std::vector<int32_t>* lens = nullptr) {
  PagedCache cache;
  build_paged_cache(cache, seqs, PagedKvLayout{kBlockSize, shape.n_kv_heads, shape.head_dim}, rng);
  if (lens && !cache.kv_lens.upload(*lens)) return {};
  const int batch = static_cast<int>(seqs.size());
  const DecodeAttentionPlan plan = plan_for(seqs, 256);
  DeviceBuffer<uint16_t> q_dev(q);
  DeviceBuffer<uint16_t> out_dev(std::vector<uint16_t>(q.size(), kNanBits));
  DeviceBuffer<uint8_t> workspace(decode_attention_workspace_bytes(shape, plan, batch));
  if (!decode_attention_init_workspace(workspace.get(), shape, plan, batch, nullptr).ok()) return {};
  const Status s = decode_attention(q_dev.get(), out_dev.get(), dtype, shape, cache.view(), cache.kv_lens.get(),
                                    batch, plan, workspace.get(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return out_dev.download();
}

class GenericDecodeTest : public testing::TestWithParam<GenericCase> {};

// A batch of five with lengths from 1 to 300, across block edges.
TEST_P(GenericDecodeTest, RaggedBatchMatchesCpuReference) {
  REQUIRE_CUDA_DEVICE();
  const GenericCase& c = GetParam();
  const AttentionShape shape = make_shape(c.head_dim, c.group);
  std::mt19937 rng(8765 + c.head_dim + 10 * c.group + (c.dtype == DType::F16));
  const std::vector<int> lens{17, 1, 300, 16, 129};
  RandomSeqs data(c.dtype, lens, shape.n_kv_heads, shape.head_dim, rng);
  const auto& [seqs, ptrs] = data;
  const size_t row = static_cast<size_t>(shape.n_heads) * shape.head_dim;
  const std::vector<uint16_t> q = random_bits(c.dtype, lens.size() * row, 3.0f, rng);
  const std::vector<uint16_t> out = run_decode(c.dtype, shape, ptrs, q, rng);
  ASSERT_EQ(out.size(), q.size());
  for (size_t b = 0; b < lens.size(); ++b) {
    const std::vector<uint16_t> q_b(q.begin() + b * row, q.begin() + (b + 1) * row);
    const std::vector<uint16_t> got(out.begin() + b * row, out.begin() + (b + 1) * row);
    expect_close(c.dtype, got, reference(c.dtype, q_b, seqs[b], 1, shape),
                 "sequence " + std::to_string(b) + " (kv_len=" + std::to_string(lens[b]) + ")");
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionGeneric, GenericDecodeTest, testing::ValuesIn(all_cases()), case_name);

// A sequence's decode output is bit-for-bit the same alone as inside a batch of others, whatever
// blocks the cache gave it.
TEST(AttentionGenericDecode, OutputIsBitwiseIndependentOfBatch) {
  REQUIRE_CUDA_DEVICE();
  for (DType dtype : {DType::BF16, DType::F16}) {
    std::mt19937 rng(99 + (dtype == DType::F16));
    const AttentionShape shape = make_shape(80, 4);
    const size_t row = static_cast<size_t>(shape.n_heads) * shape.head_dim;
    const std::vector<int> lens{5, 300, 33, 1, 250};
    const int target = 1;
    RandomSeqs data(dtype, lens, shape.n_kv_heads, shape.head_dim, rng);
    const auto& [seqs, ptrs] = data;
    const std::vector<uint16_t> q = random_bits(dtype, lens.size() * row, 3.0f, rng);
    const std::vector<uint16_t> q_target(q.begin() + target * row, q.begin() + (target + 1) * row);

    const std::vector<uint16_t> batched = run_decode(dtype, shape, ptrs, q, rng);
    const std::vector<uint16_t> alone = run_decode(dtype, shape, {&seqs[target]}, q_target, rng);
    ASSERT_EQ(batched.size(), q.size());
    ASSERT_EQ(alone.size(), row);
    const std::vector<uint16_t> in_batch(batched.begin() + target * row, batched.begin() + (target + 1) * row);
    EXPECT_EQ(alone, in_batch) << dtype_name(dtype) << ": decode output depends on the batch";
    expect_close(dtype, alone, reference(dtype, q_target, seqs[target], 1, shape), "target sequence");
  }
}

// kv_len 0 gives zeros; a length past the block table gives NaN and reads nothing outside it.
TEST(AttentionGenericDecode, EmptyAndInconsistentLengths) {
  REQUIRE_CUDA_DEVICE();
  const DType dtype = DType::BF16;
  std::mt19937 rng(7);
  const AttentionShape shape = make_shape(16, 4);
  const size_t row = static_cast<size_t>(shape.n_heads) * shape.head_dim;
  std::vector<SeqKv> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back(random_seq_kv(dtype, 20, shape.n_kv_heads, shape.head_dim, rng));
  const std::vector<const SeqKv*> ptrs{&seqs[0], &seqs[1], &seqs[2]};
  // 20 tokens need 2 blocks; the tables get 2 spare columns: capacity 4 * 16 = 64 tokens.
  const std::vector<int32_t> lens{0, 20, 65};
  const std::vector<uint16_t> q = random_bits(dtype, 3 * row, 3.0f, rng);
  const std::vector<uint16_t> out = run_decode(dtype, shape, ptrs, q, rng, &lens);
  ASSERT_EQ(out.size(), q.size());
  for (size_t i = 0; i < row; ++i) EXPECT_EQ(from_bits(dtype, out[i]), 0.0f) << "kv_len 0, element " << i;
  const std::vector<uint16_t> q_1(q.begin() + row, q.begin() + 2 * row);
  expect_close(dtype, std::vector<uint16_t>(out.begin() + row, out.begin() + 2 * row),
               reference(dtype, q_1, seqs[1], 1, shape), "kv_len 20");
  for (size_t i = 2 * row; i < 3 * row; ++i)
    EXPECT_TRUE(std::isnan(from_bits(dtype, out[i]))) << "kv_len past the block table, element " << i - 2 * row;
}

// ---------------------------------------------------------------------------------------------
// Launcher checks: host-only, no device needed.

TEST(AttentionGenericLauncher, RejectsOddOrOversizedHeadDim) {
  void* fake = reinterpret_cast<void*>(uintptr_t{4096});  // never dereferenced: checks fail first
  const int32_t* fake_i = reinterpret_cast<const int32_t*>(fake);
  for (int head_dim : {6, 15, 258, 512}) {
    PagedKvView kv;
    kv.k = kv.v = fake;
    kv.block_tables = fake_i;
    kv.max_blocks_per_seq = 4;
    kv.layout = PagedKvLayout{16, 2, head_dim};
    const AttentionShape shape{8, 2, head_dim, 0.1f};
    const std::string expected = "unsupported head_dim=" + std::to_string(head_dim) +
                                 " (supported: even values 8..256; tensor cores for 64, 128)";
    std::string m = prefill_attention(fake, fake, DType::BF16, shape, kv, fake_i, fake_i, 1, 4, nullptr).message();
    EXPECT_NE(m.find(expected), std::string::npos) << m;
    m = decode_attention(fake, fake, DType::F16, shape, kv, fake_i, 1, DecodeAttentionPlan{256, 4}, fake, nullptr)
            .message();
    EXPECT_NE(m.find(expected), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace fuselm
