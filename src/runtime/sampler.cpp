#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace fuselm {

namespace {

// HF semantics: each distinct token seen in the window is penalised once; a positive logit is
// divided by the penalty and a negative one multiplied, so the token always becomes less likely.
void apply_repetition_penalty(std::span<float> logits, const SamplerState& state) {
  const float penalty = state.params.repetition_penalty;
  if (penalty == 1.0f || state.history.empty()) return;
  FUSELM_CHECK(penalty > 0.0f, "repetition penalty must be positive, got ", penalty);
  const size_t window = state.params.penalty_window > 0 ? static_cast<size_t>(state.params.penalty_window)
                                                        : state.history.size();
  const size_t first = state.history.size() > window ? state.history.size() - window : 0;
  std::vector<int32_t> seen(state.history.begin() + static_cast<std::ptrdiff_t>(first), state.history.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t id : seen) {
    FUSELM_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size(), "sampler history holds token id ", id,
                 ", outside the vocabulary of ", logits.size(), " logits");
    float& l = logits[static_cast<size_t>(id)];
    l = l > 0.0f ? l / penalty : l * penalty;
  }
}

// Lowest id among the largest logits; NaN never wins.
int32_t argmax_lowest_id(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)] || std::isnan(logits[static_cast<size_t>(best)]))
      best = static_cast<int32_t>(i);
  }
  return best;
}

struct Candidate {
  int32_t id;
  float logit;
  float prob = 0.0f;
};

// Descending logit, ties to the lower id, so the candidate order never depends on the sort.
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

}  // namespace

void check_sampling_params(const SamplingParams& p) {
  FUSELM_CHECK(p.top_k >= 0, "top-k must be >= 0 (0 = off), got ", p.top_k);
  FUSELM_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f, "top-p must be in (0, 1] (1 = off), got ", p.top_p);
  FUSELM_CHECK(p.min_p >= 0.0f && p.min_p <= 1.0f, "min-p must be in [0, 1] (0 = off), got ", p.min_p);
  FUSELM_CHECK(p.repetition_penalty > 0.0f, "repetition penalty must be positive (1 = off), got ",
               p.repetition_penalty);
  FUSELM_CHECK(std::isfinite(p.temperature), "temperature must be a finite number, got ", p.temperature);
}

// Order as in HF transformers: repetition penalty, temperature, top-k, top-p, min-p, then a draw.
int32_t sample_token(std::span<float> logits, SamplerState& state) {
  FUSELM_CHECK(!logits.empty(), "sample_token: empty logits row");
  const SamplingParams& p = state.params;
  check_sampling_params(p);
  apply_repetition_penalty(logits, state);

  int32_t chosen;
  if (p.greedy()) {
    chosen = argmax_lowest_id(logits);
  } else {
    std::vector<Candidate> cands;
    cands.reserve(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!std::isnan(logits[i])) cands.push_back({static_cast<int32_t>(i), logits[i] / p.temperature});
    }
    FUSELM_CHECK(!cands.empty(), "sample_token: every logit is NaN");

    const bool need_sorted = p.top_k > 0 || p.top_p < 1.0f;
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < cands.size()) {
      std::partial_sort(cands.begin(), cands.begin() + p.top_k, cands.end(), ranks_before);
      cands.resize(static_cast<size_t>(p.top_k));
    } else if (need_sorted) {
      std::sort(cands.begin(), cands.end(), ranks_before);
    }

    // Softmax over the survivors (in double: the exponent sum over a large vocab).
    float max_logit = -INFINITY;
    for (const Candidate& c : cands) max_logit = std::max(max_logit, c.logit);
    double sum = 0.0;
    for (Candidate& c : cands) {
      // An infinite top logit takes all the mass (inf - inf would be NaN).
      c.prob = std::isinf(max_logit) ? (c.logit == max_logit ? 1.0f : 0.0f) : std::exp(c.logit - max_logit);
      sum += c.prob;
    }
    for (Candidate& c : cands) c.prob = static_cast<float>(c.prob / sum);

    if (p.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (at least one token)
      double cumulative = 0.0;
      size_t keep = 0;
      while (keep < cands.size()) {
        cumulative += cands[keep].prob;
        ++keep;
        if (cumulative >= p.top_p) break;
      }
      cands.resize(keep);
    }
    if (p.min_p > 0.0f) {  // relative to the most likely survivor, so renormalising does not change it
      float max_prob = 0.0f;
      for (const Candidate& c : cands) max_prob = std::max(max_prob, c.prob);
      const float threshold = p.min_p * max_prob;
      std::erase_if(cands, [&](const Candidate& c) { return c.prob < threshold; });
    }

    double total = 0.0;
    for (const Candidate& c : cands) total += c.prob;
    const double u = static_cast<double>(state.rng.next_float()) * total;
    double cumulative = 0.0;
    chosen = cands.back().id;  // rounding can leave u just above the last cumulative sum
    for (const Candidate& c : cands) {
      cumulative += c.prob;
      if (u < cumulative) {
        chosen = c.id;
        break;
      }
    }
  }
  state.history.push_back(chosen);
  return chosen;
}

}  // namespace fuselm
