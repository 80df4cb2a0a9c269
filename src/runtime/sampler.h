#pragma once
// Token sampling on the host: greedy, temperature, top-k, top-p, min-p, repetition penalty.
// Each request owns a SamplerState with its own seeded RNG, so the same seed gives the same output
// whatever else runs.
#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"

namespace fuselm {

struct SamplingParams {
  float temperature = 0.8f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  float repetition_penalty = 1.0f;  // 1 = off; applied to tokens seen in the last `penalty_window`
  int penalty_window = 64;
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
  // A token's draw then depends on every earlier token of the window (not only on the logits).
  bool penalised() const { return repetition_penalty != 1.0f; }
};

struct SamplerState {
  explicit SamplerState(const SamplingParams& p) : params(p), rng(p.seed) {}
  SamplingParams params;
  Rng rng;
  std::vector<int32_t> history;  // prompt and generated tokens, for the repetition penalty
};

// Throws Error when a parameter is out of range (top-k < 0, top-p outside (0, 1], min-p outside
// [0, 1], a penalty <= 0, a temperature that is not finite). Every engine checks a request's
// parameters with it before sampling, so all of them refuse the same values with the same words.
void check_sampling_params(const SamplingParams& p);

// Picks the next token from one row of logits (modified in place by penalty/temperature) and
// appends it to the state's history.
int32_t sample_token(std::span<float> logits, SamplerState& state);

}  // namespace fuselm
