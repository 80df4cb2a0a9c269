#pragma once
// How long the chosen scenarios will take, estimated before they start from a short calibration
// on the engine (one prompt, a few batch-1 decode steps), so a run can be planned and held to a
// time budget. An estimate, not a measurement: the result records both.
//
// Decode step of B sequences with L tokens cached each: the slower of
//   its bytes (cost model) at the bandwidth the calibration step achieved, and
//   its FLOPs at the calibration prefill's rate.
// Prefill of n tokens after `start` cached: its FLOPs at the calibration prefill's rate, with the
// attention FLOPs counted kAttentionFlopWeight times: attention prefill runs at about a third of
// the matmul rate (~170 against ~570 TFLOP/s on an H200, docs/kernels/attention.md), and it
// dominates the long depth prefills. The calibration prompt is short, so its rate is the matmul one.
#include <cstdint>
#include <span>
#include <vector>

#include "bench/cost_model.h"
#include "bench/scenarios.h"
#include "runtime/engine.h"

namespace fuselm::bench {

inline constexpr double kAttentionFlopWeight = 3.0;
// Longest calibration prompt, and the decode steps timed after it.
inline constexpr int kCalibrationPrompt = 256;
inline constexpr int kCalibrationSteps = 8;
// Engines are created with room for at least this many tokens so the calibration always fits.
inline constexpr int kCalibrationMinSeqLen = kCalibrationSteps + 8;

struct Calibration {
  int prefill_tokens = 0;
  double prefill_ms = 0;      // that prompt from an empty cache to its first token
  int64_t decode_cached = 0;  // tokens cached before the first timed decode step
  double decode_step_ms = 0;  // median of the batch-1 decode steps after the prompt
};

// Runs a prompt of min(kCalibrationPrompt, max_seq_len - kCalibrationSteps - 1) tokens and
// kCalibrationSteps decode steps, twice; the first pass warms the engine up and is dropped.
// Needs max_seq_len >= kCalibrationMinSeqLen.
Calibration calibrate(Engine& engine, int max_seq_len, int max_prefill_tokens, uint64_t seed);

// Milliseconds of one prefill and one decode step by the model above.
double estimate_prefill_ms(const CostModel& cost, const Calibration& cal, int64_t start, int64_t tokens);
double estimate_step_ms(const CostModel& cost, const Calibration& cal, int batch, int64_t cached_len);

// Seconds each scenario will take with `engines` engines run alike, warm-ups included, in order.
// Serving runs once per engine: the longer of its arrivals and its work (queueing not modelled).
std::vector<ScenarioSeconds> estimate_seconds(std::span<const Scenario> scenarios, const BenchOptions& options,
                                              const CostModel& cost, const Calibration& cal, int engines);

}  // namespace fuselm::bench
