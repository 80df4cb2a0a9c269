// Small-batch fused GEMM kernels against the CPU reference ops, plus bitwise batch invariance.
// Tolerances: the kernels multiply bf16/f16 values exactly and accumulate in fp32, so against an
// fp32 reference on the same rounded inputs the relative error stays near 1e-5; outputs stored in
// bf16 add one rounding (2^-8 relative).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/skinny_gemm.h"
#include "kernels/mma_packing.h"
#include "model/config.h"

namespace fuselm {
namespace {

bool has_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device found; GPU kernel tests run only on a machine with a GPU"

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define STATUS_OK(expr)                       \
  do {                                        \
    Status s_ = (expr);                       \
    ASSERT_TRUE(s_.ok()) << s_.message();     \
  } while (0)

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(&ptr, std::max<size_t>(count, 1) * sizeof(T)), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  void upload(const std::vector<T>& h) { EXPECT_EQ(cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<T> download() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  void poison() { EXPECT_EQ(cudaMemset(ptr, 0xff, n * sizeof(T)), cudaSuccess); }  // NaN for f32/bf16/f16
};

std::mt19937& rng() {
  static std::mt19937 gen(std::random_device{}());
  return gen;
}

std::vector<float> random_values(size_t n, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng());
  return v;
}

std::vector<uint16_t> to_bits(const std::vector<float>& v, DType t) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = t == DType::BF16 ? f32_to_bf16_bits(v[i]) : f32_to_f16_bits(v[i]);
  return out;
}

std::vector<float> rounded(const std::vector<float>& v, DType t) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = round_to(t, v[i]);
  return out;
}

float bits_to_float(uint16_t b, DType t) { return t == DType::BF16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b); }

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - want[i]) * double(got[i] - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// A packed weight on the device plus the fp32 (rounded) copy the reference uses.
struct TestWeight {
  std::vector<float> host;  // [rows][cols], rounded to dtype
  DeviceBuffer<uint16_t> packed;
  PackedWeight view;
  TestWeight(int64_t rows, int64_t cols, DType t, std::span<const int64_t> row_map = {})
      : packed(mma_packed_elems(row_map.empty() ? rows : row_map.size(), cols)) {
    host = rounded(random_values(rows * cols, 1.0f / std::sqrt(float(cols))), t);
    const int64_t packed_rows = row_map.empty() ? rows : static_cast<int64_t>(row_map.size());
    std::vector<uint16_t> buf(mma_packed_elems(packed_rows, cols));
    pack_mma_tiles(host.data(), DType::F32, rows, cols, row_map, t, buf.data());
    packed.upload(buf);
    view = PackedWeight{packed.ptr, t, packed_rows, cols};
  }
};

// Activations [m][stride] in dtype with random values, and their rounded fp32 copy.
struct TestInput {
  std::vector<float> host;
  DeviceBuffer<uint16_t> dev;
  SkinnyInput view;
  TestInput(int m, int64_t cols, DType t, int64_t stride) : dev(m * stride) {
    host = rounded(random_values(m * cols, 1.0f), t);
    std::vector<float> padded(m * stride, 0.0f);
    for (int i = 0; i < m; ++i) std::copy_n(host.begin() + i * cols, cols, padded.begin() + i * stride);
    dev.upload(to_bits(padded, t));
    view = SkinnyInput{dev.ptr, stride, m};
  }
};

std::vector<float> reference_matmul(const std::vector<float>& x, int m, const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<float> out(m * rows);
  cpu::matmul(x.data(), m, cpu::MatrixRef{w.data(), DType::F32, rows, cols}, out.data());
  return out;
}

struct Shape {
  int64_t rows, cols;
};

TEST(SkinnyGemm, StoreMatchesReferenceForEveryVariantAndBatch) {
  REQUIRE_GPU();
  for (DType t : {DType::BF16, DType::F16})
    for (Shape s : {Shape{64, 64}, Shape{200, 130}, Shape{1000, 2048}, Shape{384, 4096}}) {
      TestWeight w(s.rows, s.cols, t);
      for (int m : {1, 3, 8, 9, 16}) {
        const int64_t stride = s.cols + (s.cols % 4 == 0 ? 0 : 2);
        TestInput in(m, s.cols, t, stride);
        const auto want = reference_matmul(in.host, m, w.host, s.rows, s.cols);
        for (const auto& v : skinny_gemm_variants()) {
          DeviceBuffer<float> out(m * s.rows);
          out.poison();
          STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, out.ptr, DType::F32, s.rows, v, nullptr));
          CUDA_OK(cudaDeviceSynchronize());
          const double err = rel_err(out.download(), want);
          EXPECT_LE(err, 1e-4) << dtype_name(t) << " " << s.rows << "x" << s.cols << " m=" << m << " " << v.name();
        }
      }
    }
}

TEST(SkinnyGemm, ResultOfATokenIsBitwiseIndependentOfTheBatch) {
  REQUIRE_GPU();
  const DType t = DType::BF16;
  const int64_t rows = 512, cols = 4096;
  TestWeight w(rows, cols, t);
  TestInput in(16, cols, t, cols);
  for (const auto& v : skinny_gemm_variants()) {
    DeviceBuffer<float> full(16 * rows);
    STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, full.ptr, DType::F32, rows, v, nullptr));
    const auto batch = full.download();
    for (int tok : {0, 5, 8, 15}) {
      for (int m : {1, 8, 9}) {
        if (tok >= m && m != 1) continue;
        // Run a batch of m tokens whose row `row_in_batch` is token `tok`.
        const int row_in_batch = m == 1 ? 0 : tok;
        const auto* base = static_cast<const uint16_t*>(in.view.x) + (tok - row_in_batch) * cols;
        DeviceBuffer<float> part(m * rows);
        STATUS_OK(skinny_gemm_store(w.view, SkinnyInput{base, cols, m}, SkinnyNorm{}, part.ptr, DType::F32, rows, v, nullptr));
        const auto got = part.download();
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(std::memcmp(&got[row_in_batch * rows + r], &batch[tok * rows + r], 4), 0)
              << v.name() << " token " << tok << " in a batch of " << m << " row " << r;
      }
    }
  }
}

TEST(SkinnyGemm, NormPrologueAndResidualEpilogueChain) {
  REQUIRE_GPU();
  for (DType t : {DType::BF16, DType::F16}) {
    const int m = 11;
    const int64_t hidden = 272, out_rows = 272;  // hidden not a multiple of 32: partial tiles
    const int64_t tiles = mma_tiles(hidden);
    // Residual stream and the norm weight of the norm that feeds the GEMM.
    auto resid = random_values(m * hidden, 2.0f);
    auto g = rounded(random_values(hidden, 0.5f), t);
    for (auto& v : g) v = round_to(t, v + 1.0f);
    std::vector<float> xg(m * hidden), partials(m * tiles, 0.0f);
    for (int i = 0; i < m; ++i)
      for (int64_t k = 0; k < hidden; ++k) {
        xg[i * hidden + k] = round_to(t, resid[i * hidden + k] * g[k]);
        partials[i * tiles + k / 16] += resid[i * hidden + k] * resid[i * hidden + k];
      }
    DeviceBuffer<uint16_t> xg_dev(m * hidden);
    xg_dev.upload(to_bits(xg, t));
    DeviceBuffer<float> partials_dev(m * tiles);
    partials_dev.upload(partials);
    const float eps = 1e-5f;
    TestWeight w(out_rows, hidden, t);
    // Reference: rstd * (W . xg), added to a second residual stream.
    auto ref = reference_matmul(xg, m, w.host, out_rows, hidden);
    for (int i = 0; i < m; ++i) {
      double ss = 0;
      for (int64_t k = 0; k < hidden; ++k) ss += double(resid[i * hidden + k]) * resid[i * hidden + k];
      const float rstd = 1.0f / std::sqrt(float(ss / hidden) + eps);
      for (int64_t r = 0; r < out_rows; ++r) ref[i * out_rows + r] *= rstd;
    }
    auto resid2 = random_values(m * out_rows, 1.0f);
    auto g_next = rounded(random_values(out_rows, 1.0f), t);
    DeviceBuffer<float> resid2_dev(m * out_rows);
    resid2_dev.upload(resid2);
    DeviceBuffer<float> g_next_dev(out_rows);
    DeviceBuffer<uint16_t> xg_out(m * out_rows);
    g_next_dev.upload(g_next);
    xg_out.poison();
    DeviceBuffer<float> partials_out(m * mma_tiles(out_rows));
    partials_out.poison();
    SkinnyResidualOut out{resid2_dev.ptr, out_rows, g_next_dev.ptr, xg_out.ptr, out_rows, partials_out.ptr};
    STATUS_OK(skinny_gemm_residual(w.view, SkinnyInput{xg_dev.ptr, hidden, m},
                                   SkinnyNorm{partials_dev.ptr, static_cast<int>(tiles), static_cast<int>(hidden), eps},
                                   out, SkinnyGemmVariant{2, 4}, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> want_resid(m * out_rows), want_xg(m * out_rows), want_part(m * mma_tiles(out_rows), 0.0f);
    for (int i = 0; i < m; ++i)
      for (int64_t r = 0; r < out_rows; ++r) {
        const float v = resid2[i * out_rows + r] + ref[i * out_rows + r];
        want_resid[i * out_rows + r] = v;
        want_xg[i * out_rows + r] = v * g_next[r];
        want_part[i * mma_tiles(out_rows) + r / 16] += v * v;
      }
    EXPECT_LE(rel_err(resid2_dev.download(), want_resid), 1e-5) << dtype_name(t);
    std::vector<float> got_xg;
    for (uint16_t b : xg_out.download()) got_xg.push_back(bits_to_float(b, t));
    EXPECT_LE(rel_err(got_xg, want_xg), t == DType::BF16 ? 5e-3 : 1e-3) << dtype_name(t);
    EXPECT_LE(rel_err(partials_out.download(), want_part), 1e-5) << dtype_name(t);
  }
}

TEST(SkinnyGemm, QkvRopeWritesRotatedQueryAndPagedCache) {
  REQUIRE_GPU();
  for (int head_dim : {64, 128})
    for (auto [heads, kv_heads] : {std::pair{4, 4}, std::pair{8, 2}, std::pair{8, 1}}) {
      const DType t = DType::BF16;
      const int m = 6, hidden = 256;
      const int q_dim = heads * head_dim, kv_dim = kv_heads * head_dim, rows = q_dim + 2 * kv_dim;
      const auto map = qkv_rope_row_map(heads, kv_heads, head_dim);
      TestWeight w(rows, hidden, t, map);
      TestInput in(m, hidden, t, hidden);
      RopeConfig rope;
      rope.theta = 500000.0f;
      rope.scaling = RopeScaling::Llama3;
      rope.factor = 8.0f;
      const auto inv_freq = rope_inv_freq(rope, head_dim);
      DeviceBuffer<float> inv_freq_dev(inv_freq.size());
      inv_freq_dev.upload(inv_freq);
      // Each token is the next token of its own sequence, at a random position, in shuffled blocks.
      const int block_size = 16, max_blocks = 64, num_blocks = m * max_blocks;
      std::vector<int32_t> positions(m), tables(m * max_blocks);
      std::vector<int32_t> perm(num_blocks);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng());
      for (int i = 0; i < m; ++i) {
        positions[i] = std::uniform_int_distribution<int>(0, block_size * max_blocks - 1)(rng());
        for (int b = 0; b < max_blocks; ++b) tables[i * max_blocks + b] = perm[i * max_blocks + b];
      }
      DeviceBuffer<int32_t> pos_dev(m), tables_dev(m * max_blocks);
      pos_dev.upload(positions);
      tables_dev.upload(tables);
      PagedKvLayout layout{block_size, kv_heads, head_dim};
      DeviceBuffer<uint16_t> kcache(num_blocks * layout.block_elems()), vcache(num_blocks * layout.block_elems());
      DeviceBuffer<uint16_t> q(m * q_dim);
      kcache.poison();
      vcache.poison();
      q.poison();
      SkinnyQkvOut out;
      out.q = q.ptr;
      out.q_stride = q_dim;
      out.kv = PagedKvView{kcache.ptr, vcache.ptr, layout, tables_dev.ptr, max_blocks};
      out.positions = pos_dev.ptr;
      out.inv_freq = inv_freq_dev.ptr;
      out.n_heads = heads;
      out.n_kv_heads = kv_heads;
      out.head_dim = head_dim;
      STATUS_OK(skinny_gemm_qkv_rope(w.view, in.view, SkinnyNorm{}, out, SkinnyGemmVariant{1, 8}, nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      // Reference: the plain projection (w.host is in source row order), then the CPU RoPE.
      const auto y = reference_matmul(in.host, m, w.host, rows, hidden);
      std::vector<float> qr(m * q_dim), kr(m * kv_dim), vr(m * kv_dim);
      for (int i = 0; i < m; ++i) {
        std::copy_n(&y[i * rows], q_dim, &qr[i * q_dim]);
        std::copy_n(&y[i * rows + q_dim], kv_dim, &kr[i * kv_dim]);
        std::copy_n(&y[i * rows + q_dim + kv_dim], kv_dim, &vr[i * kv_dim]);
      }
      cpu::rope(qr.data(), m, heads, head_dim, positions.data(), inv_freq.data());
      cpu::rope(kr.data(), m, kv_heads, head_dim, positions.data(), inv_freq.data());
      std::vector<float> got_q, got_k, got_v;
      for (uint16_t b : q.download()) got_q.push_back(bf16_bits_to_f32(b));
      const auto kc = kcache.download(), vc = vcache.download();
      for (int i = 0; i < m; ++i)
        for (int h = 0; h < kv_heads; ++h) {
          const int p = positions[i];
          const int64_t off = layout.offset(tables[i * max_blocks + p / block_size], h, p % block_size);
          for (int d = 0; d < head_dim; ++d) {
            got_k.push_back(bf16_bits_to_f32(kc[off + d]));
            got_v.push_back(bf16_bits_to_f32(vc[off + d]));
          }
        }
      const std::string what = "head_dim " + std::to_string(head_dim) + " heads " + std::to_string(heads) + "/" + std::to_string(kv_heads);
      EXPECT_LE(rel_err(got_q, qr), 5e-3) << what;
      EXPECT_LE(rel_err(got_k, kr), 5e-3) << what;
      EXPECT_LE(rel_err(got_v, vr), 5e-3) << what;
    }
}

TEST(SkinnyGemm, GateUpSwiglu) {
  REQUIRE_GPU();
  for (int ffn : {100, 688}) {
    const DType t = DType::BF16;
    const int m = 13, hidden = 192;
    const auto map = gate_up_row_map(ffn);
    TestWeight w(2 * ffn, hidden, t, map);
    TestInput in(m, hidden, t, hidden);
    DeviceBuffer<uint16_t> act(m * ffn);
    act.poison();
    STATUS_OK(skinny_gemm_swiglu(w.view, in.view, SkinnyNorm{}, SkinnySwigluOut{act.ptr, ffn, ffn}, SkinnyGemmVariant{2, 8}, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    // w.host is in source row order ([gate; up]); the map only reorders rows when packing.
    const auto y = reference_matmul(in.host, m, w.host, 2 * ffn, hidden);
    std::vector<float> want(m * ffn);
    for (int i = 0; i < m; ++i) cpu::swiglu(&y[i * 2 * ffn], &y[i * 2 * ffn + ffn], ffn, &want[i * ffn]);
    std::vector<float> got;
    for (uint16_t b : act.download()) got.push_back(bf16_bits_to_f32(b));
    EXPECT_LE(rel_err(got, want), 5e-3) << "ffn " << ffn;
  }
}

// Not a pass/fail check: prints achieved bandwidth of each variant at Llama-3.1-8B decode shapes.
TEST(SkinnyGemmTiming, Llama8BShapes) {
  REQUIRE_GPU();
  struct Case { const char* name; int64_t rows, cols; };
  const Case cases[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  const int copies = 4;  // rotate weight copies so a 32 MB matrix is not served from the 50 MB L2
  std::printf("%-8s %-4s %-7s %10s %10s\n", "shape", "m", "variant", "us", "GB/s");
  for (const Case& c : cases) {
    const size_t elems = mma_packed_elems(c.rows, c.cols);
    std::vector<DeviceBuffer<uint16_t>*> ws;
    for (int i = 0; i < copies; ++i) {
      ws.push_back(new DeviceBuffer<uint16_t>(elems));
      CUDA_OK(cudaMemset(ws.back()->ptr, 0x3c, elems * 2));  // finite nonzero values
    }
    for (int m : {1, 16}) {
      TestInput in(m, c.cols, DType::BF16, c.cols);
      DeviceBuffer<float> out(m * c.rows);
      for (const auto& v : skinny_gemm_variants()) {
        cudaEvent_t start, stop;
        cudaEventCreate(&start);
        cudaEventCreate(&stop);
        const int iters = 40;
        for (int it = 0; it < iters + 4; ++it) {
          if (it == 4) cudaEventRecord(start);
          PackedWeight pw{ws[it % copies]->ptr, DType::BF16, c.rows, c.cols};
          STATUS_OK(skinny_gemm_store(pw, in.view, SkinnyNorm{}, out.ptr, DType::F32, c.rows, v, nullptr));
        }
        cudaEventRecord(stop);
        CUDA_OK(cudaEventSynchronize(stop));
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        const double us = ms * 1000.0 / iters;
        std::printf("%-8s %-4d %-7s %10.1f %10.1f\n", c.name, m, v.name().c_str(), us, elems * 2.0 / (us * 1e3));
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
      }
    }
    for (auto* w : ws) delete w;
  }
}

}  // namespace
}  // namespace fuselm
