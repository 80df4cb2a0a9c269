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

namespace fuselm {
namespace {

bool have_cuda_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_CUDA_DEVICE()                                                                    \
  do {                                                                                           \
    if (!have_cuda_device())                                                                     \
      GTEST_SKIP() << "no CUDA device found (cudaGetDeviceCount): attention kernels need a GPU"; \
  } while (0)

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())
#define ASSERT_STATUS_OK(expr)            \
  do {                                    \
    Status s_ = (expr);                   \
    ASSERT_TRUE(s_.ok()) << s_.message(); \
  } while (0)

constexpr uint16_t kNanBits = 0xffff;  // NaN in bf16 and in fp16
constexpr int kBlockSize = 16;
constexpr int kNumKvHeads = 2;

// Device memory owned by a test; freed on scope exit.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n > 0 && cudaMalloc(&ptr_, n * sizeof(T)) != cudaSuccess) ptr_ = nullptr;
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(n_, other.n_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  T* get() const { return ptr_; }
  bool upload(const std::vector<T>& host) {
    return ptr_ && host.size() == n_ &&
           cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) host.clear();
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

uint16_t to_bits(DType t, float f) { return t == DType::BF16 ? f32_to_bf16_bits(f) : f32_to_f16_bits(f); }
float from_bits(DType t, uint16_t b) { return t == DType::BF16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b); }

// n random values in [-amplitude, amplitude), stored as 16-bit bits.
std::vector<uint16_t> random_bits(DType t, size_t n, float amplitude, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-amplitude, amplitude);
  std::vector<uint16_t> out(n);
  for (auto& b : out) b = to_bits(t, dist(rng));
  return out;
}

std::vector<float> to_f32(DType t, const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = from_bits(t, bits[i]);
  return out;
}

// One sequence's cache contents, [kv_len][n_kv_heads][head_dim] (the CPU reference's layout).
struct SeqKv {
  int kv_len = 0;
  std::vector<uint16_t> k, v;
};

SeqKv random_seq_kv(DType t, int kv_len, int n_kv_heads, int head_dim, std::mt19937& rng) {
  const size_t n = static_cast<size_t>(kv_len) * n_kv_heads * head_dim;
  return {kv_len, random_bits(t, n, 1.0f, rng), random_bits(t, n, 1.0f, rng)};
}

// A paged cache on the device holding `seqs` in shuffled, non-contiguous blocks.
struct PagedCache {
  PagedKvLayout layout;
  int max_blocks_per_seq = 0;
  DeviceBuffer<uint16_t> k_pool, v_pool;
  DeviceBuffer<int32_t> block_tables;
  DeviceBuffer<int32_t> kv_lens;

  PagedKvView view() const {
    PagedKvView v;
    v.k = k_pool.get();
    v.v = v_pool.get();
    v.layout = layout;
    v.block_tables = block_tables.get();
    v.max_blocks_per_seq = max_blocks_per_seq;
    return v;
  }
};

void build_paged_cache(PagedCache& cache, const std::vector<const SeqKv*>& seqs, PagedKvLayout layout,
                       std::mt19937& rng) {
  const int bs = layout.block_size;
  std::vector<int> blocks_needed;
  int total = 0;
  int max_needed = 0;
  for (const SeqKv* s : seqs) {
    blocks_needed.push_back((s->kv_len + bs - 1) / bs);
    total += blocks_needed.back();
    max_needed = std::max(max_needed, blocks_needed.back());
  }
  // One spare block, left NaN, pads every table row (and the tables get two extra columns).
  const int num_blocks = total + 1;
  cache.layout = layout;
  cache.max_blocks_per_seq = max_needed + 2;
  std::vector<int32_t> order(num_blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const int32_t spare = order.back();

  std::vector<uint16_t> k_pool(static_cast<size_t>(num_blocks) * layout.block_elems(), kNanBits);
  std::vector<uint16_t> v_pool(k_pool.size(), kNanBits);
  std::vector<int32_t> tables(seqs.size() * cache.max_blocks_per_seq, spare);
  std::vector<int32_t> lens;
  int next = 0;
  for (size_t b = 0; b < seqs.size(); ++b) {
    const SeqKv& s = *seqs[b];
    lens.push_back(s.kv_len);
    for (int i = 0; i < blocks_needed[b]; ++i) tables[b * cache.max_blocks_per_seq + i] = order[next++];
    for (int p = 0; p < s.kv_len; ++p)
      for (int h = 0; h < layout.n_kv_heads; ++h) {
        const int64_t dst = layout.offset(tables[b * cache.max_blocks_per_seq + p / bs], h, p % bs);
        const size_t src = (static_cast<size_t>(p) * layout.n_kv_heads + h) * layout.head_dim;
        std::memcpy(&k_pool[dst], &s.k[src], layout.head_dim * sizeof(uint16_t));
        std::memcpy(&v_pool[dst], &s.v[src], layout.head_dim * sizeof(uint16_t));
      }
  }
  cache.k_pool = DeviceBuffer<uint16_t>(k_pool);
  cache.v_pool = DeviceBuffer<uint16_t>(v_pool);
  cache.block_tables = DeviceBuffer<int32_t>(tables);
  cache.kv_lens = DeviceBuffer<int32_t>(lens);
}

struct ErrorStats {
  double rel_l2 = 0.0;
  double max_abs = 0.0;
  int64_t non_finite = 0;
};

ErrorStats compare(DType t, const std::vector<uint16_t>& out, const std::vector<float>& ref) {
  ErrorStats e;
  double err2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float o = from_bits(t, out[i]);
    if (!std::isfinite(o)) {
      ++e.non_finite;
      continue;
    }
    const double d = static_cast<double>(o) - ref[i];
    err2 += d * d;
    ref2 += static_cast<double>(ref[i]) * ref[i];
    e.max_abs = std::max(e.max_abs, std::fabs(d));
  }
  e.rel_l2 = std::sqrt(err2 / std::max(ref2, 1e-30));
  return e;
}

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
  std::vector<SeqKv> seqs;
  std::vector<const SeqKv*> ptrs;
  for (int len : lens) seqs.push_back(random_seq_kv(c.dtype, len, shape.n_kv_heads, shape.head_dim, rng));
  for (const auto& s : seqs) ptrs.push_back(&s);
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
    std::vector<SeqKv> seqs;
    std::vector<const SeqKv*> ptrs;
    for (int len : lens) seqs.push_back(random_seq_kv(dtype, len, shape.n_kv_heads, shape.head_dim, rng));
    for (const auto& s : seqs) ptrs.push_back(&s);
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
