// The residual add is one fp32 addition per element, exactly as cpu::add_inplace: bitwise equal.
#include "kernels/cuda/residual.h"

#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"

namespace fuselm {
namespace {

using test::DeviceArray;

TEST(CudaResidual, MatchesCpuReferenceBitwise) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(41);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{1000}, int64_t{4096 * 33}, int64_t{(1 << 20) + 3}}) {
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " dtype=" << dtype_name(dtype));
      std::vector<float> residual = test::random_floats(gen, n, -10.0f, 10.0f);
      const test::HostTensor delta = test::random_tensor(gen, n, dtype);
      DeviceArray d_res(residual.size() * 4), d_delta(delta.bytes.size());
      d_res.upload(residual.data(), residual.size() * 4);
      d_delta.upload(delta.data(), delta.bytes.size());
      ASSERT_STATUS_OK(residual_add(d_res.get<float>(), d_delta.get(), dtype, n, nullptr));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      cpu::add_inplace(residual.data(), delta.values.data(), n);
      EXPECT_TRUE(test::all_close(test::download_as_f32(d_res.get(), DType::F32, n), residual, 0.0f, 0.0f));
    }
  }
}

}  // namespace
}  // namespace fuselm
