#include "kernels/cuda/pdl.cuh"

namespace fuselm {
namespace {

__global__ void probe_kernel() {}

// Whether the current device reports `attribute` >= at_least and this build's code for it is
// sm_90 or newer (the PTX, and with `need_binary` the machine code too): false on any failed query.
bool sm90_feature(cudaDeviceAttr attribute, int at_least, bool need_binary) {
  int device = 0, value = 0;
  cudaFuncAttributes code{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess ||
      cudaFuncGetAttributes(&code, probe_kernel) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return value >= at_least && code.ptxVersion >= 90 && (!need_binary || code.binaryVersion >= 90);
}

}  // namespace

bool pdl_supported() {
  static const bool supported = sm90_feature(cudaDevAttrComputeCapabilityMajor, 9, false);
  return supported;
}

bool clusters_supported() {
  static const bool supported = sm90_feature(cudaDevAttrClusterLaunch, 1, true);
  return supported;
}

}  // namespace fuselm
