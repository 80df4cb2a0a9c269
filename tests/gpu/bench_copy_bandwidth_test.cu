// The tool's bandwidth figure for a pure copy: its own copy kernel, counted (bytes read + bytes
// written) / median time as every bandwidth the tool reports, must agree with cudaMemcpy
// device-to-device on the same buffers within 5%. If it does not, the tool's kernels or its
// counting are off, not the GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "bench/gpu_info.h"
#include "bench/peak_bandwidth.h"
#include "bench/stats.h"
#include "gpu_test_util.h"

namespace fuselm::bench {
namespace {

TEST(BenchCopyBandwidth, CopyKernelAgreesWithCudaMemcpy) {
  FUSELM_REQUIRE_GPU();
  // 2 GiB: each copy moves 1 GiB each way, far beyond any L2, and fits every GPU this runs on.
  const size_t bytes = size_t{2} << 30;
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_CUDA_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < bytes + (size_t{256} << 20))
    GTEST_SKIP() << "only " << free_bytes << " bytes free on the GPU; the copy check needs 2 GiB";

  const BandwidthPeak p = measure_cuda_peak(bytes, 20);
  ASSERT_EQ(p.copy_ms.size(), 20u);
  ASSERT_EQ(p.copy_kernel_ms.size(), 20u);
  EXPECT_EQ(p.copy_bytes, bytes);  // half the buffer read, half written
  EXPECT_DOUBLE_EQ(p.copy_gbs, gb_per_s(static_cast<double>(p.copy_bytes), median(p.copy_ms)));
  EXPECT_DOUBLE_EQ(p.copy_kernel_gbs, gb_per_s(static_cast<double>(p.copy_bytes), median(p.copy_kernel_ms)));
  const GpuInfo info = query_gpu_info();
  std::printf("[copy] %s: copy kernel %.1f GB/s, cudaMemcpy D2D %.1f GB/s, ratio %.4f; read peak %.1f GB/s\n",
              info.name.c_str(), p.copy_kernel_gbs, p.copy_gbs, p.copy_kernel_vs_memcpy(), p.read_gbs);
  std::printf("[copy] %s\n[copy] %s\n", p.copy_kernel_method.c_str(), p.copy_method.c_str());
  EXPECT_NEAR(p.copy_kernel_vs_memcpy(), 1.0, 0.05)
      << "copy kernel " << p.copy_kernel_gbs << " GB/s vs cudaMemcpy " << p.copy_gbs << " GB/s";
}

}  // namespace
}  // namespace fuselm::bench
