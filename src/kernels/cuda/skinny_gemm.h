#pragma once
// Small-batch GEMM for decode (m <= 16 tokens): out[m][n] = sum_k x[m][k] * W[n][k] with W in the
// tensor-core fragment layout of kernels/mma_packing.h, followed by a fused epilogue. The kernel is a
// weight streamer: each weight byte is read once per step through a multi-stage shared-memory
// pipeline (per warp with cp.async, or per CTA with bulk copies), while mma.sync does the arithmetic
// for up to 16 tokens at no extra cost. Variants, measurements: docs/kernels/skinny_gemm.md.
//
// Determinism: K is cut at boundaries that depend only on K and the variant (first across the CTAs
// of a cluster, then across the warps of a CTA); partial sums are added in warp order, then in
// cluster-rank order. No atomics in any sum, no global workspace (but the greedy pick's keys and CTA
// count, below). A token's result does not depend on how many other tokens are in the batch (each
// token is its own mma column).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/kernel_trace.h"
#include "kernels/cuda/paged_kv.h"
#include "kernels/cuda/sampling.h"
#include "kernels/mma_packing.h"

namespace fuselm {

inline constexpr int kSkinnyGemmMaxTokens = 16;

// A weight matrix packed by pack_mma_tiles: `rows` x `cols` logical (unpadded) elements.
struct PackedWeight {
  const void* data = nullptr;  // device
  DType dtype = DType::BF16;   // BF16 or F16
  int64_t rows = 0;            // packed (logical) rows, before padding to 16
  int64_t cols = 0;            // K, before padding to 16
  // Row tiles per tile group (mma_packing.h): 1, which every variant reads, or the row tiles of a
  // CTA- or register-pipeline CTA (row_tiles * warps), which only those pipelines read.
  int tile_group = 1;
};

// The input activations: `m` rows of `cols` values (dtype of the weights), row stride in elements.
struct SkinnyInput {
  const void* x = nullptr;
  int64_t stride = 0;
  int m = 0;
};

// RMSNorm folded into the GEMM: the input rows already carry the norm weight (x * g, written by the
// previous kernel's epilogue) and the previous kernel left per-tile partial sums of squares of the
// unnormalised row; the result is scaled by 1/rms. Null partials = no norm.
struct SkinnyNorm {
  const float* partials = nullptr;  // [m][num_partials]
  int num_partials = 0;
  int dim = 0;  // the normalised row length (mean = sum / dim)
  float eps = 1e-5f;
};

// How a CTA streams its weights.
enum class SkinnyPipeline : int {
  // The warps split the CTA's K range; each streams its share of the CTA's row tiles through its own
  // cp.async pipeline, then the warps' partial sums are added in warp order. Any sm_80+ GPU.
  kWarpSplitK = 0,
  // The warps split rows (each owns `row_tiles` tiles of the CTA's row_tiles * warps); a producer
  // warp streams them with bulk copies (TMA) and stages the activations once for all warps. sm_90+.
  kCtaSplitRows = 1,
  // The CTA pipeline's cut (warps split rows), each lane loading its weight fragments straight into
  // registers; the activations are staged once for all warps. Same bits as kCtaSplitRows with the
  // same k_split. Any sm_80+ GPU (k_split > 1: sm_90+).
  kRegisters = 2,
};

// Kernel shape: row tiles (per CTA for kWarpSplitK, per warp for kCtaSplitRows and kRegisters),
// warps, CTAs per thread-block cluster that split K (k_split > 1 needs clusters: sm_90 or newer) and
// pipeline. The
// variant may depend on the matrix shape but never on m: the K boundaries, and so the bits, do.
// Chosen once per shape by the plan (default_skinny_variant).
struct SkinnyGemmVariant {
  int row_tiles = 1;
  int warps = 8;
  int k_split = 1;
  SkinnyPipeline pipeline = SkinnyPipeline::kWarpSplitK;
  std::string name() const;  // "rt4_w4", "rt4_w4_k8", "rt1_w4_k2_cta", "rt1_w8_k2_reg"
};
// Every supported variant.
std::vector<SkinnyGemmVariant> skinny_gemm_variants();

// The variants of one decode matrix, chosen once by the plan: one for a single token and one for
// more. A variant's K split fixes the rounding, so the two must round alike (the plan checks it,
// with skinny_rounding_class in plan/plan.h) for a token's bits not to change with the batch size.
struct SkinnyGemmChoice {
  SkinnyGemmVariant variant;       // m >= 2
  SkinnyGemmVariant single_token;  // m == 1
  bool balance_sms = false;               // SkinnyGemmLaunch::balance_sms for m >= 2
  bool single_token_balance_sms = false;  // and for m == 1
  static SkinnyGemmChoice same(SkinnyGemmVariant v) { return {v, v}; }
  const SkinnyGemmVariant& for_tokens(int m) const { return m == 1 ? single_token : variant; }
  bool balance_for_tokens(int m) const { return m == 1 ? single_token_balance_sms : balance_sms; }
};

// How an op's weights are packed for the variants it runs (mma_packing.h, PackedWeight::tile_group):
// in tile groups of the row tiles a CTA owns when every variant is a register-pipeline variant, or a
// CTA-pipeline variant of 8 or more row tiles, with that many (a group's K range is one contiguous run
// its CTA streams); else 1, which every variant reads.
int skinny_tile_group(const SkinnyGemmChoice& choice);

// Whether k_split > 1 and kCtaSplitRows can run here: the current device launches clusters and this
// binary holds sm_90 code for it (a compute_80 PTX build, JIT-compiled on a newer GPU, has neither).
bool skinny_gemm_clusters_supported();

// The variant the plan should use for a `rows` x `cols` weight on a GPU with `sm_count` SMs (the
// same for every m, as batch invariance requires). Without clusters it is a k_split = 1 kWarpSplitK
// variant.
SkinnyGemmVariant default_skinny_variant(int64_t rows, int64_t cols, int sm_count, bool clusters);

// The variant that runs a single token for `v`: a CTA-pipeline variant whose cluster splits K into
// 4 or 8 has a warp-pipeline twin with that many warps (rt1_w4, rt1_w8) that cuts and adds K the
// same way, so it gives the same bits and is faster for one token; any other variant is its own.
SkinnyGemmVariant single_token_twin(const SkinnyGemmVariant& v);

// How a GEMM is launched, not what it computes: results are bitwise the same for every setting.
struct SkinnyGemmLaunch {
  // Programmatic dependent launch (sm_90+; ignored elsewhere): the kernel may start while the
  // previous kernel in the stream finishes, streams its first weight stages, and waits for the
  // previous kernel's results (griddepcontrol.wait) before it reads activations or writes anything.
  // It lets the next kernel start once its own weight stream is issued. Works under graph capture.
  bool pdl = false;
  // At m = 1, run a CTA-pipeline variant with k_split 4 or 8 on its warp-pipeline twin (rt1_w4 /
  // rt1_w8: the same K pieces added in the same order, so the same bits; faster for one token).
  // Not for weights in tile groups, which the warp pipeline cannot read.
  bool single_token_twin = true;
  // Spread the grid evenly over the SMs: each CTA's shared memory is padded so that no more than
  // ceil(CTAs / SMs) fit on an SM (as long as a cluster grid still runs in one wave). Without it the
  // block scheduler fills SMs to capacity, and the SMs that got the most CTAs end the kernel. The
  // padding also keeps the next kernel's early CTAs off a full SM, so the plan sets it per op.
  bool balance_sms = false;
  // Timeline slot (kernel_trace.h); null records nothing.
  KernelTrace* trace = nullptr;
};

// Greedy tokens picked by the GEMM that computes the logits (the LM head), so that no sampling
// kernel stands between the step and the next: every row tile's finishing warp writes, per token,
// the largest logit of its 16 rows and the lowest row holding it as one 64-bit key; the CTA that
// counts itself in last reduces the keys of each token whose parameters are greedy without penalty
// (sampling.h greedy_without_penalty) and writes its id: the same id as the sampling kernel's greedy
// scan of the stored logits (ties to the lower id; NaN never picked; -1 when every logit is NaN).
// Output F32 only, for up to kSkinnyGreedyPickMaxTokens tokens.
inline constexpr int kSkinnyGreedyPickMaxTokens = 4;
struct SkinnyGreedyPick {
  const SampleParams* params = nullptr;  // [m], device: which rows are picked
  uint64_t* tile_keys = nullptr;         // [m][row tiles], device scratch; null = no pick
  int* ctas_done = nullptr;              // device counter, 0 before the first launch; left at 0
  int32_t* tokens = nullptr;             // [m], device
  int32_t* host_tokens = nullptr;        // [m], pinned host memory, or null
};
// Bytes of tile keys for m tokens of `rows` logits.
inline size_t skinny_greedy_pick_key_bytes(int m, int64_t rows) {
  return static_cast<size_t>(m) * static_cast<size_t>(mma_tiles(rows)) * sizeof(uint64_t);
}

// out[m][n] (+)= result, written as `out_dtype` (F32, BF16 or F16) with row stride out_stride;
// with `pick`, also the greedy rows' tokens (SkinnyGreedyPick).
Status skinny_gemm_store(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm, void* out,
                         DType out_dtype, int64_t out_stride, SkinnyGemmVariant variant, cudaStream_t stream,
                         SkinnyGemmLaunch launch = {}, const SkinnyGreedyPick& pick = {});

// residual[m][n] += result (fp32). When next_norm_weight is set, also writes
// xg[m][n] = residual * next_norm_weight[n] (rounded to the weights dtype) and, per 16-row tile,
// partials[m][n / 16] = sum of residual^2: the input of the next normed GEMM.
struct SkinnyResidualOut {
  float* residual = nullptr;
  int64_t residual_stride = 0;
  const float* next_norm_weight = nullptr;  // [n], fp32 (as stored: no rounding of the norm weights)
  void* xg = nullptr;
  int64_t xg_stride = 0;
  float* partials = nullptr;  // [m][ceil(n / 16)]
};
Status skinny_gemm_residual(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                            const SkinnyResidualOut& out, SkinnyGemmVariant variant, cudaStream_t stream,
                            SkinnyGemmLaunch launch = {});

// Fused Q/K/V projection (weights packed with qkv_rope_row_map) + rotate-half RoPE + KV-cache append.
// Token i sits at positions[i] of the sequence whose block table is row i of kv.block_tables. The
// positions are a step input: with programmatic dependent launch they are read before the wait for
// the previous kernel, so no kernel launched before this one may still be writing them.
struct SkinnyQkvOut {
  void* q = nullptr;  // [m][n_heads * head_dim], weights dtype, rotated
  int64_t q_stride = 0;
  PagedKvView kv;     // K (rotated) and V are written at each token's position
  const int32_t* positions = nullptr;  // device [m]
  const float* inv_freq = nullptr;     // device [head_dim / 2]
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
};
Status skinny_gemm_qkv_rope(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                            const SkinnyQkvOut& out, SkinnyGemmVariant variant, cudaStream_t stream,
                            SkinnyGemmLaunch launch = {});

// Fused gate/up projection (weights packed with gate_up_row_map) + SwiGLU:
// act[m][j] = silu(gate_j) * up_j for j < ffn, weights dtype.
struct SkinnySwigluOut {
  void* act = nullptr;
  int64_t act_stride = 0;
  int ffn = 0;
};
Status skinny_gemm_swiglu(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                          const SkinnySwigluOut& out, SkinnyGemmVariant variant, cudaStream_t stream,
                          SkinnyGemmLaunch launch = {});

}  // namespace fuselm
