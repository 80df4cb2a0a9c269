// The skinny GEMM with the gate/up projection + SwiGLU epilogue (kernels in skinny_gemm_kernels.cuh).
#include "kernels/cuda/skinny_gemm_kernels.cuh"

namespace fuselm {
using namespace skinny_detail;

Status skinny_gemm_swiglu(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                          const SkinnySwigluOut& out, SkinnyGemmVariant variant, cudaStream_t stream,
                          SkinnyGemmLaunch launch_options) {
  if (w.rows != mma_tiles(2 * static_cast<int64_t>(out.ffn)) * 16 && w.rows != ((out.ffn + 7) / 8) * 16)
    return Status::error(str_cat("fused gate/up: packed rows ", w.rows, " do not match ffn=", out.ffn));
  if (out.act == nullptr || out.act_stride < out.ffn) return Status::error("fused gate/up: bad activation buffer");
  return launch(w, in, norm, SwigluEpilogue{{}, out}, variant, launch_options, stream);
}

}  // namespace fuselm
