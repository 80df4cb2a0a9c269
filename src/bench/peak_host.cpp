// Host memory bandwidth peak, and the CUDA entry points of builds without CUDA.
#include <omp.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "bench/gpu_info.h"
#include "bench/peak_bandwidth.h"
#include "bench/stats.h"
#include "core/error.h"
#include "core/rng.h"

namespace fuselm::bench {

namespace {
double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

BandwidthPeak measure_host_peak(size_t bytes, int runs) {
  FUSELM_CHECK(runs > 0, "peak bandwidth: runs must be positive, got ", runs);
  const size_t words = bytes / sizeof(uint64_t);
  FUSELM_CHECK(words >= 1024, "peak bandwidth: buffer of ", bytes, " bytes is too small; use at least 8 KiB "
               "(and far more than the last-level cache for a meaningful number)");
  // Two halves: the read runs over the whole buffer, the copy from one half into the other.
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);
  uint64_t* data = buffer.get();
  // First touch from the threads that will read it, so pages land on their NUMA nodes; the
  // values are not zeros so nothing is faster than it would be on real data.
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < words; ++i) data[i] = splitmix64(i);
  uint64_t expected = 0;
#pragma omp parallel for schedule(static) reduction(+ : expected)
  for (size_t i = 0; i < words; ++i) expected += splitmix64(i);

  BandwidthPeak peak;
  peak.device = "cpu";
  peak.threads = omp_get_max_threads();
  peak.read_method = str_cat("OpenMP sum of 8-byte words over ", words * 8, " bytes, ", peak.threads,
                             " threads, median of ", runs, " runs after 1 warm-up");
  peak.read_bytes = words * sizeof(uint64_t);
  for (int run = -1; run < runs; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < words; ++i) sum += data[i];
    const double ms = elapsed_ms(t0);
    FUSELM_CHECK(sum == expected, "host read peak: sum ", sum, " differs from the expected ", expected,
                 "; memory or threading is broken");
    if (run >= 0) peak.read_ms.push_back(ms);
  }
  peak.read_gbs = gb_per_s(static_cast<double>(peak.read_bytes), median(peak.read_ms));

  const size_t half = words / 2;
  peak.copy_bytes = 2 * half * sizeof(uint64_t);
  peak.copy_method = str_cat("OpenMP memcpy of ", half * 8, " bytes (counted read + written), median of ",
                             runs, " runs after 1 warm-up");
  for (int run = -1; run < runs; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
    {
      const size_t nthreads = static_cast<size_t>(omp_get_num_threads());
      const size_t t = static_cast<size_t>(omp_get_thread_num());
      const size_t begin = half * t / nthreads, end = half * (t + 1) / nthreads;
      std::memcpy(data + half + begin, data + begin, (end - begin) * sizeof(uint64_t));
    }
    const double ms = elapsed_ms(t0);
    if (run >= 0) peak.copy_ms.push_back(ms);
  }
  peak.copy_gbs = gb_per_s(static_cast<double>(peak.copy_bytes), median(peak.copy_ms));
  return peak;
}

#if !FUSELM_HAVE_CUDA
namespace {
[[noreturn]] void no_cuda() {
  fail("this build of fuselm has no CUDA backend (nvcc was not found at configure time); use --device cpu "
       "or rebuild on a machine with the CUDA toolkit");
}
}  // namespace

BandwidthPeak measure_cuda_peak(size_t, int) { no_cuda(); }
GpuInfo query_gpu_info() { no_cuda(); }
GpuClocks query_gpu_clocks() { return {}; }
bool cuda_device_available() { return false; }
#endif

}  // namespace fuselm::bench
