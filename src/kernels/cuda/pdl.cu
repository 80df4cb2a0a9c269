#include "kernels/cuda/pdl.cuh"

namespace fuselm {
namespace {

__global__ void probe_kernel() {}

}  // namespace

bool pdl_supported() {
  static const bool supported = [] {
    int device = 0, major = 0;
    cudaFuncAttributes attributes{};
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaFuncGetAttributes(&attributes, probe_kernel) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9 && attributes.ptxVersion >= 90;
  }();
  return supported;
}

}  // namespace fuselm
