// Programmatic dependent launch and thread-block clusters are found where they exist: a build with
// sm_90 code on an sm_90+ GPU must report both (a false "no" would silently run every fused path
// without them, and their tests would fall back rather than fail).
#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "kernels/cuda/pdl.cuh"

namespace fuselm {
namespace {

__global__ void own_code_kernel() {}

TEST(LaunchSupport, PdlAndClustersOnHopperWithSm90Code) {
  FUSELM_REQUIRE_GPU();
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  cudaFuncAttributes code{};
  ASSERT_EQ(cudaFuncGetAttributes(&code, own_code_kernel), cudaSuccess);
  const bool hopper_code = major >= 9 && code.binaryVersion >= 90;
  EXPECT_EQ(clusters_supported(), hopper_code);
  if (hopper_code) EXPECT_TRUE(pdl_supported());
  if (major < 9) EXPECT_FALSE(pdl_supported());
  // Queried once: the same answer again.
  EXPECT_EQ(clusters_supported(), clusters_supported());
  EXPECT_EQ(pdl_supported(), pdl_supported());
}

}  // namespace
}  // namespace fuselm
