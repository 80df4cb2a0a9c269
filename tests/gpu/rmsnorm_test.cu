// RMSNorm against cpu::rmsnorm (double sum of squares). Tolerance: fp32 output within 2e-6
// relative (a different summation order of the fp32 squares); f16/bf16 output within one rounding
// step of the output dtype.
#include "kernels/cuda/rmsnorm.h"

#include <cstring>

#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/residual.h"

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

// The fused residual add + norm is bitwise what the two kernels give one after the other.
TEST(CudaRmsnorm, AddRmsnormEqualsResidualAddThenRmsnorm) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(23);
  for (int64_t dim : {4096, 100}) {
    for (DType dtype : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(testing::Message() << "dim=" << dim << " dtype=" << dtype_name(dtype));
      const int64_t n = 19;
      const std::vector<float> x = test::random_floats(gen, n * dim, -4.0f, 4.0f);
      const std::vector<float> w = test::random_floats(gen, dim, 0.5f, 1.5f);
      const std::vector<float> d = test::random_floats(gen, n * dim, -1.0f, 1.0f);
      std::vector<uint16_t> d_bits(d.size());
      convert_dtype(d.data(), DType::F32, d_bits.data(), dtype, static_cast<int64_t>(d.size()));
      DeviceArray x1(x.size() * 4), x2(x.size() * 4), dw(w.size() * 4), dd(d_bits.size() * 2);
      DeviceArray o1(dtype_bytes(dtype, n * dim)), o2(dtype_bytes(dtype, n * dim));
      x1.upload(x.data(), x.size() * 4);
      x2.upload(x.data(), x.size() * 4);
      dw.upload(w.data(), w.size() * 4);
      dd.upload(d_bits.data(), d_bits.size() * 2);
      ASSERT_STATUS_OK(residual_add(x1.get<float>(), dd.get(), dtype, n * dim, nullptr));
      ASSERT_STATUS_OK(rmsnorm(x1.get<float>(), dw.get<float>(), 1e-5f, n, dim, o1.get(), dtype, nullptr));
      ASSERT_STATUS_OK(add_rmsnorm(x2.get<float>(), dd.get(), dtype, dw.get<float>(), 1e-5f, n, dim, o2.get(), dtype,
                                   nullptr));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      std::vector<float> r1(x.size()), r2(x.size());
      x1.download(r1.data(), r1.size() * 4);
      x2.download(r2.data(), r2.size() * 4);
      EXPECT_EQ(0, std::memcmp(r1.data(), r2.data(), r1.size() * 4)) << "residual";
      std::vector<uint16_t> n1(n * dim), n2(n * dim);
      o1.download(n1.data(), n1.size() * 2);
      o2.download(n2.data(), n2.size() * 2);
      EXPECT_EQ(n1, n2) << "normed";
    }
  }
}

}  // namespace
}  // namespace fuselm
