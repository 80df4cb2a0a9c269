// RMSNorm against cpu::rmsnorm (double sum of squares). Tolerance: fp32 output within 2e-6
// relative (a different summation order of the fp32 squares); f16/bf16 output within one rounding
// step of the output dtype.
#include "kernels/cuda/rmsnorm.h"

#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"

namespace fuselm {
namespace {

using test::DeviceArray;

TEST(CudaRmsnorm, MatchesCpuReference) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(21);
  struct Shape {
    int64_t n, dim;
  };
  for (const Shape& s : {Shape{1, 64}, Shape{15, 128}, Shape{7, 100}, Shape{64, 4096}, Shape{3, 5120}, Shape{9, 13},
                         Shape{2, 8192}}) {
    for (DType out_dtype : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(testing::Message() << "n=" << s.n << " dim=" << s.dim << " out=" << dtype_name(out_dtype));
      const std::vector<float> x = test::random_floats(gen, s.n * s.dim, -4.0f, 4.0f);
      const std::vector<float> w = test::random_floats(gen, s.dim, 0.5f, 1.5f);
      DeviceArray d_x(x.size() * 4), d_w(w.size() * 4), d_out(dtype_bytes(out_dtype, s.n * s.dim));
      d_x.upload(x.data(), x.size() * 4);
      d_w.upload(w.data(), w.size() * 4);
      d_out.poison();
      const float eps = 1e-5f;
      ASSERT_STATUS_OK(rmsnorm(d_x.get<float>(), d_w.get<float>(), eps, s.n, s.dim, d_out.get(), out_dtype, nullptr));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      std::vector<float> want(x.size());
      cpu::rmsnorm(x.data(), {w.data(), DType::F32, 1, s.dim}, eps, s.n, s.dim, want.data());
      const float rtol = out_dtype == DType::F32 ? 2e-6f : test::dtype_ulp(out_dtype);
      EXPECT_TRUE(test::all_close(test::download_as_f32(d_out.get(), out_dtype, s.n * s.dim), want, 1e-6f, rtol));
    }
  }
}

TEST(CudaRmsnorm, IsDeterministic) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(22);
  const int64_t n = 33, dim = 4096;
  const std::vector<float> x = test::random_floats(gen, n * dim), w = test::random_floats(gen, dim);
  DeviceArray d_x(x.size() * 4), d_w(w.size() * 4), d_a(x.size() * 4), d_b(x.size() * 4);
  d_x.upload(x.data(), x.size() * 4);
  d_w.upload(w.data(), w.size() * 4);
  ASSERT_STATUS_OK(rmsnorm(d_x.get<float>(), d_w.get<float>(), 1e-6f, n, dim, d_a.get(), DType::F32, nullptr));
  ASSERT_STATUS_OK(rmsnorm(d_x.get<float>(), d_w.get<float>(), 1e-6f, n, dim, d_b.get(), DType::F32, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> a(x.size()), b(x.size());
  d_a.download(a.data(), a.size() * 4);
  d_b.download(b.data(), b.size() * 4);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

}  // namespace
}  // namespace fuselm
