#pragma once
// Helpers shared by the attention kernel tests: device buffers, random paged K/V caches with
// shuffled block tables, 16-bit conversions and error statistics against an fp32 reference.
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
#include "kernels/cuda/attention.h"

namespace fuselm::attention_test {

inline bool have_cuda_device() {
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
  size_t size() const { return n_; }
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

inline std::string dtype_str(DType t) { return std::string(dtype_name(t)); }

inline uint16_t to_bits(DType t, float f) { return t == DType::BF16 ? f32_to_bf16_bits(f) : f32_to_f16_bits(f); }
inline float from_bits(DType t, uint16_t b) { return t == DType::BF16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b); }

// n random values in [-amplitude, amplitude), stored as 16-bit bits.
inline std::vector<uint16_t> random_bits(DType t, size_t n, float amplitude, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-amplitude, amplitude);
  std::vector<uint16_t> out(n);
  for (auto& b : out) b = to_bits(t, dist(rng));
  return out;
}

inline std::vector<float> to_f32(DType t, const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = from_bits(t, bits[i]);
  return out;
}

// One sequence's cache contents, [kv_len][n_kv_heads][head_dim] (the CPU reference's layout).
struct SeqKv {
  int kv_len = 0;
  std::vector<uint16_t> k, v;
};

inline SeqKv random_seq_kv(DType t, int kv_len, int n_kv_heads, int head_dim, std::mt19937& rng) {
  const size_t n = static_cast<size_t>(kv_len) * n_kv_heads * head_dim;
  return {kv_len, random_bits(t, n, 1.0f, rng), random_bits(t, n, 1.0f, rng)};
}

// Random K/V for sequences of `lens` tokens, in order, and pointers to them (what the runners take).
struct RandomSeqs {
  std::vector<SeqKv> seqs;
  std::vector<const SeqKv*> ptrs;
  RandomSeqs(DType t, const std::vector<int>& lens, int n_kv_heads, int head_dim, std::mt19937& rng) {
    for (int len : lens) seqs.push_back(random_seq_kv(t, len, n_kv_heads, head_dim, rng));
    for (const SeqKv& s : seqs) ptrs.push_back(&s);
  }
  RandomSeqs(const RandomSeqs&) = delete;  // ptrs point into seqs
  RandomSeqs& operator=(const RandomSeqs&) = delete;
};

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

inline void build_paged_cache(PagedCache& cache, const std::vector<const SeqKv*>& seqs, PagedKvLayout layout,
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

// Error of a 16-bit output against an fp32 reference.
struct ErrorStats {
  double rel_l2 = 0.0;
  double max_abs = 0.0;
  int64_t non_finite = 0;
};

inline ErrorStats compare(DType t, const std::vector<uint16_t>& out, const std::vector<float>& ref) {
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

}  // namespace fuselm::attention_test
