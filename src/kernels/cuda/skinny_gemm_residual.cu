// The skinny GEMM with the residual add (+ the next norm's input) epilogue (kernels in skinny_gemm_kernels.cuh).
#include "kernels/cuda/skinny_gemm_kernels.cuh"

namespace fuselm {
using namespace skinny_detail;

Status skinny_gemm_residual(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                            const SkinnyResidualOut& out, SkinnyGemmVariant variant, cudaStream_t stream,
                            SkinnyGemmLaunch launch_options) {
  if (out.residual == nullptr || out.residual_stride < w.rows)
    return Status::error("skinny GEMM residual: bad residual buffer or stride");
  if (out.next_norm_weight != nullptr && (out.xg == nullptr || out.xg_stride < w.rows))
    return Status::error("skinny GEMM residual: the normed copy needs an xg buffer with stride >= rows");
  return launch(w, in, norm, ResidualEpilogue{out, w.rows, mma_tiles(w.rows)}, variant, launch_options, stream);
}

}  // namespace fuselm
