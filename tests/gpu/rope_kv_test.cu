// RoPE + KV-cache write against cpu::rope on the same (rounded) inputs, for GQA ratios 1, 4 and 8,
// the vectorized and scalar paths, plain and llama3-scaled frequencies, several block sizes and
// sequences scattered over shuffled blocks. Tolerance: one rounding step of the dtype relative to
// the value plus 1e-4 absolute (sin/cos and the fused multiply-adds differ from the CPU's by ulps).
// V is a copy: bitwise. Every cache slot not written must still hold its poison.
#include "kernels/cuda/rope_kv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "model/config.h"

namespace fuselm {
namespace {

using test::DeviceArray;

struct Case {
  int n_heads, n_kv_heads, head_dim, block_size;
  RopeScaling scaling;
};

void run_case(const Case& c, DType dtype, std::mt19937& gen) {
  SCOPED_TRACE(testing::Message() << "heads=" << c.n_heads << " kv_heads=" << c.n_kv_heads << " head_dim=" << c.head_dim
                                  << " block=" << c.block_size << " dtype=" << dtype_name(dtype)
                                  << " scaling=" << rope_scaling_name(c.scaling));
  const int hd = c.head_dim, q_dim = c.n_heads * hd, kv_dim = c.n_kv_heads * hd, row = q_dim + 2 * kv_dim;
  // Three sequences: a prefill chunk from 0, a chunk continuing at 37, one decode token far out.
  const std::vector<std::pair<int, int>> chunks = {{0, 21}, {37, 9}, {5000, 1}};  // (start position, tokens)
  const int max_len = 5001;
  const int max_blocks_per_seq = (max_len + c.block_size - 1) / c.block_size;
  const int batch = static_cast<int>(chunks.size());
  std::vector<int32_t> positions, token_batch;
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < chunks[b].second; ++i) {
      positions.push_back(chunks[b].first + i);
      token_batch.push_back(b);
    }
  const int n = static_cast<int>(positions.size());
  // Block tables: each sequence's blocks drawn from a shuffled pool.
  int num_blocks = 0;
  std::vector<int32_t> tables(static_cast<size_t>(batch) * max_blocks_per_seq, 0);
  std::vector<int32_t> pool_ids(batch * max_blocks_per_seq);
  std::iota(pool_ids.begin(), pool_ids.end(), 0);
  std::shuffle(pool_ids.begin(), pool_ids.end(), gen);
  for (int b = 0; b < batch; ++b) {
    const int needed = (chunks[b].first + chunks[b].second + c.block_size - 1) / c.block_size;
    for (int i = 0; i < needed; ++i) tables[b * max_blocks_per_seq + i] = pool_ids[num_blocks++];
  }
  num_blocks = batch * max_blocks_per_seq;

  RopeConfig rope;
  rope.theta = c.scaling == RopeScaling::Llama3 ? 500000.0f : 10000.0f;
  rope.scaling = c.scaling;
  rope.factor = 32.0f;
  const std::vector<float> inv_freq = rope_inv_freq(rope, hd);

  const test::HostTensor qkv = test::random_tensor(gen, static_cast<int64_t>(n) * row, dtype, -2.0f, 2.0f);
  PagedKvLayout layout{c.block_size, c.n_kv_heads, hd};
  const int64_t pool_elems = layout.block_elems() * num_blocks;
  DeviceArray d_qkv(qkv.bytes.size()), d_q(dtype_bytes(dtype, static_cast<int64_t>(n) * q_dim)),
      d_k(dtype_bytes(dtype, pool_elems)), d_v(dtype_bytes(dtype, pool_elems)), d_pos(n * 4), d_tb(n * 4),
      d_freq(inv_freq.size() * 4), d_tables(tables.size() * 4);
  d_qkv.upload(qkv.data(), qkv.bytes.size());
  d_pos.upload(positions.data(), n * 4);
  d_tb.upload(token_batch.data(), n * 4);
  d_freq.upload(inv_freq.data(), inv_freq.size() * 4);
  d_tables.upload(tables.data(), tables.size() * 4);
  d_q.poison();
  d_k.poison();
  d_v.poison();
  PagedKvView view{d_k.get(), d_v.get(), layout, d_tables.get<int32_t>(), max_blocks_per_seq};
  ASSERT_STATUS_OK(rope_kv(d_qkv.get(), d_q.get(), dtype, {c.n_heads, c.n_kv_heads, hd}, n, d_pos.get<int32_t>(),
                           d_tb.get<int32_t>(), d_freq.get<float>(), view, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());

  // Reference: split the rounded rows into q, k, v and rotate q and k on the CPU.
  std::vector<float> q(static_cast<size_t>(n) * q_dim), k(static_cast<size_t>(n) * kv_dim), v(k.size());
  for (int t = 0; t < n; ++t) {
    const float* r = qkv.values.data() + static_cast<size_t>(t) * row;
    std::copy(r, r + q_dim, q.begin() + static_cast<size_t>(t) * q_dim);
    std::copy(r + q_dim, r + q_dim + kv_dim, k.begin() + static_cast<size_t>(t) * kv_dim);
    std::copy(r + q_dim + kv_dim, r + row, v.begin() + static_cast<size_t>(t) * kv_dim);
  }
  cpu::rope(q.data(), n, c.n_heads, hd, positions.data(), inv_freq.data());
  cpu::rope(k.data(), n, c.n_kv_heads, hd, positions.data(), inv_freq.data());
  const float rtol = test::dtype_ulp(dtype), atol = 1e-4f;
  EXPECT_TRUE(test::all_close(test::download_as_f32(d_q.get(), dtype, static_cast<int64_t>(n) * q_dim), q, atol, rtol));

  const std::vector<float> k_pool = test::download_as_f32(d_k.get(), dtype, pool_elems);
  const std::vector<float> v_pool = test::download_as_f32(d_v.get(), dtype, pool_elems);
  std::vector<float> k_got, v_got;
  std::vector<bool> written(static_cast<size_t>(pool_elems), false);
  for (int t = 0; t < n; ++t) {
    const int p = positions[t];
    const int block = tables[token_batch[t] * max_blocks_per_seq + p / c.block_size];
    for (int h = 0; h < c.n_kv_heads; ++h) {
      const int64_t at = layout.offset(block, h, p % c.block_size);
      for (int d = 0; d < hd; ++d) {
        k_got.push_back(k_pool[at + d]);
        v_got.push_back(v_pool[at + d]);
        written[at + d] = true;
      }
    }
  }
  EXPECT_TRUE(test::all_close(k_got, k, atol, rtol));
  EXPECT_TRUE(test::all_close(v_got, v, 0.0f, 0.0f));
  int64_t stray = 0;
  for (int64_t i = 0; i < pool_elems; ++i)
    if (!written[i] && (!std::isnan(k_pool[i]) || !std::isnan(v_pool[i]))) ++stray;
  EXPECT_EQ(stray, 0) << "cache elements written outside the tokens' slots";
}

TEST(CudaRopeKv, MatchesCpuReference) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(61);
  const Case cases[] = {
      {8, 8, 64, 16, RopeScaling::None},      // GQA 1
      {8, 2, 128, 16, RopeScaling::Llama3},   // GQA 4
      {32, 4, 128, 32, RopeScaling::None},    // GQA 8
      {2, 1, 64, 1, RopeScaling::Llama3},     // one token per block
      {6, 2, 72, 16, RopeScaling::None},      // head_dim/2 = 36: scalar path
      {4, 4, 48, 8, RopeScaling::Linear},     // head_dim/2 = 24: vectorized, odd number of groups
  };
  for (const Case& c : cases)
    for (DType dtype : {DType::BF16, DType::F16}) run_case(c, dtype, gen);
}

}  // namespace
}  // namespace fuselm
