#pragma once
// Token sampling on the device over fp32 logits: repetition penalty, temperature, top-k, top-p,
// min-p and a draw from each request's own counter-based RNG; greedy is an argmax. Only the sampled
// token ids need to come back to the host.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/hd.h"
#include "core/status.h"

namespace fuselm {

// One row's parameters: the SamplingParams of its request plus the RNG state for this draw.
struct SampleParams {
  float temperature = 0.0f;         // <= 0: greedy (argmax, ties to the lower id)
  int32_t top_k = 0;                // 0 = off; keeps exactly k tokens, ties to the lower id
  float top_p = 1.0f;               // >= 1 = off
  float min_p = 0.0f;               // <= 0 = off
  float repetition_penalty = 1.0f;  // 1 = off
  int32_t history_len = 0;          // ids of this row's penalty window in its `history` row
  uint64_t rng_state = 0;           // the draw uses splitmix64(rng_state), as Rng::next_float would
};

// Whether a row's token is the argmax of its logits as computed (greedy, no repetition penalty to
// apply first): the kernel that computes the logits may pick it (skinny_gemm.h SkinnyGreedyPick).
FUSELM_HD bool greedy_without_penalty(const SampleParams& p) {
  return p.temperature <= 0.0f && (p.repetition_penalty == 1.0f || p.history_len <= 0);
}

// Samples one token per row of logits [rows][vocab] (modified in place: penalty, then temperature).
// The order is HF's: penalty (each distinct id in the window once: a positive logit divided by the
// penalty, a negative one multiplied), temperature, top-k, top-p (the smallest highest-ranked set
// whose mass reaches top_p of what top-k kept), min-p (probability >= min_p times the largest), then
// u in [0, 1) from the RNG picks the first token, in id order, whose cumulative kept mass exceeds u
// times the total. params: device, rows entries; history: device, [rows][history_stride] ids;
// tokens: device, rows entries (-1 where nothing can be drawn, e.g. every logit NaN); host_tokens,
// when set: the same ids written straight to pinned host memory as well (no copy after the kernel).
// `pdl`: launched to start while the kernel writing the logits ends (programmatic dependent launch).
// `greedy_picked`: the rows with greedy_without_penalty are already written (tokens and host_tokens)
// by the kernel that computed the logits; this kernel leaves them alone without waiting for it (so
// `params` must not be written by that kernel).
// Deterministic: fixed-order reductions.
Status sample_tokens(float* logits, int rows, int vocab, const SampleParams* params, const int32_t* history,
                     int history_stride, int32_t* tokens, cudaStream_t stream, int32_t* host_tokens = nullptr,
                     bool pdl = false, bool greedy_picked = false);

}  // namespace fuselm
