// The skinny GEMM with the Q/K/V projection + RoPE + KV-cache append epilogue (kernels in skinny_gemm_kernels.cuh).
#include "kernels/cuda/skinny_gemm_kernels.cuh"

namespace fuselm {
using namespace skinny_detail;

Status skinny_gemm_qkv_rope(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                            const SkinnyQkvOut& out, SkinnyGemmVariant variant, cudaStream_t stream,
                            SkinnyGemmLaunch launch_options) {
  if (out.head_dim % 16 != 0 || out.head_dim <= 0)
    return Status::error(str_cat("fused QKV: unsupported head_dim=", out.head_dim, " (must be a multiple of 16)"));
  if (w.rows != static_cast<int64_t>(out.n_heads + 2 * out.n_kv_heads) * out.head_dim)
    return Status::error(str_cat("fused QKV: packed rows ", w.rows, " != (heads + 2 kv heads) x head_dim"));
  if (out.q == nullptr || out.kv.k == nullptr || out.kv.v == nullptr || out.positions == nullptr ||
      out.inv_freq == nullptr || out.kv.block_tables == nullptr)
    return Status::error("fused QKV: null output, cache, position or frequency pointer");
  return launch(w, in, norm, QkvRopeEpilogue{out}, variant, launch_options, stream);
}

}  // namespace fuselm
