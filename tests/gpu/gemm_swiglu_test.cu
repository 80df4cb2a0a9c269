// The fused gate/up projection + SwiGLU against a CPU reference on the same (rounded) operands:
// gate and up as fp64 dot products, silu(gate) * up in fp64. Tolerance per element: 1e-3 of
// sum_k |x_k w_k| for each of gate and up (fp32 accumulation in another order), carried through
// the product, plus one rounding step of the output dtype relative to the value.
#include "kernels/cuda/gemm_swiglu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpu_test_util.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/swiglu.h"

namespace fuselm {
namespace {

using test::DeviceArray;

#define SKIP_UNLESS_SUPPORTED(ffn, k, dtype)                                               \
  do {                                                                                     \
    FUSELM_REQUIRE_GPU();                                                                  \
    const std::string why_ = gemm_swiglu_unsupported_reason(ffn, k, dtype);                \
    if (!why_.empty()) GTEST_SKIP() << "gemm_swiglu does not run here: " << why_;          \
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
  ASSERT_STATUS_OK(gemm_swiglu(d_x.get(), d_w.get(), d_out.get(), dtype, p.m, p.ffn, p.k, nullptr));
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
        if (bad < 5) ADD_FAILURE() << "out[" << t << "][" << j << "] = " << out << ", want " << want << " (tol " << tol << ")";
        ++bad;
      }
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(CudaGemmSwiglu, MatchesCpuReference) {
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
TEST(CudaGemmSwiglu, RowsIndependentOfTokenCount) {
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
    EXPECT_TRUE(gemm_swiglu(d_x.get<uint16_t>() + first * k, d_w.get(), d_out.get(), DType::BF16, count, ffn, k,
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

TEST(CudaGemmSwiglu, RejectsWhatItCannotRun) {
  FUSELM_REQUIRE_GPU();
  DeviceArray buf(1 << 20);
  const auto message = [&](int64_t ffn, int64_t k, DType dtype) {
    return gemm_swiglu(buf.get(), buf.get(), buf.get(), dtype, 4, ffn, k, nullptr).message();
  };
  EXPECT_NE(message(100, 64, DType::BF16).find("ffn=100"), std::string::npos);
  EXPECT_NE(message(128, 100, DType::BF16).find("k=100"), std::string::npos);
  EXPECT_NE(message(128, 64, DType::F32).find("dtype"), std::string::npos);
  EXPECT_NE(gemm_swiglu(nullptr, buf.get(), buf.get(), DType::BF16, 4, 128, 64, nullptr).message().find("gemm_swiglu"),
            std::string::npos);
}

// Lab: the fused kernel against cuBLASLt's gate/up GEMM followed by swiglu, at the synthetic models'
// shapes, by prompt length. TFLOP/s count the projection's 2 * m * 2 ffn * k.
TEST(CudaGemmSwiglu, DISABLED_Lab) {
  SKIP_UNLESS_SUPPORTED(8192, 2048, DType::BF16);
  struct Shape {
    const char* name;
    int64_t ffn, k;
  };
  std::mt19937 gen(1);
  DeviceArray workspace(GemmPlan::kWorkspaceBytes);
  GemmPlan plan;
  ASSERT_STATUS_OK(plan.init(workspace.get(), workspace.bytes()));
  cudaEvent_t a, b;
  ASSERT_CUDA_OK(cudaEventCreate(&a));
  ASSERT_CUDA_OK(cudaEventCreate(&b));
  std::printf("[lab] %-14s %6s %12s %12s %12s %12s\n", "shape", "m", "fused_us", "fused_TF/s", "unfused_us",
              "unfused_TF/s");
  for (const Shape& s : {Shape{"llama-3.1-8b", 14336, 4096}, Shape{"llama-3.2-1b", 8192, 2048}}) {
    const int64_t max_m = 8192;
    const GemmShape shape{2 * s.ffn, s.k, DType::BF16, DType::BF16};
    ASSERT_STATUS_OK(plan.add(shape, max_m, GemmPlan::Choice::BatchInvariant));
    const test::HostTensor x = test::random_tensor(gen, max_m * s.k, DType::BF16);
    const test::HostTensor w = test::random_tensor(gen, 2 * s.ffn * s.k, DType::BF16, -0.02f, 0.02f);
    DeviceArray d_x(x.bytes.size()), d_w(w.bytes.size()), d_gate_up(dtype_bytes(DType::BF16, max_m * 2 * s.ffn)),
        d_out(dtype_bytes(DType::BF16, max_m * s.ffn));
    d_x.upload(x.data(), x.bytes.size());
    d_w.upload(w.data(), w.bytes.size());
    for (int64_t m : {int64_t{128}, int64_t{512}, int64_t{2048}, int64_t{8192}}) {
      const auto time_us = [&](auto&& f) {
        for (int i = 0; i < 3; ++i) f();
        std::vector<float> ms;
        for (int i = 0; i < 15; ++i) {
          cudaEventRecord(a);
          f();
          cudaEventRecord(b);
          cudaEventSynchronize(b);
          float t = 0;
          cudaEventElapsedTime(&t, a, b);
          ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        return 1e3 * ms[ms.size() / 2];
      };
      const double fused = time_us([&] {
        EXPECT_TRUE(gemm_swiglu(d_x.get(), d_w.get(), d_out.get(), DType::BF16, m, s.ffn, s.k, nullptr).ok());
      });
      const double unfused = time_us([&] {
        EXPECT_TRUE(plan.run(shape, d_x.get(), d_w.get(), d_gate_up.get(), m, nullptr).ok());
        EXPECT_TRUE(swiglu(d_gate_up.get(), d_out.get(), DType::BF16, m, s.ffn, nullptr).ok());
      });
      const double flop = 2.0 * m * 2 * s.ffn * s.k;
      std::printf("[lab] %-14s %6lld %12.1f %12.1f %12.1f %12.1f\n", s.name, static_cast<long long>(m), fused,
                  flop / fused * 1e-6, unfused, flop / unfused * 1e-6);
    }
  }
  ASSERT_CUDA_OK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

}  // namespace
}  // namespace fuselm
