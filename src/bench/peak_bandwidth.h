#pragma once
// The memory-bandwidth peak achieved bandwidth is reported against, measured by the tool itself on
// the machine it runs on (datasheet numbers are not what a kernel can reach).
//
// GPU: a read kernel over a large buffer (grid-stride loop of 16-byte loads, summed so nothing is
// optimised away and checked against the closed-form sum so every byte was read), median of
// several runs timed with CUDA events: the peak utilization is reported against. Then a copy of
// one half of the buffer onto the other, done twice, run by run alternately: by cudaMemcpy
// device-to-device, and by the tool's own copy kernel (pipelined 16-byte loads and stores, one
// block per SM; checked); both counted as (bytes read + bytes
// written) / median time, the way the tool counts the bytes of a decode step. The two agreeing
// validates that counting and timing.
// CPU: the same over host memory: a threaded (OpenMP) sum of 8-byte words, and a threaded memcpy.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fuselm::bench {

struct BandwidthPeak {
  std::string device;            // "cuda" or "cpu"
  std::string read_method;
  size_t read_bytes = 0;         // bytes read per run
  std::vector<double> read_ms;   // every timed run
  double read_gbs = 0;           // read_bytes / median(read_ms), 1 GB = 1e9 bytes
  // The copy by the library: cudaMemcpy device-to-device (GPU) or memcpy (CPU).
  std::string copy_method;
  size_t copy_bytes = 0;         // bytes read + bytes written per run (also of the copy kernel)
  std::vector<double> copy_ms;
  double copy_gbs = 0;
  // The same copy by the tool's own kernel (GPU only; empty and 0 on the CPU).
  std::string copy_kernel_method;
  std::vector<double> copy_kernel_ms;
  double copy_kernel_gbs = 0;
  // copy_kernel_gbs / copy_gbs; 0 when either is missing.
  double copy_kernel_vs_memcpy() const {
    return copy_gbs > 0 && copy_kernel_gbs > 0 ? copy_kernel_gbs / copy_gbs : 0.0;
  }
  int threads = 0;               // host threads (CPU) or resident threads of the grid (GPU)
};

// Bytes and repetitions used when the user gives none: the buffer is far larger than any cache.
inline constexpr size_t kDefaultCudaPeakBytes = size_t{4} << 30;
inline constexpr size_t kDefaultHostPeakBytes = size_t{1} << 30;
inline constexpr int kDefaultPeakRuns = 10;

// Measures host memory with OpenMP threads over a `bytes` buffer (rounded down to 8-byte words).
BandwidthPeak measure_host_peak(size_t bytes, int runs);
// Measures the current CUDA device; throws Error when CUDA is unavailable or a call fails.
BandwidthPeak measure_cuda_peak(size_t bytes, int runs);

}  // namespace fuselm::bench
