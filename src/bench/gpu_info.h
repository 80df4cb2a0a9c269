#pragma once
// What the GPU is and how it is clocked, for the environment block of a benchmark result.
#include <cstddef>
#include <string>

namespace fuselm::bench {

struct GpuInfo {
  std::string name;
  std::string pci_bus_id;
  int compute_capability_major = 0, compute_capability_minor = 0;
  int sm_count = 0;
  size_t total_memory_bytes = 0;
  int memory_bus_width_bits = 0;
  int sm_clock_max_mhz = 0;        // rated peak (CUDA attribute)
  int memory_clock_max_mhz = 0;
  // Clocks at the time of the query, from NVML (loaded at run time); -1 when NVML is unavailable.
  int sm_clock_mhz = -1;
  int memory_clock_mhz = -1;
  int cuda_driver_version = 0;     // e.g. 13000 for 13.0 (cudaDriverGetVersion)
  int cuda_runtime_version = 0;    // cudaRuntimeGetVersion
  std::string driver_version;      // e.g. "580.65.06" from NVML; "" when unavailable
  // 2 transfers per clock * bus width: the datasheet-style number, for reference only.
  double theoretical_gbs() const {
    return 2.0 * memory_clock_max_mhz * 1e6 * (memory_bus_width_bits / 8.0) / 1e9;
  }
};

// Queries the current CUDA device; throws Error when CUDA is unavailable.
GpuInfo query_gpu_info();
// Current SM and memory clocks in MHz from NVML; {-1, -1} when NVML is unavailable.
struct GpuClocks {
  int sm_mhz = -1;
  int memory_mhz = -1;
};
GpuClocks query_gpu_clocks();

// Whether this build has the CUDA backend and a usable device is present.
bool cuda_device_available();

}  // namespace fuselm::bench
