#include "kernels/cuda/skinny_gemm_kernels.cuh"

// Variants, their names and defaults, and the plain store entry point; the fused epilogues' entry
// points live in skinny_gemm_{residual,qkv,swiglu}.cu.
namespace fuselm {
using namespace skinny_detail;

// A single token through a CTA-pipeline variant whose cluster splits K into 4 or 8 runs on the warp
// pipeline with that many warps instead (one row tile per CTA): the K pieces are the same
// (ceil(k_tiles / k_split) k-tiles each), each piece is accumulated k-tile by k-tile from zero in
// both, and the pieces are added in the same order (warp 0 + warp 1 + ... there, rank 0 + rank 1 +
// ... here), so the bits are the same; the warp pipeline is 15-25% faster at m = 1
// (docs/kernels/skinny_gemm.md), the CTA pipeline far faster at m = 16.
SkinnyGemmVariant single_token_twin(const SkinnyGemmVariant& v) {
  const int shape = v.row_tiles * 100 + v.warps;
  const bool cta_shape = shape == 104 || shape == 108 || shape == 204 || shape == 208 || shape == 404;
  if (v.pipeline != SkinnyPipeline::kCtaSplitRows || !cta_shape || (v.k_split != 4 && v.k_split != 8)) return v;
  return SkinnyGemmVariant{1, v.k_split, 1, SkinnyPipeline::kWarpSplitK};
}

// Groups for the CTA pipeline only where its row tiles' stage copies would be 1 KB or less (7+ row
// tiles a CTA): there one 8 KB copy a stage sped the 8B gate/up K loop up 4% (55.9 -> 53.8 us),
// while 4 x 2 KB -> 8 KB slowed the 1B gate/up loop 2% (15.1 -> 15.4 us; docs/kernels/skinny_gemm.md).
int skinny_tile_group(const SkinnyGemmChoice& choice) {
  const SkinnyGemmVariant &a = choice.variant, &b = choice.single_token;
  const int tiles = a.row_tiles * a.warps;
  auto reads_groups = [&](const SkinnyGemmVariant& v) {
    if (v.row_tiles * v.warps != tiles) return false;
    return v.pipeline == SkinnyPipeline::kRegisters || (v.pipeline == SkinnyPipeline::kCtaSplitRows && tiles >= 7);
  };
  return reads_groups(a) && reads_groups(b) ? tiles : 1;
}

std::string SkinnyGemmVariant::name() const {
  std::string n = str_cat("rt", row_tiles, "_w", warps);
  if (k_split != 1) n += str_cat("_k", k_split);
  if (pipeline == SkinnyPipeline::kCtaSplitRows) n += "_cta";
  if (pipeline == SkinnyPipeline::kRegisters) n += "_reg";
  return n;
}

std::vector<SkinnyGemmVariant> skinny_gemm_variants() {
  std::vector<SkinnyGemmVariant> v;
  for (int k_split : {1, 2, 4, 8})
    for (int row_tiles : {1, 2, 4})
      for (int warps : {4, 8}) v.push_back({row_tiles, warps, k_split});
  // 1 x 7 (7 row tiles a CTA) fits FFN widths with a factor of 7 (14,336 = 7 * 2^11): the 8B gate/up's
  // 1,792 row tiles make 512 CTAs at k2, four on 128 SMs, where 16-tile CTAs at k4 make 448 that
  // clusters of four can place on only 124 SMs, four on most of them.
  for (int k_split : {1, 2, 4, 8})
    for (auto [row_tiles, warps] :
         {std::pair{1, 4}, std::pair{2, 4}, std::pair{1, 8}, std::pair{2, 8}, std::pair{4, 4}, std::pair{1, 7}})
      v.push_back({row_tiles, warps, k_split, SkinnyPipeline::kCtaSplitRows});
  for (int k_split : {1, 2, 4, 8})
    for (int warps : {4, 8}) v.push_back({1, warps, k_split, SkinnyPipeline::kRegisters});
  return v;
}

bool skinny_gemm_clusters_supported() {
  // Any cluster-capable instance answers for all: they are built for the same targets.
  using Kernel = decltype(&skinny_gemm_kernel<__nv_bfloat16, 1, 4, 4, StoreEpilogue>);
  Kernel kernel = skinny_gemm_kernel<__nv_bfloat16, 1, 4, 4, StoreEpilogue>;
  static KernelSupportCache cache;
  const KernelSupport support =
      cache.get(reinterpret_cast<const void*>(kernel), SkinnyPipe<__nv_bfloat16, 1, 4, 4>::kSmemBytes);
  return support.status.ok() && support.clusters;
}

SkinnyGemmVariant default_skinny_variant(int64_t rows, int64_t cols, int sm_count, bool clusters) {
  (void)cols;  // K shapes the CTA's stream length, not the choice: k_split follows the row count alone
  const int64_t row_tiles = mma_tiles(rows), sms = std::max(sm_count, 1);
  if (!clusters) {
    // Without sm_90 code only the warp pipeline runs, without K split: 4 row tiles per CTA for
    // large matrices (activation traffic at m = 16 is a quarter of the weights'), 2 otherwise.
    return SkinnyGemmVariant{row_tiles >= 8 * sms ? 4 : 2, 8, 1};
  }
  // The CTA pipeline with 4 row tiles per CTA (one per warp): the activations are staged once per
  // 64 weight rows, so m = 16 costs little more than m = 1. K is split across a cluster until the
  // grid has >= 2.5 CTAs per SM, enough 8 KB stages in flight to cover the memory latency.
  SkinnyGemmVariant v{1, 4, 1, SkinnyPipeline::kCtaSplitRows};
  const int64_t groups = (row_tiles + 3) / 4;
  while (v.k_split < 8 && 2 * groups * v.k_split < 5 * sms) v.k_split *= 2;
  return v;
}

Status skinny_gemm_store(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm, void* out,
                         DType out_dtype, int64_t out_stride, SkinnyGemmVariant variant, cudaStream_t stream,
                         SkinnyGemmLaunch launch_options, const SkinnyGreedyPick& pick) {
  if (out_dtype != DType::F32 && out_dtype != w.dtype)
    return Status::error(str_cat("skinny GEMM: output dtype ", dtype_name(out_dtype), " must be f32 or the weights' ",
                                 dtype_name(w.dtype)));
  if (out == nullptr || out_stride < w.rows) return Status::error("skinny GEMM: bad output buffer or stride");
  if (pick.tile_keys != nullptr) {
    if (out_dtype != DType::F32 || in.m > kSkinnyGreedyPickMaxTokens)
      return Status::error(str_cat("skinny GEMM: the greedy pick needs f32 output and at most ",
                                   kSkinnyGreedyPickMaxTokens, " tokens (", dtype_name(out_dtype), ", ", in.m, ")"));
    if (pick.params == nullptr || pick.ctas_done == nullptr || pick.tokens == nullptr)
      return Status::error("skinny GEMM: the greedy pick needs params, a CTA counter and tokens");
  }
  return launch(w, in, norm, StoreEpilogue{{}, out, out_dtype, out_stride, w.rows, pick}, variant, launch_options,
                stream);
}

}  // namespace fuselm
