// The peak-bandwidth measurements run, check their own sums, and report positive, consistent
// numbers. The host one runs everywhere (small buffer: this checks the method, not the machine);
// the CUDA one skips where no GPU is present.
#include "bench/peak_bandwidth.h"

#include <gtest/gtest.h>

#include "bench/gpu_info.h"
#include "bench/stats.h"
#include "core/error.h"

namespace fuselm::bench {
namespace {

TEST(PeakBandwidth, HostReadAndCopy) {
  const BandwidthPeak p = measure_host_peak(size_t{16} << 20, 3);
  EXPECT_EQ(p.device, "cpu");
  EXPECT_EQ(p.read_bytes, size_t{16} << 20);
  ASSERT_EQ(p.read_ms.size(), 3u);
  EXPECT_GT(p.read_gbs, 0.0);
  EXPECT_NEAR(p.read_gbs, p.read_bytes / (median(p.read_ms) * 1e-3) / 1e9, 1e-6 * p.read_gbs);
  EXPECT_EQ(p.copy_bytes, size_t{16} << 20);  // half copied onto the other half: read + written
  EXPECT_GT(p.copy_gbs, 0.0);
  EXPECT_NEAR(p.copy_gbs, gb_per_s(static_cast<double>(p.copy_bytes), median(p.copy_ms)), 1e-6 * p.copy_gbs);
  EXPECT_GT(p.threads, 0);
  // The copy kernel is a GPU measurement; the host has none.
  EXPECT_TRUE(p.copy_kernel_ms.empty());
  EXPECT_DOUBLE_EQ(p.copy_kernel_vs_memcpy(), 0.0);
}

TEST(PeakBandwidth, RejectsTinyBuffers) {
  EXPECT_THROW(measure_host_peak(100, 3), Error);
  EXPECT_THROW(measure_host_peak(size_t{1} << 20, 0), Error);
}

TEST(PeakBandwidth, CudaReadKernelAndCopy) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device here; the GPU peak is checked on a GPU machine";
  const GpuInfo info = query_gpu_info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.cuda_runtime_version, 0);
  // 1 GiB: far beyond any L2, small enough for every GPU this runs on.
  const BandwidthPeak p = measure_cuda_peak(size_t{1} << 30, 5);
  EXPECT_EQ(p.device, "cuda");
  ASSERT_EQ(p.read_ms.size(), 5u);
  EXPECT_GT(p.read_gbs, 0.0);
  EXPECT_GT(p.copy_gbs, 0.0);
  ASSERT_EQ(p.copy_kernel_ms.size(), 5u);
  EXPECT_GT(p.copy_kernel_gbs, 0.0);
  // Achieved bandwidth cannot beat the bus: 2 transfers per memory clock over the bus width
  // (a loose bound, as the reported memory clock convention varies by memory type).
  if (info.theoretical_gbs() > 0) {
    EXPECT_LT(p.read_gbs, 2.0 * info.theoretical_gbs());
  }
  std::printf("GPU %s: read %.1f GB/s, copy %.1f GB/s, bus-width bound %.1f GB/s\n", info.name.c_str(), p.read_gbs,
              p.copy_gbs, info.theoretical_gbs());
}

}  // namespace
}  // namespace fuselm::bench
