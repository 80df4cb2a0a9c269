// The Hopper prefill GEMMs against a CPU reference on the same (rounded) operands, as fp64 dot
// products. Tolerance per element: 1e-3 of sum_k |x_k w_k| per dot product (fp32 accumulation in
// another order; for SwiGLU carried through silu(gate) * up), plus one rounding step of the output
// dtype relative to the value.
#include "kernels/cuda/gemm_sm90.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpu_test_util.h"
#include "gpu_timing.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/swiglu.h"

namespace fuselm {
namespace {

using test::DeviceArray;

#define SKIP_UNLESS_SUPPORTED(ffn, k, dtype)                                               \
  do {                                                                                     \
    FUSELM_REQUIRE_GPU();                                                                  \
    const std::string why_ = gemm_swiglu_sm90_unsupported_reason(ffn, k, dtype);           \
    if (!why_.empty()) GTEST_SKIP() << "the sm_90a GEMMs do not run here: " << why_;       \
  } while (0)

struct Problem {
  int64_t m, ffn, k;
};

void check_problem(const Problem& p, DType dtype, std::mt19937& gen) {
  SCOPED_TRACE(testing::Message() << "m=" << p.m << " ffn=" << p.ffn << " k=" << p.k << " " << dtype_name(dtype));
  const test::HostTensor x = test::random_tensor(gen, p.m * p.k, dtype);
  const float scale = 2.0f / std::sqrt(static_cast<float>(p.k));
  const test::HostTensor w = test::random_tensor(gen, 2 * p.ffn * p.k, dtype, -scale, scale);
  DeviceArray d_x(x.bytes.size()), d_w(w.bytes.size()), d_out(dtype_bytes(dtype, p.m * p.ffn));
  d_x.upload(x.data(), x.bytes.size());
  d_w.upload(w.data(), w.bytes.size());
  d_out.poison();
  ASSERT_STATUS_OK(gemm_swiglu_sm90(d_x.get(), d_w.get(), d_out.get(), dtype, p.m, p.ffn, p.k, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = test::download_as_f32(d_out.get(), dtype, p.m * p.ffn);
  size_t bad = 0;
  for (int64_t t = 0; t < p.m; ++t) {
    const float* xr = x.values.data() + t * p.k;
    for (int64_t j = 0; j < p.ffn; ++j) {
      const float* wg = w.values.data() + j * p.k;
      const float* wu = w.values.data() + (p.ffn + j) * p.k;
      double g = 0, u = 0, mg = 0, mu = 0;
      for (int64_t c = 0; c < p.k; ++c) {
        g += static_cast<double>(xr[c]) * wg[c];
        u += static_cast<double>(xr[c]) * wu[c];
        mg += std::fabs(static_cast<double>(xr[c]) * wg[c]);
        mu += std::fabs(static_cast<double>(xr[c]) * wu[c]);
      }
      const double silu = g / (1.0 + std::exp(-g));
      const double want = silu * u;
      // silu's slope is at most ~1.1: an error e in g moves the product by <= 1.1 e |u|.
      const double tol = 1.1 * 1e-3 * mg * std::fabs(u) + std::fabs(silu) * 1e-3 * mu + 1e-3 * mg * 1e-3 * mu +
                         test::dtype_ulp(dtype) * std::fabs(want);
      const float out = got[t * p.ffn + j];
      if (!(std::fabs(out - want) <= tol)) {
        if (bad < 5)
          ADD_FAILURE() << "out[" << t << "][" << j << "] = " << out << ", want " << want << " (tol " << tol << ")";
        ++bad;
      }
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(CudaGemmSm90, SwigluMatchesCpuReference) {
  SKIP_UNLESS_SUPPORTED(128, 64, DType::BF16);
  std::mt19937 gen(5);
  // Token counts on and off the 128-token tile (the TMA box past the last token reads zeros), one
  // and several 64-wide K stages and ring turns, several feature tiles, and more than one group of
  // 16 token tiles in the CTA order (2100 tokens: a group of 16 tiles and one of 1).
  for (DType dtype : {DType::BF16, DType::F16})
    for (const Problem& p : {Problem{1, 128, 64}, Problem{77, 256, 128}, Problem{128, 128, 320},
                             Problem{300, 384, 192}, Problem{513, 256, 576}, Problem{2100, 256, 64}})
      check_problem(p, dtype, gen);
}

// A token's output is bit-for-bit the same whatever other tokens share the call and wherever in
// its tile the token lands.
TEST(CudaGemmSm90, SwigluRowsIndependentOfTokenCount) {
  SKIP_UNLESS_SUPPORTED(256, 256, DType::BF16);
  std::mt19937 gen(9);
  const int64_t m = 300, ffn = 256, k = 256;
  const test::HostTensor x = test::random_tensor(gen, m * k, DType::BF16);
  const test::HostTensor w = test::random_tensor(gen, 2 * ffn * k, DType::BF16, -0.1f, 0.1f);
  DeviceArray d_x(x.bytes.size()), d_w(w.bytes.size()), d_out(dtype_bytes(DType::BF16, m * ffn));
  d_x.upload(x.data(), x.bytes.size());
  d_w.upload(w.data(), w.bytes.size());
  const auto run = [&](int64_t first, int64_t count) {
    d_out.poison();
    EXPECT_TRUE(gemm_swiglu_sm90(d_x.get<uint16_t>() + first * k, d_w.get(), d_out.get(), DType::BF16, count, ffn, k,
                            nullptr)
                    .ok());
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> out(static_cast<size_t>(count * ffn));
    d_out.download(out.data(), out.size() * 2);
    return out;
  };
  const std::vector<uint16_t> all = run(0, m);
  for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 1}, {129, 1}, {5, 295}, {200, 77}, {299, 1}}) {
    const std::vector<uint16_t> part = run(first, count);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + first * ffn))
        << "tokens " << first << " .. " << first + count - 1 << " differ from the same tokens in a call of " << m;
  }
}

// The plain GEMM, both tile widths, against fp64 dot products.
void check_gemm(int64_t m, int64_t n, int64_t k, int tile, DType dtype, std::mt19937& gen) {
  SCOPED_TRACE(testing::Message() << "m=" << m << " n=" << n << " k=" << k << " tile=" << tile << " "
                                  << dtype_name(dtype));
  const test::HostTensor x = test::random_tensor(gen, m * k, dtype);
  const float scale = 2.0f / std::sqrt(static_cast<float>(k));
  const test::HostTensor w = test::random_tensor(gen, n * k, dtype, -scale, scale);
  DeviceArray d_x(x.bytes.size()), d_w(w.bytes.size()), d_out(dtype_bytes(dtype, m * n));
  d_x.upload(x.data(), x.bytes.size());
  d_w.upload(w.data(), w.bytes.size());
  d_out.poison();
  ASSERT_STATUS_OK(gemm_sm90(d_x.get(), d_w.get(), d_out.get(), dtype, m, n, k, tile, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = test::download_as_f32(d_out.get(), dtype, m * n);
  size_t bad = 0;
  for (int64_t t = 0; t < m; ++t)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0, magnitude = 0;
      for (int64_t c = 0; c < k; ++c) {
        const double p = static_cast<double>(x.values[t * k + c]) * w.values[j * k + c];
        want += p;
        magnitude += std::fabs(p);
      }
      const double tol = 1e-3 * magnitude + test::dtype_ulp(dtype) * std::fabs(want);
      const float out = got[t * n + j];
      if (!(std::fabs(out - want) <= tol)) {
        if (bad < 5)
          ADD_FAILURE() << "out[" << t << "][" << j << "] = " << out << ", want " << want << " (tol " << tol << ")";
        ++bad;
      }
    }
  EXPECT_EQ(bad, 0u);
}

TEST(CudaGemmSm90, MatchesCpuReference) {
  SKIP_UNLESS_SUPPORTED(128, 64, DType::BF16);
  std::mt19937 gen(17);
  struct Problem {
    int64_t m, n, k;
  };
  for (DType dtype : {DType::BF16, DType::F16})
    for (int tile : {128, 256})
      for (const Problem& p : {Problem{1, 256, 64}, Problem{77, 512, 192}, Problem{300, 768, 320},
                               Problem{2100, 256, 64}})
        check_gemm(p.m, p.n, p.k, tile, dtype, gen);
}

// A token's output is bit-for-bit the same whatever other tokens share the call, at both widths.
TEST(CudaGemmSm90, RowsIndependentOfTokenCount) {
  SKIP_UNLESS_SUPPORTED(256, 256, DType::BF16);
  std::mt19937 gen(23);
  const int64_t m = 300, n = 512, k = 256;
  const test::HostTensor x = test::random_tensor(gen, m * k, DType::BF16);
  const test::HostTensor w = test::random_tensor(gen, n * k, DType::BF16, -0.1f, 0.1f);
  DeviceArray d_x(x.bytes.size()), d_w(w.bytes.size()), d_out(dtype_bytes(DType::BF16, m * n));
  d_x.upload(x.data(), x.bytes.size());
  d_w.upload(w.data(), w.bytes.size());
  for (int tile : {128, 256}) {
    const auto run = [&](int64_t first, int64_t count) {
      d_out.poison();
      EXPECT_TRUE(gemm_sm90(d_x.get<uint16_t>() + first * k, d_w.get(), d_out.get(), DType::BF16, count, n, k, tile,
                            nullptr)
                      .ok());
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> out(static_cast<size_t>(count * n));
      d_out.download(out.data(), out.size() * 2);
      return out;
    };
    const std::vector<uint16_t> all = run(0, m);
    for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 1}, {129, 1}, {5, 295}, {299, 1}}) {
      const std::vector<uint16_t> part = run(first, count);
      EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + first * n))
          << "tile " << tile << ": tokens " << first << " .. " << first + count - 1 << " differ from a call of " << m;
    }
  }
}

// Both tile widths add each output's products in the same order (the same k16 steps, in K order),
// and a wgmma's result for one element does not depend on how many columns it computes beside it:
// the same bits. The engine relies on this to pick the width by token count.
TEST(CudaGemmSm90, TileWidthsGiveTheSameBits) {
  SKIP_UNLESS_SUPPORTED(256, 256, DType::BF16);
  std::mt19937 gen(29);
  for (DType dtype : {DType::BF16, DType::F16}) {
    const int64_t m = 333, n = 768, k = 1024;
    const test::HostTensor x = test::random_tensor(gen, m * k, dtype);
    const test::HostTensor w = test::random_tensor(gen, n * k, dtype, -0.1f, 0.1f);
    DeviceArray d_x(x.bytes.size()), d_w(w.bytes.size()), d_out(dtype_bytes(dtype, m * n));
    d_x.upload(x.data(), x.bytes.size());
    d_w.upload(w.data(), w.bytes.size());
    std::vector<std::vector<uint16_t>> outs;
    for (int tile : {128, 256}) {
      d_out.poison();
      ASSERT_STATUS_OK(gemm_sm90(d_x.get(), d_w.get(), d_out.get(), dtype, m, n, k, tile, nullptr));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      outs.emplace_back(static_cast<size_t>(m * n));
      d_out.download(outs.back().data(), outs.back().size() * 2);
    }
    EXPECT_TRUE(outs[0] == outs[1]) << dtype_name(dtype) << ": tiles of 128 and 256 features differ";
  }
}

TEST(CudaGemmSm90, RejectsWhatItCannotRun) {
  FUSELM_REQUIRE_GPU();
  DeviceArray buf(1 << 20);
  const auto message = [&](int64_t ffn, int64_t k, DType dtype) {
    return gemm_swiglu_sm90(buf.get(), buf.get(), buf.get(), dtype, 4, ffn, k, nullptr).message();
  };
  EXPECT_NE(message(100, 64, DType::BF16).find("output features 100"), std::string::npos);
  EXPECT_NE(message(128, 100, DType::BF16).find("k=100"), std::string::npos);
  EXPECT_NE(message(128, 64, DType::F32).find("dtype"), std::string::npos);
  EXPECT_NE(
      gemm_swiglu_sm90(nullptr, buf.get(), buf.get(), DType::BF16, 4, 128, 64, nullptr).message().find("gemm_swiglu"),
      std::string::npos);
  EXPECT_NE(gemm_sm90(buf.get(), buf.get(), buf.get(), DType::BF16, 4, 384, 64, 256, nullptr).message().find(
                "output features 384"),
            std::string::npos);
  EXPECT_NE(gemm_sm90(buf.get(), buf.get(), buf.get(), DType::BF16, 4, 256, 64, 64, nullptr).message().find(
                "tile_features=64"),
            std::string::npos);
}

// Lab: each prefill projection of the synthetic models' shapes by token count, on the sm_90a kernels
// (tiles of 128 and 256 features; gate/up with SwiGLU fused) and on cuBLASLt (the batch-invariant
// algorithm the fused path runs, and the fastest per token count the baseline runs; gate/up then
// swiglu). Median us of 15 after 3 warm-ups; TFLOP/s of the best sm_90a kernel.
TEST(CudaGemmSm90, DISABLED_Lab) {
  SKIP_UNLESS_SUPPORTED(8192, 2048, DType::BF16);
  struct Projection {
    const char* model;
    const char* name;
    int64_t n, k;
    bool swiglu;  // n = 2 * ffn
  };
  const Projection projections[] = {
      {"llama-3.1-8b", "qkv", 6144, 4096, false},   {"llama-3.1-8b", "o", 4096, 4096, false},
      {"llama-3.1-8b", "gate_up", 28672, 4096, true}, {"llama-3.1-8b", "down", 4096, 14336, false},
      {"llama-3.2-1b", "qkv", 3072, 2048, false},   {"llama-3.2-1b", "o", 2048, 2048, false},
      {"llama-3.2-1b", "gate_up", 16384, 2048, true}, {"llama-3.2-1b", "down", 2048, 8192, false}};
  const int64_t max_m = 8192;
  std::mt19937 gen(1);
  DeviceArray workspace(GemmPlan::kWorkspaceBytes);
  GemmPlan invariant, fastest;
  ASSERT_STATUS_OK(invariant.init(workspace.get(), workspace.bytes()));
  ASSERT_STATUS_OK(fastest.init(workspace.get(), workspace.bytes()));
  const auto time_us = [](auto&& f) { return 1e3 * test::median_ms(f, 15); };
  std::printf("[lab] %-13s %-8s %5s %10s %10s %10s %10s %8s\n", "model", "proj", "m", "sm90_128", "sm90_256",
              "cublas_inv", "cublas_fast", "TF/s");
  const test::HostTensor x = test::random_tensor(gen, max_m * 14336, DType::BF16);
  DeviceArray d_x(x.bytes.size()), d_w(dtype_bytes(DType::BF16, 28672 * 4096)),
      d_mid(dtype_bytes(DType::BF16, max_m * 28672)), d_out(dtype_bytes(DType::BF16, max_m * 28672));
  d_x.upload(x.data(), x.bytes.size());
  const test::HostTensor w = test::random_tensor(gen, 28672 * 4096, DType::BF16, -0.02f, 0.02f);
  d_w.upload(w.data(), w.bytes.size());
  for (const Projection& p : projections) {
    const GemmShape shape{p.n, p.k, DType::BF16, DType::BF16};
    ASSERT_STATUS_OK(invariant.add(shape, max_m, GemmPlan::Choice::BatchInvariant));
    ASSERT_STATUS_OK(fastest.add(shape, max_m, GemmPlan::Choice::FastestPerBucket));
    for (int64_t m : {int64_t{128}, int64_t{512}, int64_t{2048}, int64_t{8192}}) {
      const auto cublas = [&](const GemmPlan& plan) {
        return time_us([&] {
          EXPECT_TRUE(plan.run(shape, d_x.get(), d_w.get(), p.swiglu ? d_mid.get() : d_out.get(), m, nullptr).ok());
          if (p.swiglu) EXPECT_TRUE(swiglu(d_mid.get(), d_out.get(), DType::BF16, m, p.n / 2, nullptr).ok());
        });
      };
      const auto sm90 = [&](int tile) {
        return time_us([&] {
          if (p.swiglu)
            EXPECT_TRUE(
                gemm_swiglu_sm90(d_x.get(), d_w.get(), d_out.get(), DType::BF16, m, p.n / 2, p.k, nullptr).ok());
          else
            EXPECT_TRUE(gemm_sm90(d_x.get(), d_w.get(), d_out.get(), DType::BF16, m, p.n, p.k, tile, nullptr).ok());
        });
      };
      const double t128 = p.swiglu ? 0.0 : sm90(128), t256 = sm90(256);
      const double inv = cublas(invariant), fast = cublas(fastest);
      const double best = p.swiglu ? t256 : std::min(t128, t256);
      std::printf("[lab] %-13s %-8s %5lld %10.1f %10.1f %10.1f %10.1f %8.1f\n", p.model, p.name,
                  static_cast<long long>(m), t128, t256, inv, fast, 2.0 * m * p.n * p.k / best * 1e-6);
    }
  }
  ASSERT_CUDA_OK(cudaGetLastError());
}

}  // namespace
}  // namespace fuselm
