// Occupancy of CTA-pipeline gate/up instances: blocks per SM and active clusters of 4.
#include <cstdio>
#include "kernels/cuda/skinny_gemm_kernels.cuh"
using namespace fuselm;
using namespace fuselm::skinny_detail;
template <int MT, int RT, int W>
void probe(int grid, int cluster = 4) {
  using Pipe = CtaPipe<__nv_bfloat16, MT, RT, W>;
  auto* k = skinny_gemm_cta_kernel<__nv_bfloat16, MT, RT, W, SwigluEpilogue>;
  cudaFuncAttributes a{};
  cudaFuncGetAttributes(&a, k);
  const int smem = Pipe::smem_bytes(MT * 8 > 1 ? (MT == 1 ? 1 : 16) : 1);
  int blocks = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, (W + 1) * 32, smem);
  cudaLaunchConfig_t c{};
  c.gridDim = dim3(grid);
  c.blockDim = dim3((W + 1) * 32);
  c.dynamicSmemBytes = smem;
  cudaLaunchAttribute at[1]{};
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cluster; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
  c.attrs = at; c.numAttrs = 1;
  int clusters = 0;
  cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, k, &c);
  std::printf("MT=%d rt%d_w%d: regs %d, static smem %zu, dyn smem %d, blocks/SM %d, active clusters of %d: %d (%s), grid %d\n",
              MT, RT, W, a.numRegs, a.sharedSizeBytes, smem, blocks, cluster, clusters, cudaGetErrorString(e), grid);
  const bool carve = false;
  if (!carve) return;
  cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, (W + 1) * 32, smem);
  e = cudaOccupancyMaxActiveClusters(&clusters, k, &c);
  std::printf("   with carveout 100: blocks/SM %d, clusters %d (%s)\n", blocks, clusters, cudaGetErrorString(e));
}
int main() {
  int dev = 0; cudaDeviceProp p{}; cudaGetDeviceProperties(&p, dev);
  std::printf("%s: %d SMs, regs/SM %d, smem/SM %zu, smem/block optin %zu, reserved smem/block %zu\n", p.name,
              p.multiProcessorCount, p.regsPerMultiprocessor, p.sharedMemPerMultiprocessor, p.sharedMemPerBlockOptin,
              p.reservedSharedMemPerBlock);
  probe<1, 2, 8>(448);
  probe<1, 2, 7>(384, 3);  // rt2_w7_k3_cta
  probe<1, 1, 8>(500, 2);  // 8B LM head at vocab 32000: rt1_w8_k2_cta
  probe<1, 1, 4>(512, 2);  // 1B gate/up: rt1_w4_k2_cta
  probe<2, 1, 4>(512, 2);
  probe<2, 1, 4>(384, 4);  // 8B qkv at 2+ tokens: rt1_w4_k4_cta
  probe<2, 1, 4>(512, 8);  // 8B o/down at 2+ tokens: rt1_w4_k8_cta
  probe<2, 1, 4>(256, 8);  // 1B o/down
  probe<2, 1, 4>(384, 8);  // 1B qkv
  return 0;
}
