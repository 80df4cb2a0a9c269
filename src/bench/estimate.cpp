#include "bench/estimate.h"

#include <algorithm>
#include <cmath>

#include "bench/stats.h"
#include "core/error.h"

namespace fuselm::bench {

namespace {

double weighted_prefill_flops(const CostModel& m, int64_t start, int64_t tokens) {
  return prefill_flops(m, start, tokens, 1) + (kAttentionFlopWeight - 1.0) * attention_flops(m, start, tokens);
}

// A timer can read 0 for a tiny model; a floor keeps the rates finite.
double positive_ms(double ms) { return std::max(ms, 1e-6); }

// Milliseconds of `steps` decode steps of `batch` sequences starting at `first_cached` tokens.
double decode_ms(const CostModel& m, const Calibration& cal, int batch, int64_t first_cached, int steps) {
  double ms = 0;
  for (int i = 0; i < steps; ++i) ms += estimate_step_ms(m, cal, batch, first_cached + i);
  return ms;
}

}  // namespace

Calibration calibrate(Engine& engine, int max_seq_len, int max_prefill_tokens, uint64_t seed) {
  FUSELM_CHECK(max_seq_len >= kCalibrationMinSeqLen, "calibration needs room for ", kCalibrationMinSeqLen,
               " tokens, the engine has ", max_seq_len);
  const int prompt_len = std::min(kCalibrationPrompt, max_seq_len - kCalibrationSteps - 1);
  const auto prompt = make_prompt(engine.config().vocab_size, prompt_len, seed, 4'000'000);
  LatencyRep rep;
  for (int pass = 0; pass < 2; ++pass)
    rep = run_latency_once(engine, prompt, kCalibrationSteps + 1, max_prefill_tokens);
  Calibration cal;
  cal.prefill_tokens = prompt_len;
  cal.prefill_ms = rep.ttft_ms;
  cal.decode_cached = prompt_len;
  cal.decode_step_ms = median(rep.itl_ms);
  return cal;
}

double estimate_prefill_ms(const CostModel& m, const Calibration& cal, int64_t start, int64_t tokens) {
  if (tokens <= 0) return 0;
  const double flops_per_ms = weighted_prefill_flops(m, 0, cal.prefill_tokens) / positive_ms(cal.prefill_ms);
  return weighted_prefill_flops(m, start, tokens) / flops_per_ms;
}

double estimate_step_ms(const CostModel& m, const Calibration& cal, int batch, int64_t cached_len) {
  const double bytes_per_ms =
      static_cast<double>(decode_step_bytes(m, 1, cal.decode_cached).total()) / positive_ms(cal.decode_step_ms);
  const double flops_per_ms = weighted_prefill_flops(m, 0, cal.prefill_tokens) / positive_ms(cal.prefill_ms);
  const double by_bytes = static_cast<double>(decode_step_bytes(m, batch, cached_len).total()) / bytes_per_ms;
  const double by_flops = batch * weighted_prefill_flops(m, cached_len, 1) / flops_per_ms;
  return std::max(by_bytes, by_flops);
}

std::vector<ScenarioSeconds> estimate_seconds(std::span<const Scenario> scenarios, const BenchOptions& o,
                                              const CostModel& m, const Calibration& cal, int engines) {
  // Every configuration runs warm-up + reps times on every engine.
  const double runs = static_cast<double>(o.warmup + o.reps) * engines;
  std::vector<ScenarioSeconds> out;
  for (Scenario s : scenarios) {
    double ms = 0;  // one run of every configuration of the scenario
    switch (s) {
      case Scenario::Latency:
        ms = estimate_prefill_ms(m, cal, 0, o.prompt_len) + decode_ms(m, cal, 1, o.prompt_len, o.gen_len - 1);
        break;
      case Scenario::Throughput:
        for (int b : o.batches)
          ms += b * estimate_prefill_ms(m, cal, 0, o.batch_prompt_len) +
                decode_ms(m, cal, b, o.batch_prompt_len, o.batch_gen_len - 1);
        break;
      case Scenario::Prefill:
        for (int len : o.prefill_lens) ms += estimate_prefill_ms(m, cal, 0, len);
        break;
      case Scenario::Depth:
        for (int d : o.depths) ms += estimate_prefill_ms(m, cal, 0, d) + decode_ms(m, cal, 1, d, o.depth_gen_len);
        break;
      case Scenario::Stability:
        ms = estimate_prefill_ms(m, cal, 0, o.prompt_len) + decode_ms(m, cal, 1, o.prompt_len, o.stability_gen_len - 1);
        for (int b : o.stability_batches)
          ms += b * estimate_prefill_ms(m, cal, 0, o.batch_prompt_len) +
                decode_ms(m, cal, b, o.batch_prompt_len, o.stability_steps);
        break;
      case Scenario::Serving: {
        // One run per engine, not repetitions: the longer of the arrivals (plus the last request's
        // own latency) and the work (every prefill, and waves of `batch` requests decoding
        // together), plus the warm-up request.
        const int batch = std::min(o.num_prompts, o.serving_max_batch);
        const int waves = (o.num_prompts + batch - 1) / batch;
        const double prefill = estimate_prefill_ms(m, cal, 0, o.serving_input_len);
        const double work = o.num_prompts * prefill +
                            waves * decode_ms(m, cal, batch, o.serving_input_len, o.serving_output_len - 1);
        const double arrivals = std::isinf(o.request_rate) ? 0.0 : 1000.0 * o.num_prompts / o.request_rate;
        const double last = prefill + decode_ms(m, cal, 1, o.serving_input_len, o.serving_output_len - 1);
        const double warmup = o.warmup > 0 ? prefill + estimate_step_ms(m, cal, 1, o.serving_input_len) : 0.0;
        out.push_back({s, (std::max(work, arrivals + last) + warmup) * engines * 1e-3});
        continue;
      }
    }
    out.push_back({s, ms * runs * 1e-3});
  }
  return out;
}

}  // namespace fuselm::bench
