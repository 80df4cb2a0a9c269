// Small-batch fused GEMM kernels against the CPU reference ops, for every variant and epilogue, plus
// bitwise batch invariance, run-to-run determinism and PDL / graph-capture equivalence.
// Tolerances: the kernels multiply bf16/f16 values exactly and accumulate in fp32, so against an
// fp32 reference on the same rounded inputs the relative error stays near 1e-5; outputs stored in
// bf16 add one rounding (2^-8 relative).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "bench/peak_bandwidth.h"
#include "core/dtype.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/skinny_gemm.h"
#include "kernels/mma_packing.h"
#include "model/config.h"
#include "plan/plan.h"

namespace fuselm {
namespace {

int sm_count() {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms;
}

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
      : TestWeight(random_values(rows * cols, 1.0f / std::sqrt(float(cols))), rows, cols, t, row_map) {}
  // Given values [rows][cols] (rounded to t here).
  TestWeight(const std::vector<float>& values, int64_t rows, int64_t cols, DType t,
             std::span<const int64_t> row_map = {})
      : packed(mma_packed_elems(row_map.empty() ? rows : row_map.size(), cols)) {
    host = rounded(values, t);
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

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Rows not a multiple of 16, K not a multiple of 16 (130: 4-byte aligned input rows; 1030 and 30:
// 16-byte aligned rows whose last 16-byte chunk is partly past K), K shorter than one warp's share.
TEST(SkinnyGemm, StoreMatchesReferenceForEveryVariantAndBatch) {
  REQUIRE_GPU();
  for (DType t : {DType::BF16, DType::F16})
    for (Shape s : {Shape{64, 64}, Shape{200, 130}, Shape{1000, 2048}, Shape{384, 4096}, Shape{100, 1030},
                    Shape{40, 30}}) {
      TestWeight w(s.rows, s.cols, t);
      for (int m : {1, 3, 8, 9, 16}) {
        const int64_t stride = s.cols + (s.cols % 4 == 0 ? 0 : 2);
        TestInput in(m, s.cols, t, stride);
        const auto want = reference_matmul(in.host, m, w.host, s.rows, s.cols);
        DeviceBuffer<float> out(m * s.rows);
        for (const auto& v : skinny_gemm_variants()) {
          out.poison();
          STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, out.ptr, DType::F32, s.rows, v, nullptr));
          CUDA_OK(cudaDeviceSynchronize());
          const double err = rel_err(out.download(), want);
          EXPECT_LE(err, 1e-4) << dtype_name(t) << " " << s.rows << "x" << s.cols << " m=" << m << " " << v.name();
        }
      }
    }
}

// The greedy pick (SkinnyGreedyPick): for every variant and 1-4 tokens, the picked id of each greedy
// row without penalty is the argmax of the logits the launch stored (ties to the lower row, NaN never
// picked, -1 when every logit is NaN); other rows' tokens are left alone; the logits are the same
// bits as without the pick; the CTA counter is left at 0 (the second run of each case needs it).
TEST(SkinnyGemm, GreedyPickIsTheArgmaxOfTheStoredLogits) {
  REQUIRE_GPU();
  const DType t = DType::BF16;
  for (Shape s : {Shape{1000, 2048}, Shape{200, 130}}) {
    TestInput in(4, s.cols, t, s.cols + (s.cols % 4 == 0 ? 0 : 2));
    // Token 0's logits tie at their largest between rows 300 and 700 (same weights, aligned with its
    // activations), where the shape has them.
    std::vector<float> values = random_values(s.rows * s.cols, 1.0f / std::sqrt(float(s.cols)));
    if (s.rows > 700)
      for (int64_t k = 0; k < s.cols; ++k)
        values[300 * s.cols + k] = values[700 * s.cols + k] = in.host[k] >= 0 ? 0.25f : -0.25f;
    TestWeight w(values, s.rows, s.cols, t);
    // Greedy; greedy with a penalty to apply (not picked); temperature (not picked); greedy.
    std::vector<SampleParams> params(4);
    params[1].repetition_penalty = 1.3f;
    params[1].history_len = 2;
    params[2].temperature = 0.8f;
    DeviceBuffer<SampleParams> d_params(4);
    d_params.upload(params);
    DeviceBuffer<uint64_t> keys(skinny_greedy_pick_key_bytes(4, s.rows) / sizeof(uint64_t));
    DeviceBuffer<int> counter(1);
    CUDA_OK(cudaMemset(counter.ptr, 0, sizeof(int)));
    DeviceBuffer<int32_t> tokens(4);
    for (const auto& v : skinny_gemm_variants()) {
      if ((v.k_split > 1 || v.pipeline != SkinnyPipeline::kWarpSplitK) && !skinny_gemm_clusters_supported()) continue;
      for (int m : {1, 2, 4}) {
        const SkinnyInput x{in.view.x, in.view.stride, m};
        DeviceBuffer<float> plain(m * s.rows), out(m * s.rows);
        STATUS_OK(skinny_gemm_store(w.view, x, SkinnyNorm{}, plain.ptr, DType::F32, s.rows, v, nullptr));
        for (int run = 0; run < 2; ++run) {
          CUDA_OK(cudaMemset(tokens.ptr, 0x7f, 4 * sizeof(int32_t)));  // untouched rows read 0x7f7f7f7f
          const SkinnyGreedyPick pick{d_params.ptr, keys.ptr, counter.ptr, tokens.ptr, nullptr};
          STATUS_OK(skinny_gemm_store(w.view, x, SkinnyNorm{}, out.ptr, DType::F32, s.rows, v, nullptr, {}, pick));
          const std::vector<float> logits = out.download();
          ASSERT_TRUE(bitwise_equal(logits, plain.download())) << v.name() << " m=" << m;
          const std::vector<int32_t> got = tokens.download();
          for (int tok = 0; tok < m; ++tok) {
            int32_t want = 0x7f7f7f7f;
            if (greedy_without_penalty(params[tok])) {
              want = -1;
              for (int64_t r = 0; r < s.rows; ++r) {
                const float l = logits[tok * s.rows + r];
                if (!std::isnan(l) && (want < 0 || l > logits[tok * s.rows + want])) want = static_cast<int32_t>(r);
              }
            }
            EXPECT_EQ(got[tok], want) << v.name() << " " << s.rows << "x" << s.cols << " m=" << m << " token " << tok;
          }
          if (s.rows > 700 && m >= 1) EXPECT_EQ(got[0], 300) << v.name() << ": the tie goes to the lower row";
          ASSERT_EQ(counter.download()[0], 0) << v.name() << " m=" << m;
        }
      }
    }
  }
}

// Every logit NaN (a NaN activation): the pick is -1, as the sampling kernel's scan gives.
TEST(SkinnyGemm, GreedyPickOfNaNLogitsIsMinusOne) {
  REQUIRE_GPU();
  const int64_t rows = 300, cols = 256;
  TestWeight w(rows, cols, DType::BF16);
  std::vector<float> x = rounded(random_values(cols, 1.0f), DType::BF16);
  x[17] = NAN;
  DeviceBuffer<uint16_t> d_x(cols);
  d_x.upload(to_bits(x, DType::BF16));
  DeviceBuffer<SampleParams> params(1);
  params.upload({SampleParams{}});
  DeviceBuffer<uint64_t> keys(skinny_greedy_pick_key_bytes(1, rows) / sizeof(uint64_t));
  DeviceBuffer<int> counter(1);
  CUDA_OK(cudaMemset(counter.ptr, 0, sizeof(int)));
  DeviceBuffer<int32_t> token(1);
  DeviceBuffer<float> out(rows);
  const SkinnyGreedyPick pick{params.ptr, keys.ptr, counter.ptr, token.ptr, nullptr};
  const SkinnyGemmVariant v = default_skinny_variant(rows, cols, 132, skinny_gemm_clusters_supported());
  STATUS_OK(skinny_gemm_store(w.view, SkinnyInput{d_x.ptr, cols, 1}, SkinnyNorm{}, out.ptr, DType::F32, rows, v,
                              nullptr, {}, pick));
  EXPECT_EQ(token.download()[0], -1);
  // Bad requests: more tokens than the pick takes, or output not in f32.
  DeviceBuffer<uint16_t> x5(5 * cols), out16(5 * rows);
  EXPECT_FALSE(skinny_gemm_store(w.view, SkinnyInput{x5.ptr, cols, 5}, SkinnyNorm{}, out.ptr, DType::F32, rows, v,
                                 nullptr, {}, pick).ok());
  EXPECT_FALSE(skinny_gemm_store(w.view, SkinnyInput{d_x.ptr, cols, 1}, SkinnyNorm{}, out16.ptr, DType::BF16, rows, v,
                                 nullptr, {}, pick).ok());
}

// Token i of a batch of 16 gives the same bits as token i alone or in a batch of 3, 8 or 9.
TEST(SkinnyGemm, ResultOfATokenIsBitwiseIndependentOfTheBatch) {
  REQUIRE_GPU();
  const DType t = DType::BF16;
  for (Shape s : {Shape{512, 4096}, Shape{200, 1030}}) {
    const int64_t rows = s.rows, cols = s.cols;
    TestWeight w(rows, cols, t);
    TestInput in(16, cols, t, cols + cols % 8);
    const int64_t stride = in.view.stride;
    for (const auto& v : skinny_gemm_variants()) {
      DeviceBuffer<float> full(16 * rows);
      STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, full.ptr, DType::F32, rows, v, nullptr));
      const auto batch = full.download();
      for (int tok : {0, 2, 5, 8, 15}) {
        for (int m : {1, 3, 8, 9}) {
          if (tok >= m && m != 1) continue;
          // Run a batch of m tokens whose row `row_in_batch` is token `tok`.
          const int row_in_batch = m == 1 ? 0 : tok;
          const auto* base = static_cast<const uint16_t*>(in.view.x) + (tok - row_in_batch) * stride;
          DeviceBuffer<float> part(m * rows);
          STATUS_OK(skinny_gemm_store(w.view, SkinnyInput{base, stride, m}, SkinnyNorm{}, part.ptr, DType::F32, rows, v,
                                      nullptr));
          const auto got = part.download();
          for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(std::memcmp(&got[row_in_batch * rows + r], &batch[tok * rows + r], 4), 0)
                << v.name() << " " << rows << "x" << cols << " token " << tok << " in a batch of " << m << " row " << r;
        }
      }
    }
  }
}

// Runs 16 tokens (two 8-token tiles: the shallow four-stage ring) and then 1, 5 and 8 of them (one
// tile: the ring the launch picks for its grid and K loop) through every one-row-tile, 8-warp warp
// pipeline (those with a K split only where clusters run, and only if `k_splits`). The 16 must match
// the reference, and each token's bits must be the same either way. Counts the variants run.
void expect_one_tile_keeps_a_tokens_bits(int64_t rows, int64_t cols, bool k_splits, int& checked) {
  const DType t = DType::BF16;
  TestWeight w(rows, cols, t);
  TestInput in(16, cols, t, cols);
  const auto want = reference_matmul(in.host, 16, w.host, rows, cols);
  for (const auto& v : skinny_gemm_variants()) {
    if (v.row_tiles != 1 || v.warps != 8 || v.pipeline != SkinnyPipeline::kWarpSplitK) continue;
    if (v.k_split > 1 && (!k_splits || !skinny_gemm_clusters_supported())) continue;
    DeviceBuffer<float> full(16 * rows);
    STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, full.ptr, DType::F32, rows, v, nullptr));
    const auto shallow = full.download();
    EXPECT_LE(rel_err(shallow, want), 1e-4) << v.name();
    for (int m : {1, 5, 8}) {
      DeviceBuffer<float> part(m * rows);
      STATUS_OK(skinny_gemm_store(w.view, SkinnyInput{in.view.x, cols, m}, SkinnyNorm{}, part.ptr, DType::F32, rows, v,
                                  nullptr));
      const auto got = part.download();
      ASSERT_EQ(std::memcmp(got.data(), shallow.data(), got.size() * sizeof(float)), 0) << v.name() << " m=" << m;
    }
    ++checked;
  }
}

// A grid that fits one CTA per SM, with long K loops (K = 8200: 64+ k-tiles a warp, and a K tail),
// runs one tile on twice the stages.
TEST(SkinnyGemm, DeepWarpPipelineKeepsATokensBits) {
  REQUIRE_GPU();
  int checked = 0;
  expect_one_tile_keeps_a_tokens_bits(1000, 8200, true, checked);
  EXPECT_GT(checked, 0);
}

// A grid of one to two CTAs an SM, with short K loops (K = 2000: at most 16 k-tiles a warp, and a K
// tail), runs one tile on three stages.
TEST(SkinnyGemm, ThreeStageWarpPipelineKeepsATokensBits) {
  REQUIRE_GPU();
  int checked = 0;
  expect_one_tile_keeps_a_tokens_bits(16 * (sm_count() * 3 / 2), 2000, false, checked);
  EXPECT_GT(checked, 0);
}

TEST(SkinnyGemm, RepeatedRunsAreBitwiseIdentical) {
  REQUIRE_GPU();
  const int64_t rows = 1000, cols = 4096;
  TestWeight w(rows, cols, DType::BF16);
  TestInput in(16, cols, DType::BF16, cols);
  for (const auto& v : skinny_gemm_variants()) {
    DeviceBuffer<float> out(16 * rows);
    STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, out.ptr, DType::F32, rows, v, nullptr));
    const auto first = out.download();
    for (int rep = 0; rep < 4; ++rep) {
      out.poison();
      STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, out.ptr, DType::F32, rows, v, nullptr));
      ASSERT_TRUE(bitwise_equal(out.download(), first)) << v.name() << " run " << rep;
    }
  }
}

// balance_sms pads each CTA's shared memory and changes nothing else: every variant gives the same
// bits with it, and a grid without clusters that fits at once (no other kernel running) puts no more
// than ceil(CTAs / SMs) CTAs on an SM (a cluster grid gets a higher cap where its clusters would not
// all fit in one wave otherwise). Counted by the kernels' per-SM trace.
TEST(SkinnyGemm, BalancedPlacementKeepsTheBitsAndSpreadsTheGrid) {
  REQUIRE_GPU();
  int device = 0, sms = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ASSERT_LE(sms, KernelTrace::kSms);
  // 264 row tiles; K long enough that every CTA is still running when the last one is placed (an SM
  // whose CTAs end before the grid is out would take another).
  const int64_t rows = 16 * 264, cols = 8192;
  TestWeight w(rows, cols, DType::BF16);
  DeviceBuffer<KernelTrace> trace(1);
  for (int m : {1, 16}) {
    TestInput in(m, cols, DType::BF16, cols);
    for (const auto& v : skinny_gemm_variants()) {
      if (v.k_split > 1 && !skinny_gemm_clusters_supported()) continue;
      if (v.pipeline != SkinnyPipeline::kWarpSplitK && !skinny_gemm_clusters_supported()) continue;
      DeviceBuffer<float> out(m * rows);
      STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, out.ptr, DType::F32, rows, v, nullptr));
      const auto want = out.download();
      out.poison();
      trace.poison();  // all ones: an empty slot
      SkinnyGemmLaunch launch;
      launch.balance_sms = true;
      launch.trace = trace.ptr;
      STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, out.ptr, DType::F32, rows, v, nullptr, launch));
      ASSERT_TRUE(bitwise_equal(out.download(), want)) << v.name() << " m=" << m;
      const KernelTrace t = trace.download()[0];
      int ctas = 0, most = 0;
      for (int sm = 0; sm < sms; ++sm) {
        ctas += t.sm_ctas(sm);
        most = std::max(most, t.sm_ctas(sm));
      }
      const int cap = (ctas + sms - 1) / sms;
      if (v.k_split == 1) EXPECT_LE(most, cap) << v.name() << " m=" << m << ": " << ctas << " CTAs";
    }
  }
}

TEST(SkinnyGemm, UnsupportedVariantsReturnAnError) {
  REQUIRE_GPU();
  TestWeight w(64, 64, DType::BF16);
  TestInput in(1, 64, DType::BF16, 64);
  DeviceBuffer<float> out(64);
  for (SkinnyGemmVariant v :
       {SkinnyGemmVariant{3, 8, 1}, SkinnyGemmVariant{4, 16, 1}, SkinnyGemmVariant{4, 4, 0}, SkinnyGemmVariant{4, 4, 9},
        SkinnyGemmVariant{4, 8, 1, SkinnyPipeline::kCtaSplitRows}, SkinnyGemmVariant{2, 8, 2, SkinnyPipeline::kRegisters}}) {
    const Status s = skinny_gemm_store(w.view, in.view, SkinnyNorm{}, out.ptr, DType::F32, 64, v, nullptr);
    EXPECT_FALSE(s.ok()) << v.name();
    EXPECT_NE(s.message().find("unsupported"), std::string::npos) << s.message();
  }
  int device = 0, major = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (!skinny_gemm_clusters_supported()) {
    for (SkinnyGemmVariant v : {SkinnyGemmVariant{4, 4, 2}, SkinnyGemmVariant{2, 4, 1, SkinnyPipeline::kCtaSplitRows}}) {
      const Status s = skinny_gemm_store(w.view, in.view, SkinnyNorm{}, out.ptr, DType::F32, 64, v, nullptr);
      EXPECT_FALSE(s.ok());
      EXPECT_NE(s.message().find("cluster"), std::string::npos) << s.message();
    }
  } else {
    EXPECT_GE(major, 9);
  }
}

// The plan's choice: a registered variant, never a K split without clusters.
TEST(SkinnyGemm, DefaultVariantIsARegisteredVariant) {
  const auto all = skinny_gemm_variants();
  const Shape shapes[] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {128256, 4096},
                          {3072, 2048}, {2048, 2048}, {16384, 2048}, {2048, 8192},  {32000, 2048},
                          {48, 64},     {16, 16}};
  for (Shape s : shapes)
    for (bool clusters : {false, true})
      for (int sms : {1, 108, 132}) {
        const SkinnyGemmVariant v = default_skinny_variant(s.rows, s.cols, sms, clusters);
        const bool known = std::any_of(all.begin(), all.end(), [&](const SkinnyGemmVariant& a) {
          return a.name() == v.name();
        });
        EXPECT_TRUE(known) << v.name() << " for " << s.rows << "x" << s.cols;
        if (!clusters) {
          EXPECT_EQ(v.k_split, 1) << s.rows << "x" << s.cols;
          EXPECT_EQ(v.pipeline, SkinnyPipeline::kWarpSplitK) << s.rows << "x" << s.cols;
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
    std::vector<float> want_resid(m * out_rows), want_xg(m * out_rows), want_part(m * mma_tiles(out_rows), 0.0f);
    for (int i = 0; i < m; ++i)
      for (int64_t r = 0; r < out_rows; ++r) {
        const float v = resid2[i * out_rows + r] + ref[i * out_rows + r];
        want_resid[i * out_rows + r] = v;
        want_xg[i * out_rows + r] = v * g_next[r];
        want_part[i * mma_tiles(out_rows) + r / 16] += v * v;
      }
    DeviceBuffer<float> resid2_dev(m * out_rows);
    DeviceBuffer<float> g_next_dev(out_rows);  // the norm weights stay fp32
    DeviceBuffer<uint16_t> xg_out(m * out_rows);
    g_next_dev.upload(g_next);
    DeviceBuffer<float> partials_out(m * mma_tiles(out_rows));
    for (const auto& variant : skinny_gemm_variants()) {
      resid2_dev.upload(resid2);
      xg_out.poison();
      partials_out.poison();
      SkinnyResidualOut out{resid2_dev.ptr, out_rows, g_next_dev.ptr, xg_out.ptr, out_rows, partials_out.ptr};
      STATUS_OK(skinny_gemm_residual(w.view, SkinnyInput{xg_dev.ptr, hidden, m},
                                     SkinnyNorm{partials_dev.ptr, static_cast<int>(tiles), static_cast<int>(hidden), eps},
                                     out, variant, nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      const std::string what = std::string(dtype_name(t)) + " " + variant.name();
      EXPECT_LE(rel_err(resid2_dev.download(), want_resid), 1e-5) << what;
      std::vector<float> got_xg;
      for (uint16_t b : xg_out.download()) got_xg.push_back(bits_to_float(b, t));
      EXPECT_LE(rel_err(got_xg, want_xg), t == DType::BF16 ? 5e-3 : 1e-3) << what;
      EXPECT_LE(rel_err(partials_out.download(), want_part), 1e-5) << what;
    }
  }
}

// One token through a CTA-pipeline variant with k_split 4 or 8 runs on its warp-pipeline twin
// (SkinnyGemmLaunch::single_token_twin); the twin must give the CTA kernel's bits, norm and
// residual epilogue included, or batch 1 would round differently from every other batch.
TEST(SkinnyGemm, SingleTokenTwinGivesTheCtaPipelinesBits) {
  REQUIRE_GPU();
  if (!skinny_gemm_clusters_supported()) GTEST_SKIP() << "the CTA pipeline needs sm_90 clusters";
  const DType t = DType::BF16;
  for (Shape s : {Shape{512, 4096}, Shape{200, 1030}, Shape{272, 14336}}) {
    const int64_t rows = s.rows, cols = s.cols, tiles = mma_tiles(cols);
    TestWeight w(rows, cols, t);
    TestInput in(1, cols, t, cols + cols % 8);
    DeviceBuffer<float> norm_partials(tiles);
    std::vector<float> squares = random_values(tiles, 1.0f);
    for (auto& x : squares) x = x * x;
    norm_partials.upload(squares);
    const SkinnyNorm norm{norm_partials.ptr, static_cast<int>(tiles), static_cast<int>(cols), 1e-5f};
    const auto resid0 = random_values(rows, 1.0f);
    DeviceBuffer<float> g_next(rows);
    g_next.upload(random_values(rows, 1.0f));
    int twins = 0;
    for (const auto& v : skinny_gemm_variants()) {
      if (v.pipeline != SkinnyPipeline::kCtaSplitRows || (v.k_split != 4 && v.k_split != 8)) continue;
      ++twins;
      std::vector<float> got[2];
      std::vector<uint16_t> got_xg[2];
      for (int twin = 0; twin < 2; ++twin) {
        DeviceBuffer<float> resid(rows), partials(mma_tiles(rows));
        DeviceBuffer<uint16_t> xg(rows);
        resid.upload(resid0);
        partials.poison();
        xg.poison();
        SkinnyGemmLaunch launch;
        launch.single_token_twin = twin == 1;
        STATUS_OK(skinny_gemm_residual(w.view, in.view, norm,
                                       SkinnyResidualOut{resid.ptr, rows, g_next.ptr, xg.ptr, rows, partials.ptr}, v,
                                       nullptr, launch));
        got[twin] = resid.download();
        const auto p = partials.download();
        got[twin].insert(got[twin].end(), p.begin(), p.end());
        got_xg[twin] = xg.download();
      }
      EXPECT_TRUE(bitwise_equal(got[0], got[1])) << v.name() << " " << rows << "x" << cols;
      EXPECT_TRUE(bitwise_equal(got_xg[0], got_xg[1])) << v.name() << " " << rows << "x" << cols;
    }
    EXPECT_GT(twins, 0);
  }
}

// The plan may run one variant for one token and another for more when they share a rounding class
// (plan/plan.h): every variant of a class must give the same bits, at every token count.
TEST(SkinnyGemm, VariantsOfOneRoundingClassGiveTheSameBits) {
  REQUIRE_GPU();
  const bool clusters = skinny_gemm_clusters_supported();
  const DType t = DType::BF16;
  for (Shape s : {Shape{512, 4096}, Shape{200, 1030}, Shape{272, 14336}}) {
    const int64_t rows = s.rows, cols = s.cols, tiles = mma_tiles(cols);
    TestWeight w(rows, cols, t);
    DeviceBuffer<float> norm_partials(int64_t{16} * tiles);
    std::vector<float> squares = random_values(16 * tiles, 1.0f);
    for (auto& x : squares) x = x * x;
    norm_partials.upload(squares);
    const SkinnyNorm norm{norm_partials.ptr, static_cast<int>(tiles), static_cast<int>(cols), 1e-5f};
    for (int m : {1, 5, 16}) {
      TestInput in(m, cols, t, cols + cols % 8);
      std::map<std::string, std::pair<std::string, std::vector<float>>> first;  // class -> (variant, result)
      int compared = 0;
      for (const auto& v : skinny_gemm_variants()) {
        if (!clusters && (v.k_split > 1 || v.pipeline == SkinnyPipeline::kCtaSplitRows)) continue;
        DeviceBuffer<float> out(int64_t{m} * rows);
        out.poison();
        SkinnyGemmLaunch launch;
        launch.single_token_twin = false;
        STATUS_OK(skinny_gemm_store(w.view, in.view, norm, out.ptr, DType::F32, rows, v, nullptr, launch));
        const std::string cls = skinny_rounding_class(v.name());
        std::vector<float> got = out.download();
        auto [it, added] = first.try_emplace(cls, v.name(), got);
        if (added) continue;
        ++compared;
        EXPECT_TRUE(bitwise_equal(it->second.second, got))
            << v.name() << " against " << it->second.first << " (class " << cls << "), " << rows << "x" << cols
            << ", m=" << m;
      }
      if (clusters) EXPECT_GT(compared, 10);
    }
  }
}

// The CTA and register pipelines read weights packed in tile groups of their row tiles per CTA
// (mma_packing.h) with the bits they have on the row-tile-major layout (K = 14,336: several register
// activation windows; 200 rows: a last group padded with zero tiles; m = 1 keeps the CTA variant, no
// warp twin); the warp pipeline, and a group not the CTA's, are refused.
TEST(SkinnyGemm, CtaAndRegisterPipelinesReadTileGroupsWithTheSameBits) {
  REQUIRE_GPU();
  const bool clusters = skinny_gemm_clusters_supported();
  const DType t = DType::BF16;
  int compared = 0;
  for (Shape s : {Shape{512, 4096}, Shape{200, 1030}, Shape{272, 14336}}) {
    TestWeight w(s.rows, s.cols, t);
    for (const auto& v : skinny_gemm_variants()) {
      const bool cta = v.pipeline == SkinnyPipeline::kCtaSplitRows;
      if (v.pipeline == SkinnyPipeline::kWarpSplitK || ((cta || v.k_split > 1) && !clusters)) continue;
      const int group = v.row_tiles * v.warps;
      std::vector<uint16_t> buf(mma_packed_elems(s.rows, s.cols, group));
      pack_mma_tiles(w.host.data(), DType::F32, s.rows, s.cols, {}, t, buf.data(), group);
      DeviceBuffer<uint16_t> grouped_dev(buf.size());
      grouped_dev.upload(buf);
      const PackedWeight grouped{grouped_dev.ptr, t, s.rows, s.cols, group};
      for (int m : {1, 5, 16}) {
        TestInput in(m, s.cols, t, s.cols + s.cols % 8);
        DeviceBuffer<float> plain(int64_t{m} * s.rows), got(int64_t{m} * s.rows);
        plain.poison();
        got.poison();
        STATUS_OK(skinny_gemm_store(w.view, in.view, SkinnyNorm{}, plain.ptr, DType::F32, s.rows, v, nullptr));
        STATUS_OK(skinny_gemm_store(grouped, in.view, SkinnyNorm{}, got.ptr, DType::F32, s.rows, v, nullptr));
        EXPECT_TRUE(bitwise_equal(plain.download(), got.download()))
            << v.name() << " " << s.rows << "x" << s.cols << " m=" << m;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 0);

  TestWeight w(64, 64, t);
  std::vector<uint16_t> buf(mma_packed_elems(64, 64, 8));
  pack_mma_tiles(w.host.data(), DType::F32, 64, 64, {}, t, buf.data(), 8);
  DeviceBuffer<uint16_t> dev(buf.size());
  dev.upload(buf);
  const PackedWeight grouped{dev.ptr, t, 64, 64, 8};
  TestInput in(1, 64, t, 64);
  DeviceBuffer<float> out(64);
  // Groups of 8 row tiles: the warp pipeline reads none, 4-tile CTAs need groups of 4.
  for (SkinnyGemmVariant v : {SkinnyGemmVariant{1, 8, 1}, SkinnyGemmVariant{1, 4, 1, SkinnyPipeline::kCtaSplitRows},
                              SkinnyGemmVariant{1, 4, 1, SkinnyPipeline::kRegisters}}) {
    if (v.pipeline == SkinnyPipeline::kCtaSplitRows && !clusters) continue;
    const Status st = skinny_gemm_store(grouped, in.view, SkinnyNorm{}, out.ptr, DType::F32, 64, v, nullptr);
    EXPECT_FALSE(st.ok()) << v.name();
    EXPECT_NE(st.message().find("tile group"), std::string::npos) << st.message();
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
      SkinnyQkvOut out;
      out.q = q.ptr;
      out.q_stride = q_dim;
      out.kv = PagedKvView{kcache.ptr, vcache.ptr, layout, tables_dev.ptr, max_blocks};
      out.positions = pos_dev.ptr;
      out.inv_freq = inv_freq_dev.ptr;
      out.n_heads = heads;
      out.n_kv_heads = kv_heads;
      out.head_dim = head_dim;
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
      for (const auto& variant : skinny_gemm_variants()) {
        kcache.poison();
        vcache.poison();
        q.poison();
        STATUS_OK(skinny_gemm_qkv_rope(w.view, in.view, SkinnyNorm{}, out, variant, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
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
        const std::string what = "head_dim " + std::to_string(head_dim) + " heads " + std::to_string(heads) + "/" +
                                 std::to_string(kv_heads) + " " + variant.name();
        EXPECT_LE(rel_err(got_q, qr), 5e-3) << what;
        EXPECT_LE(rel_err(got_k, kr), 5e-3) << what;
        EXPECT_LE(rel_err(got_v, vr), 5e-3) << what;
      }
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
    // w.host is in source row order ([gate; up]); the map only reorders rows when packing.
    const auto y = reference_matmul(in.host, m, w.host, 2 * ffn, hidden);
    std::vector<float> want(m * ffn);
    for (int i = 0; i < m; ++i) cpu::swiglu(&y[i * 2 * ffn], &y[i * 2 * ffn + ffn], ffn, &want[i * ffn]);
    DeviceBuffer<uint16_t> act(m * ffn);
    for (const auto& variant : skinny_gemm_variants()) {
      act.poison();
      STATUS_OK(skinny_gemm_swiglu(w.view, in.view, SkinnyNorm{}, SkinnySwigluOut{act.ptr, ffn, ffn}, variant, nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<float> got;
      for (uint16_t b : act.download()) got.push_back(bf16_bits_to_f32(b));
      EXPECT_LE(rel_err(got, want), 5e-3) << "ffn " << ffn << " " << variant.name();
    }
  }
}

// A decode-like chain on one stream, each kernel reading what the previous one wrote (the residual
// stream, the normed copy and its partial sums, the SwiGLU activations) or writing what it read,
// repeated three times. Launched as:
// plain launches, PDL launches, PDL launches with one plain launch in between (as the attention
// kernel sits between the GEMMs), and both captured into CUDA graphs. All must agree bitwise.
TEST(SkinnyGemm, PdlAndGraphCaptureAreBitwiseEqualToPlainLaunches) {
  REQUIRE_GPU();
  const DType t = DType::BF16;
  const int m = 9, hidden = 512, ffn = 688, vocab = 1000;
  const int tiles = static_cast<int>(mma_tiles(hidden));
  TestWeight wo(hidden, hidden, t), wdown(hidden, ffn, t), whead(vocab, hidden, t);
  const auto map = gate_up_row_map(ffn);
  TestWeight wgu(2 * ffn, hidden, t, map);
  TestInput x0(m, hidden, t, hidden);
  auto g1 = rounded(random_values(hidden, 1.0f), t), g2 = rounded(random_values(hidden, 1.0f), t);
  DeviceBuffer<float> g1_dev(hidden), g2_dev(hidden);  // norm weights are fp32
  g1_dev.upload(g1);
  g2_dev.upload(g2);
  const auto resid0 = random_values(m * hidden, 1.0f);
  DeviceBuffer<float> resid(m * hidden), partials(m * tiles), logits(m * vocab);
  DeviceBuffer<uint16_t> xg(m * hidden), act(m * ffn);
  const SkinnyNorm norm{partials.ptr, tiles, hidden, 1e-5f};
  const bool clusters = skinny_gemm_clusters_supported();
  const SkinnyPipeline cta = clusters ? SkinnyPipeline::kCtaSplitRows : SkinnyPipeline::kWarpSplitK;
  const SkinnyGemmVariant vo{4, 4, clusters ? 4 : 1}, vgu{2, 4, clusters ? 2 : 1, cta}, vdown{4, 8, clusters ? 8 : 1},
      vhead{1, 8, clusters ? 2 : 1, SkinnyPipeline::kRegisters};

  // pdl_mask bit i: launch GEMM i of the chain with PDL.
  auto chain = [&](cudaStream_t stream, unsigned pdl_mask) -> Status {
    for (int rep = 0; rep < 3; ++rep) {
      auto opt = [&](int i) { return SkinnyGemmLaunch{((pdl_mask >> i) & 1u) != 0}; };
      if (Status s = skinny_gemm_residual(wo.view, x0.view, SkinnyNorm{},
                                          SkinnyResidualOut{resid.ptr, hidden, g1_dev.ptr, xg.ptr, hidden, partials.ptr},
                                          vo, stream, opt(0));
          !s.ok())
        return s;
      if (Status s = skinny_gemm_swiglu(wgu.view, SkinnyInput{xg.ptr, hidden, m}, norm,
                                        SkinnySwigluOut{act.ptr, ffn, ffn}, vgu, stream, opt(1));
          !s.ok())
        return s;
      if (Status s = skinny_gemm_residual(wdown.view, SkinnyInput{act.ptr, ffn, m}, SkinnyNorm{},
                                          SkinnyResidualOut{resid.ptr, hidden, g2_dev.ptr, xg.ptr, hidden, partials.ptr},
                                          vdown, stream, opt(2));
          !s.ok())
        return s;
      if (Status s = skinny_gemm_store(whead.view, SkinnyInput{xg.ptr, hidden, m}, norm, logits.ptr, DType::F32, vocab,
                                       vhead, stream, opt(3));
          !s.ok())
        return s;
    }
    return Status();
  };
  struct Result {
    std::vector<float> resid, logits;
    std::vector<uint16_t> act;
  };
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto run = [&](unsigned pdl_mask, bool graph, Result& r) {
    resid.upload(resid0);
    xg.poison();
    act.poison();
    partials.poison();
    logits.poison();
    CUDA_OK(cudaDeviceSynchronize());
    if (graph) {
      cudaGraph_t g;
      cudaGraphExec_t exec;
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      const Status s = chain(stream, pdl_mask);
      CUDA_OK(cudaStreamEndCapture(stream, &g));
      STATUS_OK(s);
      CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      CUDA_OK(cudaGraphExecDestroy(exec));
      CUDA_OK(cudaGraphDestroy(g));
    } else {
      STATUS_OK(chain(stream, pdl_mask));
      CUDA_OK(cudaStreamSynchronize(stream));
    }
    r.resid = resid.download();
    r.logits = logits.download();
    r.act = act.download();
  };
  Result plain;
  run(0u, false, plain);
  ASSERT_TRUE(std::all_of(plain.logits.begin(), plain.logits.end(), [](float v) { return std::isfinite(v); }));
  struct Mode {
    const char* name;
    unsigned mask;
    bool graph;
  };
  for (Mode mode : {Mode{"pdl", 0xfu, false}, Mode{"pdl, one plain launch between", 0xbu, false},
                    Mode{"pdl graph", 0xfu, true}, Mode{"plain graph", 0u, true}}) {
    Result r;
    run(mode.mask, mode.graph, r);
    EXPECT_TRUE(bitwise_equal(r.resid, plain.resid)) << mode.name << ": residual";
    EXPECT_TRUE(bitwise_equal(r.logits, plain.logits)) << mode.name << ": logits";
    EXPECT_TRUE(bitwise_equal(r.act, plain.act)) << mode.name << ": activations";
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

// ---------------------------------------------------------------------------------------------
// Timing. Not pass/fail checks: they print what each variant achieves, against the read peak
// measured here, with weight copies rotated so that no launch finds its weights in L2.

struct MatrixCase {
  const char* name;
  int64_t rows, cols;
};

double read_peak_gbs() {
  static const double peak = [] {
    try {
      return bench::measure_cuda_peak(size_t{2} << 30, 5).read_gbs;
    } catch (const std::exception& e) {
      std::printf("read peak not measured: %s\n", e.what());
      return 0.0;
    }
  }();
  return peak;
}

// Enough copies that the rotation spans three times the L2 (50-60 MB on an H100/H200).
int copies_for(size_t bytes) { return static_cast<int>(std::max<size_t>(2, (size_t{180} << 20) / bytes + 1)); }

struct WeightCopies {
  std::vector<std::unique_ptr<DeviceBuffer<uint16_t>>> copies;
  WeightCopies(size_t elems, int n) {
    for (int i = 0; i < n; ++i) {
      copies.push_back(std::make_unique<DeviceBuffer<uint16_t>>(elems));
      EXPECT_EQ(cudaMemset(copies.back()->ptr, 0x3c, elems * 2), cudaSuccess);  // finite nonzero values
    }
  }
};

// Best variant per matrix (m = 1, PDL launches) from time_matrices, for the layer chains.
std::map<std::string, SkinnyGemmVariant>& measured_best() {
  static std::map<std::string, SkinnyGemmVariant> best;
  return best;
}

// Launches the same GEMM back to back over rotating weight copies; returns µs per launch.
double time_store(const MatrixCase& c, const WeightCopies& ws, const SkinnyInput& in, float* out,
                  const SkinnyGemmVariant& v, bool pdl, std::string& error) {
  const int copies = static_cast<int>(ws.copies.size());
  const int iters = std::max(40, 2 * copies);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int it = 0; it < iters + copies; ++it) {
    if (it == copies) cudaEventRecord(start);
    PackedWeight pw{ws.copies[it % copies]->ptr, DType::BF16, c.rows, c.cols};
    if (Status st = skinny_gemm_store(pw, in, SkinnyNorm{}, out, DType::F32, c.rows, v, nullptr, SkinnyGemmLaunch{pdl});
        !st.ok()) {
      error = st.message();
      break;
    }
  }
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1000.0 / iters;
}

void time_matrices(const char* model, const std::vector<MatrixCase>& cases) {
  const double peak = read_peak_gbs();
  const int sms = sm_count();
  const bool clusters = skinny_gemm_clusters_supported();
  std::printf("%s: read peak %.0f GB/s (bench::measure_cuda_peak), %d SMs, clusters %s\n", model, peak, sms,
              clusters ? "yes" : "no");
  std::printf("%-8s %-4s %-16s %9s %9s %9s %7s\n", "shape", "m", "variant", "us", "us(pdl)", "GB/s(pdl)", "peak%");
  for (const MatrixCase& c : cases) {
    const size_t elems = mma_packed_elems(c.rows, c.cols);
    const size_t bytes = elems * 2;
    WeightCopies ws(elems, copies_for(bytes));
    const SkinnyGemmVariant def = default_skinny_variant(c.rows, c.cols, sms, clusters);
    for (int m : {1, 16}) {
      TestInput in(m, c.cols, DType::BF16, c.cols);
      DeviceBuffer<float> out(m * c.rows);
      std::string best_name;
      double best_us = 1e30, def_us = 0, def_pdl_us = 0;
      for (const auto& v : skinny_gemm_variants()) {
        std::string error;
        const double us = time_store(c, ws, in.view, out.ptr, v, false, error);
        const double us_pdl = error.empty() ? time_store(c, ws, in.view, out.ptr, v, true, error) : 0;
        if (!error.empty()) {
          std::printf("%-8s %-4d %-16s not run: %s\n", c.name, m, v.name().c_str(), error.c_str());
          continue;
        }
        const double gbs = bytes / (us_pdl * 1e3);
        std::printf("%-8s %-4d %-16s %9.1f %9.1f %9.1f %6.1f%%\n", c.name, m, v.name().c_str(), us, us_pdl, gbs,
                    peak > 0 ? 100.0 * gbs / peak : 0.0);
        if (us_pdl < best_us) {
          best_us = us_pdl;
          best_name = v.name();
          if (m == 1) measured_best()[std::string(model) + c.name] = v;
        }
        if (v.name() == def.name()) {
          def_us = us;
          def_pdl_us = us_pdl;
        }
      }
      auto pct = [&](double us) { return us > 0 && peak > 0 ? 100.0 * bytes / (us * 1e3) / peak : 0.0; };
      std::printf("%-8s %-4d best(pdl) %s %.1f us %.1f%%; default %s %.1f us %.1f%%, pdl %.1f us %.1f%%\n", c.name, m,
                  best_name.c_str(), best_us, pct(best_us), def.name().c_str(), def_us, pct(def_us), def_pdl_us,
                  pct(def_pdl_us));
    }
  }
}

TEST(SkinnyGemmTiming, Llama8BShapes) {
  REQUIRE_GPU();
  time_matrices("Llama-3.1-8B", {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}});
}

TEST(SkinnyGemmTiming, Llama1BShapes) {
  REQUIRE_GPU();
  time_matrices("Llama-3.2-1B", {{"qkv", 3072, 2048}, {"o", 2048, 2048}, {"gate_up", 16384, 2048}, {"down", 2048, 8192}});
}

// The four GEMMs of a layer back to back over many layers (distinct weights, so nothing comes from
// L2), each with the default variant: plain launches against PDL launches, eager and as a graph.
// The gap saved is the difference; bandwidth counts weight bytes only.
void time_layer_chain(const char* model, const std::vector<MatrixCase>& cases, int layers, bool use_measured) {
  const double peak = read_peak_gbs();
  const int sms = sm_count();
  const bool clusters = skinny_gemm_clusters_supported();
  size_t layer_bytes = 0;
  std::vector<std::unique_ptr<DeviceBuffer<uint16_t>>> weights;
  std::vector<PackedWeight> views;
  std::vector<SkinnyGemmVariant> variants;
  int64_t max_rows = 0, max_cols = 0;
  for (int l = 0; l < layers; ++l)
    for (const MatrixCase& c : cases) {
      const size_t elems = mma_packed_elems(c.rows, c.cols);
      if (l == 0) layer_bytes += elems * 2;
      weights.push_back(std::make_unique<DeviceBuffer<uint16_t>>(elems));
      EXPECT_EQ(cudaMemset(weights.back()->ptr, 0x3c, elems * 2), cudaSuccess);
      views.push_back(PackedWeight{weights.back()->ptr, DType::BF16, c.rows, c.cols});
      const auto best = measured_best().find(std::string(model) + c.name);
      variants.push_back(use_measured && best != measured_best().end() ? best->second
                                                                        : default_skinny_variant(c.rows, c.cols, sms, clusters));
      max_rows = std::max(max_rows, c.rows);
      max_cols = std::max(max_cols, c.cols);
    }
  std::printf("%s layer chain: %d layers x %zu GEMMs, %.1f MB of weights per layer; %s variants:", model, layers,
              cases.size(), layer_bytes / 1e6, use_measured ? "best measured" : "default");
  for (size_t i = 0; i < cases.size(); ++i) std::printf(" %s=%s", cases[i].name, variants[i].name().c_str());
  std::printf("\n%-4s %-14s %12s %10s %7s\n", "m", "launch", "us/layer", "GB/s", "peak%");
  cudaStream_t stream;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int m : {1, 16}) {
    TestInput in(m, max_cols, DType::BF16, max_cols);
    DeviceBuffer<float> out(m * max_rows);
    auto chain = [&](bool pdl) -> Status {
      for (size_t i = 0; i < views.size(); ++i)
        if (Status s = skinny_gemm_store(views[i], SkinnyInput{in.view.x, max_cols, m}, SkinnyNorm{}, out.ptr, DType::F32,
                                         max_rows, variants[i], stream, SkinnyGemmLaunch{pdl});
            !s.ok())
          return s;
      return Status();
    };
    for (bool graph : {false, true})
      for (bool pdl : {false, true}) {
        cudaGraphExec_t exec = nullptr;
        if (graph) {
          cudaGraph_t g;
          EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
          const Status s = chain(pdl);
          EXPECT_EQ(cudaStreamEndCapture(stream, &g), cudaSuccess);
          EXPECT_TRUE(s.ok()) << s.message();
          EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
          cudaGraphDestroy(g);
        }
        auto once = [&] {
          if (graph) {
            EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
          } else {
            const Status s = chain(pdl);
            EXPECT_TRUE(s.ok()) << s.message();
          }
        };
        once();  // warm-up
        cudaEvent_t start, stop;
        cudaEventCreate(&start);
        cudaEventCreate(&stop);
        const int reps = 5;
        cudaEventRecord(start, stream);
        for (int r = 0; r < reps; ++r) once();
        cudaEventRecord(stop, stream);
        cudaEventSynchronize(stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        const double us = ms * 1000.0 / (reps * layers), gbs = layer_bytes / (us * 1e3);
        std::printf("%-4d %-14s %12.1f %10.1f %6.1f%%\n", m, graph ? (pdl ? "graph+pdl" : "graph") : (pdl ? "eager+pdl" : "eager"),
                    us, gbs, peak > 0 ? 100.0 * gbs / peak : 0.0);
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        if (exec) cudaGraphExecDestroy(exec);
      }
  }
  cudaStreamDestroy(stream);
}

TEST(SkinnyGemmTiming, Llama8BLayerChain) {
  REQUIRE_GPU();
  const std::vector<MatrixCase> cases = {
      {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  time_layer_chain("Llama-3.1-8B", cases, 8, false);
  if (!measured_best().empty()) time_layer_chain("Llama-3.1-8B", cases, 8, true);
}

TEST(SkinnyGemmTiming, Llama1BLayerChain) {
  REQUIRE_GPU();
  const std::vector<MatrixCase> cases = {
      {"qkv", 3072, 2048}, {"o", 2048, 2048}, {"gate_up", 16384, 2048}, {"down", 2048, 8192}};
  time_layer_chain("Llama-3.2-1B", cases, 16, false);
  if (!measured_best().empty()) time_layer_chain("Llama-3.2-1B", cases, 16, true);
}

// For a profiler: FUSELM_SKINNY_PROFILE="rows cols m variant" launches that one GEMM 8 times.
TEST(SkinnyGemmTiming, DISABLED_ProfileOne) {
  REQUIRE_GPU();
  const char* spec = std::getenv("FUSELM_SKINNY_PROFILE");
  if (spec == nullptr) GTEST_SKIP() << "set FUSELM_SKINNY_PROFILE=\"rows cols m variant\"";
  long long rows = 0, cols = 0;
  int m = 0;
  char name[64] = {};
  ASSERT_EQ(std::sscanf(spec, "%lld %lld %d %63s", &rows, &cols, &m, name), 4) << spec;
  const auto all = skinny_gemm_variants();
  const auto it = std::find_if(all.begin(), all.end(), [&](const SkinnyGemmVariant& v) { return v.name() == name; });
  ASSERT_NE(it, all.end()) << name;
  const size_t elems = mma_packed_elems(rows, cols);
  WeightCopies ws(elems, copies_for(elems * 2));
  TestInput in(m, cols, DType::BF16, cols);
  DeviceBuffer<float> out(m * rows);
  for (int i = 0; i < 8; ++i) {
    PackedWeight pw{ws.copies[i % ws.copies.size()]->ptr, DType::BF16, rows, cols};
    STATUS_OK(skinny_gemm_store(pw, in.view, SkinnyNorm{}, out.ptr, DType::F32, rows, *it, nullptr));
  }
  CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace fuselm
