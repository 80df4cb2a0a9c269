#pragma once
// Programmatic dependent launch (sm_90+): a kernel launched with the attribute may start while the
// previous kernel in its stream is still running. It must call wait_for_previous_grid() before it
// reads anything the previous kernel writes (or writes anything the previous kernel reads);
// allow_next_grid() lets the next such kernel start early. Both are no-ops for a kernel launched
// without the attribute, and compile to nothing in code for older architectures.
#include <cuda_runtime.h>

#include <utility>

namespace fuselm {

__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Whether kernels of this build run with griddepcontrol on the current device: it is sm_90 or newer
// and runs this binary's sm_90 code (a compute_80 PTX build, JIT-compiled on a newer GPU, has
// none, and launching it with the attribute would let it overlap its predecessor). Checked once.
bool pdl_supported();

// Whether this build's sm_90 code runs here and the device launches thread-block clusters. Checked once.
bool clusters_supported();

// The launch attributes for clusters of `cluster_ctas` CTAs along x (when more than 1) and for
// programmatic stream serialization (when `pdl`, already checked against what runs here).
struct LaunchAttributes {
  cudaLaunchAttribute attrs[2]{};
  unsigned count = 0;
  LaunchAttributes(int cluster_ctas, bool pdl) {
    if (cluster_ctas > 1) {
      attrs[count].id = cudaLaunchAttributeClusterDimension;
      attrs[count].val.clusterDim.x = static_cast<unsigned>(cluster_ctas);
      attrs[count].val.clusterDim.y = 1;
      attrs[count].val.clusterDim.z = 1;
      ++count;
    }
    if (pdl) {
      attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[count].val.programmaticStreamSerializationAllowed = 1;
      ++count;
    }
  }
};

// Launches `kernel` on `stream`, with programmatic stream serialization when `pdl` is set and
// supported here, in clusters of `cluster_ctas` CTAs along x when that is more than 1 (the caller
// checks clusters_supported() first).
template <class... KernelArgs, class... Args>
cudaError_t launch_kernel_in_clusters(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                                      cudaStream_t stream, bool pdl, int cluster_ctas, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  LaunchAttributes attributes(cluster_ctas, pdl && pdl_supported());
  config.attrs = attributes.attrs;
  config.numAttrs = attributes.count;
  return cudaLaunchKernelEx(&config, kernel, static_cast<KernelArgs>(args)...);
}

// The same without clusters.
template <class... KernelArgs, class... Args>
cudaError_t launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool pdl, Args&&... args) {
  return launch_kernel_in_clusters(kernel, grid, block, smem, stream, pdl, 1, std::forward<Args>(args)...);
}

}  // namespace fuselm
