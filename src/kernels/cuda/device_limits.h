#pragma once
// The current device's SM count and shared-memory limits, queried once per device, for launchers
// that size grids and pipelines by them (skinny GEMM, decode attention).
#include <cuda_runtime.h>

#include <mutex>

namespace fuselm {

struct DeviceLimits {
  int sm_count = 0;            // 0 when the query failed
  int max_smem_per_block = 0;  // opt-in maximum of dynamic shared memory per block; 0 when the query failed
  int smem_per_sm = 0;         // shared memory an SM shares among its resident blocks
  int reserved_smem_per_block = 0;  // what the system takes of it per resident block
};

inline DeviceLimits device_limits() {
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  static DeviceLimits limits[kMaxDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    (void)cudaGetLastError();
    return {};
  }
  std::call_once(once[device], [&] {
    DeviceLimits l;
    if (cudaDeviceGetAttribute(&l.sm_count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&l.max_smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&l.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&l.reserved_smem_per_block, cudaDevAttrReservedSharedMemoryPerBlock, device) ==
            cudaSuccess)
      limits[device] = l;
    else
      (void)cudaGetLastError();
  });
  return limits[device];
}

}  // namespace fuselm
