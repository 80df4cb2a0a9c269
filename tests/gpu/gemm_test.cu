// cuBLASLt projections against cpu::matmul on the same (rounded) operands. Tolerance per element:
// 1e-3 of sum_k |x_k w_k| (fp32 accumulation in another order; a generous bound that still catches
// any wrong index) plus one rounding step of the output dtype relative to the value.
#include "kernels/cuda/gemm.h"

#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"

namespace fuselm {
namespace {

using test::DeviceArray;

struct Problem {
  int64_t m, n, k;
};

void check_problem(GemmPlan& plan, const GemmShape& shape, int64_t m, std::mt19937& gen) {
  SCOPED_TRACE(testing::Message() << "m=" << m << " n=" << shape.n << " k=" << shape.k << " in=" << dtype_name(shape.in)
                                  << " out=" << dtype_name(shape.out));
  const test::HostTensor x = test::random_tensor(gen, m * shape.k, shape.in);
  const test::HostTensor w = test::random_tensor(gen, shape.n * shape.k, shape.in);
  DeviceArray d_x(x.bytes.size()), d_w(w.bytes.size()), d_out(dtype_bytes(shape.out, m * shape.n));
  d_x.upload(x.data(), x.bytes.size());
  d_w.upload(w.data(), w.bytes.size());
  d_out.poison();
  ASSERT_STATUS_OK(plan.run(shape, d_x.get(), d_w.get(), d_out.get(), m, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = test::download_as_f32(d_out.get(), shape.out, m * shape.n);
  std::vector<float> want(static_cast<size_t>(m * shape.n));
  cpu::matmul(x.values.data(), m, {w.data(), shape.in, shape.n, shape.k}, want.data());
  size_t bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < shape.n; ++j) {
      double magnitude = 0.0;
      for (int64_t c = 0; c < shape.k; ++c)
        magnitude += std::fabs(x.values[i * shape.k + c] * w.values[j * shape.k + c]);
      const float ref = want[i * shape.n + j], out = got[i * shape.n + j];
      const double tol = 1e-3 * magnitude + (shape.out == DType::F32 ? 0.0 : test::dtype_ulp(shape.out) * std::fabs(ref));
      if (!(std::fabs(out - ref) <= tol)) {
        if (bad < 5) ADD_FAILURE() << "out[" << i << "][" << j << "] = " << out << ", want " << ref << " (tol " << tol << ")";
        ++bad;
      }
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(CudaGemm, MatchesCpuReference) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(71);
  DeviceArray workspace(GemmPlan::kWorkspaceBytes);
  GemmPlan plan;
  ASSERT_STATUS_OK(plan.init(workspace.get(), workspace.bytes()));
  const int64_t max_m = 300;
  for (DType in : {DType::BF16, DType::F16}) {
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{384, 128}, {64, 64}, {1000, 1024}, {4097, 256}, {5000, 128},
                               {96, 100}}) {
      for (DType out : {in, DType::F32}) {
        const GemmShape shape{n, k, in, out};
        ASSERT_STATUS_OK(plan.add(shape, max_m));
        for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{37}, int64_t{256}, max_m}) check_problem(plan, shape, m, gen);
      }
    }
  }
}

TEST(CudaGemm, ChoosesAlgorithmsOnlyAtPlanTime) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(72);
  DeviceArray workspace(GemmPlan::kWorkspaceBytes);
  GemmPlan plan;
  ASSERT_STATUS_OK(plan.init(workspace.get(), workspace.bytes()));
  const GemmShape shape{256, 512, DType::BF16, DType::BF16};
  ASSERT_STATUS_OK(plan.add(shape, 100));
  const int64_t queries = plan.heuristic_queries();
  EXPECT_EQ(queries, 8);  // buckets 1, 2, 4, ..., 64, 100
  for (int64_t m : {1, 5, 64, 65, 100}) check_problem(plan, shape, m, gen);
  EXPECT_EQ(plan.heuristic_queries(), queries);
}

TEST(CudaGemm, RejectsWhatWasNotPlanned) {
  FUSELM_REQUIRE_GPU();
  DeviceArray workspace(GemmPlan::kWorkspaceBytes), buf(1 << 20);
  GemmPlan plan;
  ASSERT_STATUS_OK(plan.init(workspace.get(), workspace.bytes()));
  const GemmShape shape{64, 64, DType::BF16, DType::BF16};
  ASSERT_STATUS_OK(plan.add(shape, 16));
  Status over = plan.run(shape, buf.get(), buf.get(), buf.get(), 17, nullptr);
  EXPECT_FALSE(over.ok());
  EXPECT_NE(over.message().find("m=17 outside the planned range 1..16"), std::string::npos) << over.message();
  Status unknown = plan.run({64, 128, DType::BF16, DType::BF16}, buf.get(), buf.get(), buf.get(), 1, nullptr);
  EXPECT_FALSE(unknown.ok());
  Status bad_dtype = plan.add({64, 64, DType::F32, DType::F32}, 4);
  EXPECT_NE(bad_dtype.message().find("unsupported input dtype=f32"), std::string::npos) << bad_dtype.message();
}

TEST(CudaGemm, IsDeterministic) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(73);
  DeviceArray workspace(GemmPlan::kWorkspaceBytes);
  GemmPlan plan;
  ASSERT_STATUS_OK(plan.init(workspace.get(), workspace.bytes()));
  const GemmShape shape{4096, 4096, DType::BF16, DType::BF16};
  const int64_t m = 77;
  ASSERT_STATUS_OK(plan.add(shape, 128));
  const test::HostTensor x = test::random_tensor(gen, m * shape.k, DType::BF16);
  const test::HostTensor w = test::random_tensor(gen, shape.n * shape.k, DType::BF16);
  DeviceArray d_x(x.bytes.size()), d_w(w.bytes.size()), d_a(m * shape.n * 2), d_b(m * shape.n * 2);
  d_x.upload(x.data(), x.bytes.size());
  d_w.upload(w.data(), w.bytes.size());
  ASSERT_STATUS_OK(plan.run(shape, d_x.get(), d_w.get(), d_a.get(), m, nullptr));
  ASSERT_STATUS_OK(plan.run(shape, d_x.get(), d_w.get(), d_b.get(), m, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> a(d_a.bytes()), b(d_b.bytes());
  d_a.download(a.data(), a.size());
  d_b.download(b.data(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size()));
}

// Batch-invariant plans: the first rows of an m-row call are bitwise what a call with fewer rows
// gives, for every m up to the planned maximum (the Llama-3.1-8B projection shapes).
TEST(CudaGemm, BatchInvariantPlanGivesRowsIndependentOfM) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(74);
  DeviceArray workspace(GemmPlan::kWorkspaceBytes);
  GemmPlan plan;
  ASSERT_STATUS_OK(plan.init(workspace.get(), workspace.bytes()));
  const int64_t max_m = 4096;
  for (const GemmShape& shape : {GemmShape{6144, 4096, DType::BF16, DType::BF16},
                                 GemmShape{4096, 14336, DType::BF16, DType::BF16},
                                 GemmShape{32000, 4096, DType::BF16, DType::F32}}) {
    SCOPED_TRACE(testing::Message() << "n=" << shape.n << " k=" << shape.k);
    ASSERT_STATUS_OK(plan.add(shape, max_m, GemmPlan::Choice::BatchInvariant));
    const test::HostTensor x = test::random_tensor(gen, max_m * shape.k, DType::BF16);
    const test::HostTensor w = test::random_tensor(gen, shape.n * shape.k, DType::BF16);
    const size_t row_bytes = dtype_bytes(shape.out, shape.n);
    DeviceArray d_x(x.bytes.size()), d_w(w.bytes.size()), d_out(row_bytes * max_m);
    d_x.upload(x.data(), x.bytes.size());
    d_w.upload(w.data(), w.bytes.size());
    std::vector<uint8_t> reference;
    for (int64_t m : {max_m, int64_t{1}, int64_t{7}, int64_t{64}, int64_t{512}, int64_t{1000}}) {
      ASSERT_STATUS_OK(plan.run(shape, d_x.get(), d_w.get(), d_out.get(), m, nullptr));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint8_t> got(row_bytes * m);
      d_out.download(got.data(), got.size());
      if (reference.empty()) {
        reference = got;
        continue;
      }
      EXPECT_EQ(0, std::memcmp(got.data(), reference.data(), got.size())) << "m=" << m;
    }
  }
}

}  // namespace
}  // namespace fuselm
