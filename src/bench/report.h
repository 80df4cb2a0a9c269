#pragma once
// Benchmark results as JSON (every raw sample, the environment, derived metrics), and the
// readable table and Markdown rendered from that JSON, so all three always agree.
#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/cost_model.h"
#include "bench/environment.h"
#include "bench/estimate.h"
#include "bench/peak_bandwidth.h"
#include "bench/scenarios.h"
#include "model/config.h"

namespace fuselm::bench {

inline constexpr const char* kReportSchema = "fuselm-bench/1";

// How long the run was expected to take and took.
struct RunTiming {
  Calibration calibration;
  std::vector<ScenarioSeconds> estimated;  // before the run, from the calibration
  std::vector<ScenarioSeconds> measured;   // each scenario's wall time, warm-ups included
  double budget_s = 0;                     // --time-budget; 0 = none
  double wall_s = 0;  // the whole command: peak, model, engines, calibration, scenarios
};

struct RunInfo {
  Environment environment;
  std::optional<BandwidthPeak> peak;  // absent when not measured (--no-peak)
  std::string model_spec;
  std::string model_format;
  ModelConfig config;
  std::string device;  // "cuda" | "cpu"
  std::string dtype;   // the engine's compute/storage dtype
  BenchOptions options;
  std::vector<Scenario> scenarios;
  std::optional<RunTiming> timing;
};

struct VariantReport {
  std::string path;    // "baseline" | "fused"
  std::string engine;  // Engine::description()
  CostModel cost;
  VariantResults results;
};

nlohmann::json environment_json(const Environment& env);
nlohmann::json peak_json(const BandwidthPeak& peak);
nlohmann::json timing_json(const RunTiming& timing);
nlohmann::json cost_model_json(const CostModel& cost);
// {"path", "engine", "byte_model", "scenarios": {...}}; peak_gbs <= 0 leaves utilization null.
nlohmann::json variant_json(const VariantReport& variant, double peak_gbs);
// Speedups of `second` over `first` (variant_json objects): pair by pair (rep r of one against
// rep r of the other, which ran back to back) and their median; times as first / second.
nlohmann::json compare_json(const nlohmann::json& first, const nlohmann::json& second);
// The whole result. One variant: its scenarios at the top. Two (--compare): "compare" holds both
// under their path names and the speedups; the top-level scenarios are the second variant's.
nlohmann::json report_json(const RunInfo& info, std::span<const VariantReport> variants);

std::string render_peak(const nlohmann::json& peak);
// "latency 4.1 s, throughput 33.0 s, ..., total 2.1 min" from {scenario, seconds} pairs.
std::string render_seconds(std::span<const ScenarioSeconds> seconds);
std::string render_table(const nlohmann::json& report);
std::string render_markdown(const nlohmann::json& report);

}  // namespace fuselm::bench
