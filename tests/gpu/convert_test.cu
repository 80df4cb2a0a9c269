// Weight conversion and synthetic generation on the device must be bit-identical to the host's
// convert_dtype and fill_synthetic: the CPU and GPU engines then run on the same weights.
#include "kernels/cuda/convert.h"

#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "model/model.h"

namespace fuselm {
namespace {

using test::DeviceArray;

TEST(CudaConvert, MatchesHostConversionBitwise) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(51);
  const int64_t n = 300007;
  std::vector<float> v = test::random_floats(gen, n, -70000.0f, 70000.0f);
  // Edge values: ties, subnormals, overflow, infinities, zeros.
  const float specials[] = {0.0f, -0.0f, 1.0f + 1.0f / 256, 65520.0f, 1e-8f, -6e-8f, 1e30f, INFINITY, -INFINITY, 3e-39f};
  for (size_t i = 0; i < std::size(specials); ++i) v[i] = specials[i];
  for (int64_t i = std::size(specials); i < n; i += 3) v[i] *= 1e-4f;
  for (DType src_dtype : {DType::F32, DType::F16, DType::BF16}) {
    const test::HostTensor src = test::make_tensor(v, src_dtype);
    for (DType dst_dtype : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(testing::Message() << dtype_name(src_dtype) << " -> " << dtype_name(dst_dtype));
      DeviceArray d_src(src.bytes.size()), d_dst(dtype_bytes(dst_dtype, n));
      d_src.upload(src.data(), src.bytes.size());
      d_dst.poison();
      ASSERT_STATUS_OK(convert_dtype_device(d_src.get(), src_dtype, d_dst.get(), dst_dtype, n, nullptr));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint8_t> want(dtype_bytes(dst_dtype, n)), got(want.size());
      convert_dtype(src.data(), src_dtype, want.data(), dst_dtype, n);
      d_dst.download(got.data(), got.size());
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), got.size()));
    }
  }
}

TEST(CudaConvert, SyntheticWeightsMatchHostBitwise) {
  FUSELM_REQUIRE_GPU();
  const int64_t n = 1000003;
  for (const SyntheticInit init : {SyntheticInit{true, 7, 0.02f, 0.0f}, SyntheticInit{true, 12345, 0.1f, 1.0f},
                                   SyntheticInit{true, 99, 3.0f, -0.5f}}) {
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(testing::Message() << "seed=" << init.seed << " dtype=" << dtype_name(dtype));
      DeviceArray d(dtype_bytes(dtype, n));
      d.poison();
      ASSERT_STATUS_OK(fill_synthetic_device(init.seed, init.scale, init.offset, n, dtype, d.get(), nullptr));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint8_t> want(dtype_bytes(dtype, n)), got(want.size());
      fill_synthetic(init, n, dtype, want.data());
      d.download(got.data(), got.size());
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), got.size()));
    }
  }
}

}  // namespace
}  // namespace fuselm
