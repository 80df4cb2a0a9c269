#pragma once
// The decode FFN in one launch: RMSNorm (folded) -> gate/up projection -> SwiGLU -> down projection
// -> residual add (+ the next norm's inputs), for up to 8 tokens, with the same bits as
// skinny_gemm_swiglu followed by skinny_gemm_residual with variants of the same rounding classes.
//
// Why: as two kernels, the down projection's CTAs can only start streaming once the gate/up
// kernel's CTAs leave their SMs, and its K loop waits for the whole gate/up grid; each launch pays
// a ramp and a tail (docs/kernels/fused_decode.md). Here one persistent grid streams both
// matrices back to back. A down piece (a fixed K range: the rounding class's cut) waits only for the
// gate/up tiles that make its activations, announced through counters, and its weights are in flight
// before they are ready.
//
// The arithmetic is the skinny GEMM's: each matrix's K is cut into the pieces of its rounding class
// (ceil(k_tiles / pieces) k-tiles each), every piece accumulated k-tile by k-tile from zero with the
// same mma on the same fragments, and the pieces added in order, piece 0 first. So a token's result
// does not depend on which path ran, nor on the batch.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/ffn_schedule.h"
#include "kernels/cuda/skinny_gemm.h"

namespace fuselm {

inline constexpr int kSkinnyFfnMaxTokens = 8;
inline constexpr int kSkinnyFfnWarps = 8;

// Lab stamps (SkinnyFfnPlan::lab_stamps): per CTA, kSkinnyFfnStamps global-timer readings (ns; 0
// where the event did not happen): where a CTA's time goes, which the kernel timeline (one "last
// CTA" time per mark) cannot show.
enum SkinnyFfnStamp : int {
  kFfnStampStart = 0,
  kFfnStampInputsStaged = 1,   // past the wait for the previous kernel, the gate/up input staged
  kFfnStampFirstStage = 2,     // warp 0's first stage has landed
  kFfnStampDownReady = 3,      // + warp: its first down item's activations are announced
  kFfnStampJobEnd = 3 + kSkinnyFfnWarps,  // + job (the first 16): warp 0 past the job's barrier
  kFfnStampEnd = kFfnStampJobEnd + 16,
  kSkinnyFfnStamps = kFfnStampEnd + 1,
};

// K pieces of a variant's rounding class: the cluster's K split for the CTA and register pipelines
// (their warps split rows), the warps for the warp pipeline without a cluster split; 0 for the warp
// pipeline with one (its class adds per-CTA warp sums, which the one-launch FFN does not).
int skinny_k_pieces(const SkinnyGemmVariant& v);

// What the one-launch FFN needs besides its operands: the schedule, on the device, and counters
// (zero before the first launch; every launch leaves them zero). Made once for a model and GPU.
struct SkinnyFfnPlan {
  int gate_up_pieces = 0;
  int down_pieces = 0;
  int ctas = 0;
  const int32_t* offsets = nullptr;  // device [ctas + 1]
  const int32_t* jobs = nullptr;     // device
  int* counters = nullptr;           // device [down_pieces + 1], zeroed
  // The most 2 KB stages a warp's ring holds (4, 8 or 12; 0: 8, or 4 where 8 do not fit). Same bits.
  int max_stages = 0;
  // Lab only: device [ctas][kSkinnyFfnStamps], zeroed before the launch; null records nothing.
  uint64_t* lab_stamps = nullptr;
};

// The schedule shape for a gate/up matrix [2 * ffn][hidden] and a down matrix [hidden][ffn] with
// the given variants, on `ctas` CTAs. An error where the classes cannot run in one launch.
Status skinny_ffn_schedule_shape(const PackedWeight& gate_up, const PackedWeight& down,
                                 const SkinnyGemmVariant& gate_up_variant, const SkinnyGemmVariant& down_variant,
                                 int ctas, FfnScheduleShape* shape);

// CTAs of the launch: one per SM (the launch needs every CTA resident at once; skinny_ffn refuses
// a plan with more CTAs than the GPU holds at once with the launch's shared memory).
Status skinny_ffn_ctas(int* ctas);

// act[m][ffn] = SwiGLU of the normed input through gate_up (as skinny_gemm_swiglu), then
// residual += act through down (as skinny_gemm_residual, with its next-norm outputs). `in` is the
// gate/up input (x * g), `norm` its folded RMSNorm. `out.xg` and `out.partials` may alias `in.x`
// and `norm.partials` (they are written only after every gate/up tile is done).
Status skinny_ffn(const PackedWeight& gate_up, const PackedWeight& down, const SkinnyInput& in,
                  const SkinnyNorm& norm, const SkinnySwigluOut& act, const SkinnyResidualOut& out,
                  const SkinnyFfnPlan& plan, cudaStream_t stream, SkinnyGemmLaunch launch = {});

}  // namespace fuselm
