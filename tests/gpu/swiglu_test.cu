// SwiGLU against cpu::swiglu on the same (rounded) inputs. Tolerance: fp32 within 1e-6 relative
// (expf vs std::exp); f16/bf16 within one rounding step of the dtype.
#include "kernels/cuda/swiglu.h"

#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"

namespace fuselm {
namespace {

using test::DeviceArray;

TEST(CudaSwiglu, MatchesCpuReference) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(31);
  struct Shape {
    int64_t n, ffn;
  };
  for (const Shape& s : {Shape{1, 8}, Shape{5, 100}, Shape{64, 11008}, Shape{3, 13}, Shape{17, 384}}) {
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(testing::Message() << "n=" << s.n << " ffn=" << s.ffn << " dtype=" << dtype_name(dtype));
      const test::HostTensor gate_up = test::random_tensor(gen, s.n * 2 * s.ffn, dtype, -6.0f, 6.0f);
      DeviceArray d_in(gate_up.bytes.size()), d_out(dtype_bytes(dtype, s.n * s.ffn));
      d_in.upload(gate_up.data(), gate_up.bytes.size());
      d_out.poison();
      ASSERT_STATUS_OK(swiglu(d_in.get(), d_out.get(), dtype, s.n, s.ffn, nullptr));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      std::vector<float> want(static_cast<size_t>(s.n * s.ffn));
      for (int64_t t = 0; t < s.n; ++t)
        cpu::swiglu(gate_up.values.data() + t * 2 * s.ffn, gate_up.values.data() + t * 2 * s.ffn + s.ffn, s.ffn,
                    want.data() + t * s.ffn);
      const float rtol = dtype == DType::F32 ? 1e-6f : test::dtype_ulp(dtype);
      EXPECT_TRUE(test::all_close(test::download_as_f32(d_out.get(), dtype, s.n * s.ffn), want, 1e-6f, rtol));
    }
  }
}

}  // namespace
}  // namespace fuselm
