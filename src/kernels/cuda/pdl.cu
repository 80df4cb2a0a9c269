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

bool clusters_supported() {
  static const bool supported = [] {
    int device = 0, cluster_launch = 0;
    cudaFuncAttributes attributes{};
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device) != cudaSuccess ||
        cudaFuncGetAttributes(&attributes, probe_kernel) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return cluster_launch != 0 && attributes.ptxVersion >= 90 && attributes.binaryVersion >= 90;
  }();
  return supported;
}

}  // namespace fuselm
