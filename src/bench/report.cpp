#include "bench/report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "bench/stats.h"
#include "core/dtype.h"
#include "core/error.h"

namespace fuselm::bench {

namespace {

using json = nlohmann::json;

json summary_json(const Summary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"stddev", s.stddev}, {"min", s.min},
          {"p50", s.p50},     {"p90", s.p90},   {"p99", s.p99},       {"max", s.max}};
}

StepBytes scaled(StepBytes b, int64_t k) {
  b.weights *= k;
  b.kv_read *= k;
  b.kv_write *= k;
  b.activations *= k;
  return b;
}

// Bytes of `steps` consecutive decode steps of `batch` sequences starting at `first_cached`.
StepBytes decode_bytes(const CostModel& cost, int batch, int64_t first_cached, int steps) {
  StepBytes total;
  for (int j = 0; j < steps; ++j) total += decode_step_bytes(cost, batch, first_cached + j);
  return total;
}

// Achieved bandwidth over a set of timed decode steps: all their bytes over all their time.
json bandwidth_json(const StepBytes& bytes, int64_t steps, double total_ms, double peak_gbs) {
  const double achieved = gb_per_s(static_cast<double>(bytes.total()), total_ms);
  const double n = static_cast<double>(steps);
  json per_step = {{"weights", bytes.weights / n},
                   {"kv_read", bytes.kv_read / n},
                   {"kv_write", bytes.kv_write / n},
                   {"activations", bytes.activations / n},
                   {"total", bytes.total() / n}};
  return {{"achieved_gbs", achieved},
          {"peak_gbs", peak_gbs > 0 ? json(peak_gbs) : json(nullptr)},
          {"utilization", peak_gbs > 0 ? json(achieved / peak_gbs) : json(nullptr)},
          {"bytes_per_step_mean", per_step},
          {"steps", steps},
          {"seconds", total_ms * 1e-3}};
}

double sum(std::span<const double> xs) {
  double s = 0;
  for (double x : xs) s += x;
  return s;
}

json latency_json(const LatencyResult& r, const CostModel& cost, double peak_gbs) {
  FUSELM_CHECK(!r.reps.empty(), "latency scenario has no timed repetitions");
  std::vector<double> ttft, e2e, tpot, tok_s, itl_all;
  json samples = json::array();
  double decode_ms = 0;
  for (const LatencyRep& rep : r.reps) {
    const double rep_decode_ms = sum(rep.itl_ms);
    const double rep_tpot = rep_decode_ms / static_cast<double>(rep.itl_ms.size());
    ttft.push_back(rep.ttft_ms);
    e2e.push_back(rep.e2e_ms);
    tpot.push_back(rep_tpot);
    tok_s.push_back(1000.0 / rep_tpot);
    itl_all.insert(itl_all.end(), rep.itl_ms.begin(), rep.itl_ms.end());
    decode_ms += rep_decode_ms;
    samples.push_back({{"ttft_ms", rep.ttft_ms},
                       {"e2e_ms", rep.e2e_ms},
                       {"tpot_ms", rep_tpot},
                       {"decode_tok_s", 1000.0 / rep_tpot},
                       {"itl_ms", rep.itl_ms}});
  }
  const Summary itl = summarize(itl_all);
  const int steps = r.gen_len - 1;
  const int64_t reps = static_cast<int64_t>(r.reps.size());
  return {{"batch", 1},
          {"prompt_len", r.prompt_len},
          {"gen_len", r.gen_len},
          {"reps", reps},
          {"ttft_ms", median(ttft)},
          {"ttft", summary_json(summarize(ttft))},
          {"tpot_ms", median(tpot)},
          {"tpot", summary_json(summarize(tpot))},
          {"itl_ms", summary_json(itl)},
          {"jitter", {{"p99_over_p50", itl.jitter_ratio()}, {"stddev_ms", itl.stddev}}},
          {"decode_tok_s", median(tok_s)},
          {"e2e_ms", median(e2e)},
          {"e2e", summary_json(summarize(e2e))},
          {"bandwidth", bandwidth_json(scaled(decode_bytes(cost, 1, r.prompt_len, steps), reps), steps * reps,
                                       decode_ms, peak_gbs)},
          {"samples", samples}};
}

json throughput_json(const ThroughputResult& r, const CostModel& cost, double peak_gbs) {
  FUSELM_CHECK(!r.reps.empty(), "throughput batch ", r.batch, " has no timed repetitions");
  std::vector<double> out_tok_s, total_tok_s, decode_tok_s, steps_all, wall, prefill;
  json samples = json::array();
  double decode_ms = 0;
  for (const ThroughputRep& rep : r.reps) {
    const double wall_s = rep.wall_ms * 1e-3;
    const double rep_decode_ms = sum(rep.step_ms);
    const double out = static_cast<double>(r.batch) * r.gen_len / wall_s;
    const double total = static_cast<double>(r.batch) * (r.prompt_len + r.gen_len) / wall_s;
    const double decode = static_cast<double>(r.batch) * static_cast<double>(rep.step_ms.size()) / (rep_decode_ms * 1e-3);
    out_tok_s.push_back(out);
    total_tok_s.push_back(total);
    decode_tok_s.push_back(decode);
    wall.push_back(rep.wall_ms);
    prefill.push_back(rep.prefill_ms);
    steps_all.insert(steps_all.end(), rep.step_ms.begin(), rep.step_ms.end());
    decode_ms += rep_decode_ms;
    samples.push_back({{"wall_ms", rep.wall_ms},
                       {"prefill_ms", rep.prefill_ms},
                       {"output_tok_s", out},
                       {"total_tok_s", total},
                       {"decode_tok_s", decode},
                       {"step_ms", rep.step_ms}});
  }
  const Summary steps = summarize(steps_all);
  const int n_steps = r.gen_len - 1;
  const int64_t reps = static_cast<int64_t>(r.reps.size());
  return {{"batch", r.batch},
          {"prompt_len", r.prompt_len},
          {"gen_len", r.gen_len},
          {"reps", reps},
          {"output_tok_s", median(out_tok_s)},
          {"total_tok_s", median(total_tok_s)},
          {"decode_tok_s", median(decode_tok_s)},
          {"step_ms_median", steps.p50},
          {"step_ms", summary_json(steps)},
          {"prefill_ms", median(prefill)},
          {"wall_ms", median(wall)},
          {"bandwidth", bandwidth_json(scaled(decode_bytes(cost, r.batch, r.prompt_len, n_steps), reps),
                                       n_steps * reps, decode_ms, peak_gbs)},
          {"samples", samples}};
}

json prefill_json(const PrefillResult& r, const CostModel& cost) {
  FUSELM_CHECK(!r.ms.empty(), "prefill of ", r.tokens, " tokens has no timed repetitions");
  const double flops = prefill_flops(cost, 0, r.tokens, 1);
  json samples = json::array();
  for (double ms : r.ms)
    samples.push_back({{"ms", ms}, {"tok_s", r.tokens / (ms * 1e-3)}, {"tflops", flops / (ms * 1e-3) / 1e12}});
  const double med = median(r.ms);
  return {{"tokens", r.tokens},
          {"reps", r.ms.size()},
          {"ms", med},
          {"ms_summary", summary_json(summarize(r.ms))},
          {"tok_s", r.tokens / (med * 1e-3)},
          {"flops", flops},
          {"tflops", flops / (med * 1e-3) / 1e12},
          {"samples", samples}};
}

json depth_json(const DepthResult& r, const CostModel& cost, double peak_gbs) {
  FUSELM_CHECK(!r.reps.empty(), "depth ", r.depth, " has no timed repetitions");
  std::vector<double> tok_s, steps_all;
  json samples = json::array();
  double decode_ms = 0;
  for (const DepthRep& rep : r.reps) {
    const double ms = sum(rep.step_ms);
    const double rate = static_cast<double>(rep.step_ms.size()) / (ms * 1e-3);
    tok_s.push_back(rate);
    steps_all.insert(steps_all.end(), rep.step_ms.begin(), rep.step_ms.end());
    decode_ms += ms;
    samples.push_back({{"decode_tok_s", rate}, {"step_ms", rep.step_ms}});
  }
  const Summary steps = summarize(steps_all);
  const int64_t reps = static_cast<int64_t>(r.reps.size());
  return {{"depth", r.depth},
          {"gen_len", r.gen_len},
          {"reps", reps},
          {"decode_tok_s", median(tok_s)},
          {"step_ms_median", steps.p50},
          {"step_ms", summary_json(steps)},
          {"bandwidth", bandwidth_json(scaled(decode_bytes(cost, 1, r.depth, r.gen_len), reps), r.gen_len * reps,
                                       decode_ms, peak_gbs)},
          {"samples", samples}};
}

// Spread of step times pooled over reps, plus the steady part taken out: each rep's least-squares
// slope (steps grow slower as the KV cache grows) and the stddev of what is left around it.
json spread_json(const std::vector<std::vector<double>>& reps_ms, const char* samples_key) {
  std::vector<double> pooled, residuals, slopes;
  for (const auto& ms : reps_ms) {
    pooled.insert(pooled.end(), ms.begin(), ms.end());
    const Trend trend = linear_trend(ms);
    slopes.push_back(trend.slope);
    const std::vector<double> rest = detrended(ms, trend);
    residuals.insert(residuals.end(), rest.begin(), rest.end());
  }
  const Summary s = summarize(pooled);
  return {{samples_key, summary_json(s)},
          {"p99_over_p50", s.jitter_ratio()},
          {"stddev_ms", s.stddev},
          {"max_ms", s.max},
          {"trend_ms_per_1k_steps", 1000.0 * median(slopes)},
          {"detrended_stddev_ms", sample_stddev(residuals)}};
}

json stability_json(const StabilityResult& r) {
  FUSELM_CHECK(!r.itl.reps.empty(), "stability scenario has no timed repetitions");
  std::vector<std::vector<double>> itl_reps;
  std::vector<double> tok_s;
  json itl_samples = json::array();
  for (const LatencyRep& rep : r.itl.reps) {
    const double rate = 1000.0 * static_cast<double>(rep.itl_ms.size()) / sum(rep.itl_ms);
    itl_reps.push_back(rep.itl_ms);
    tok_s.push_back(rate);
    itl_samples.push_back({{"ttft_ms", rep.ttft_ms}, {"decode_tok_s", rate}, {"itl_ms", rep.itl_ms}});
  }
  json itl = {{"batch", 1},
              {"prompt_len", r.itl.prompt_len},
              {"gen_len", r.itl.gen_len},
              {"reps", r.itl.reps.size()},
              {"decode_tok_s", median(tok_s)}};
  itl.update(spread_json(itl_reps, "itl_ms"));
  itl["samples"] = itl_samples;

  json steps = json::array();
  for (const ThroughputResult& t : r.steps) {
    FUSELM_CHECK(!t.reps.empty(), "stability batch ", t.batch, " has no timed repetitions");
    std::vector<std::vector<double>> step_reps;
    std::vector<double> rates;
    json samples = json::array();
    for (const ThroughputRep& rep : t.reps) {
      const double rate = 1000.0 * t.batch * static_cast<double>(rep.step_ms.size()) / sum(rep.step_ms);
      step_reps.push_back(rep.step_ms);
      rates.push_back(rate);
      samples.push_back({{"prefill_ms", rep.prefill_ms}, {"decode_tok_s", rate}, {"step_ms", rep.step_ms}});
    }
    json b = {{"batch", t.batch},
              {"prompt_len", t.prompt_len},
              {"steps", t.gen_len - 1},
              {"reps", t.reps.size()},
              {"decode_tok_s", median(rates)}};
    b.update(spread_json(step_reps, "step_ms"));
    b["samples"] = samples;
    steps.push_back(b);
  }
  return {{"itl", itl}, {"steps", steps}};
}

// JSON has no infinity: an infinite request rate ("all at once") is written as "inf".
json rate_json(double rate) { return std::isinf(rate) ? json("inf") : json(rate); }

json summary_or_null(const std::vector<double>& samples) {
  return samples.empty() ? json(nullptr) : summary_json(summarize(samples));
}

// The metrics of vLLM's benchmark_serving over one run: throughputs over the run's duration,
// TTFT / TPOT / ITL / E2E distributions, and goodput against the SLOs.
json serving_json(const ServingResult& r) {
  FUSELM_CHECK(!r.requests.empty() && r.duration_s > 0, "serving scenario has no completed requests");
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t input_tokens = 0, output_tokens = 0, good = 0;
  json samples = json::array();
  for (const ServingRequest& q : r.requests) {
    input_tokens += q.prompt_tokens;
    output_tokens += q.output_tokens;
    ttft.push_back(q.ttft_ms);
    e2e.push_back(q.e2e_ms);
    itl.insert(itl.end(), q.itl_ms.begin(), q.itl_ms.end());
    // TPOT excludes the first token; a request with one output token has none (0 for its SLO check).
    const double request_tpot = q.output_tokens > 1 ? (q.e2e_ms - q.ttft_ms) / (q.output_tokens - 1) : 0.0;
    if (q.output_tokens > 1) tpot.push_back(request_tpot);
    const bool meets = (r.goodput_ttft_ms <= 0 || q.ttft_ms <= r.goodput_ttft_ms) &&
                       (r.goodput_tpot_ms <= 0 || request_tpot <= r.goodput_tpot_ms) &&
                       (r.goodput_e2el_ms <= 0 || q.e2e_ms <= r.goodput_e2el_ms);
    good += meets ? 1 : 0;
    samples.push_back({{"arrival_s", q.arrival_s},
                       {"prompt_tokens", q.prompt_tokens},
                       {"output_tokens", q.output_tokens},
                       {"ttft_ms", q.ttft_ms},
                       {"tpot_ms", q.output_tokens > 1 ? json(request_tpot) : json(nullptr)},
                       {"e2e_ms", q.e2e_ms},
                       {"itl_ms", q.itl_ms}});
  }
  const double seconds = r.duration_s;
  const bool has_slo = r.goodput_ttft_ms > 0 || r.goodput_tpot_ms > 0 || r.goodput_e2el_ms > 0;
  auto slo = [](double ms) { return ms > 0 ? json(ms) : json(nullptr); };
  json goodput = has_slo ? json{{"slo", {{"ttft_ms", slo(r.goodput_ttft_ms)},
                                         {"tpot_ms", slo(r.goodput_tpot_ms)},
                                         {"e2el_ms", slo(r.goodput_e2el_ms)}}},
                                {"good_requests", good},
                                {"requests_per_s", static_cast<double>(good) / seconds}}
                         : json(nullptr);
  return {{"request_rate", rate_json(r.request_rate)},
          {"num_prompts", r.num_prompts},
          {"input_len", r.input_len},
          {"output_len", r.output_len},
          {"scheduler", {{"max_sequences", r.limits.max_sequences},
                         {"max_step_tokens", r.limits.max_step_tokens},
                         {"kv_capacity_tokens", r.limits.kv_capacity_tokens},
                         {"kv_block_size", r.limits.kv_block_size},
                         {"max_sequence_tokens", r.limits.max_sequence_tokens}}},
          {"completed", r.requests.size()},
          {"steps", r.steps},
          {"duration_s", seconds},
          {"total_input_tokens", input_tokens},
          {"total_output_tokens", output_tokens},
          {"request_throughput", static_cast<double>(r.requests.size()) / seconds},
          {"output_throughput", static_cast<double>(output_tokens) / seconds},
          {"total_token_throughput", static_cast<double>(input_tokens + output_tokens) / seconds},
          {"goodput", goodput},
          {"ttft_ms", summary_json(summarize(ttft))},
          {"tpot_ms", summary_or_null(tpot)},
          {"itl_ms", summary_or_null(itl)},
          {"e2e_ms", summary_json(summarize(e2e))},
          {"samples", samples}};
}

// Ratios of one metric pair by pair, and their median.
json pair_ratios(const json& first_samples, const json& second_samples, const char* key, bool higher_is_better) {
  json pairs = json::array();
  std::vector<double> ratios;
  const size_t n = std::min(first_samples.size(), second_samples.size());
  for (size_t i = 0; i < n; ++i) {
    const double a = first_samples[i].at(key).get<double>(), b = second_samples[i].at(key).get<double>();
    const double ratio = higher_is_better ? b / a : a / b;
    ratios.push_back(ratio);
    pairs.push_back({{"first", a}, {"second", b}, {"speedup", ratio}});
  }
  FUSELM_CHECK(!ratios.empty(), "compare: no repetition pairs for ", key);
  return {{"metric", key}, {"speedup", median(ratios)}, {"pairs", pairs}};
}

std::string dtype_label(DType t) { return std::string(dtype_name(t)); }

}  // namespace

json environment_json(const Environment& env) {
  json j = {{"commit", env.commit},
            {"command_line", env.command_line},
            {"date", env.date_utc},
            {"compiler", env.compiler},
            {"optimized_build", env.optimized},
            {"host_cpu", env.host_cpu},
            {"host_threads", env.host_threads}};
  if (env.gpu) {
    const GpuInfo& g = *env.gpu;
    auto or_null = [](int v) { return v >= 0 ? json(v) : json(nullptr); };
    j["gpu"] = {{"name", g.name},
                {"pci_bus_id", g.pci_bus_id},
                {"compute_capability", str_cat(g.compute_capability_major, ".", g.compute_capability_minor)},
                {"sm_count", g.sm_count},
                {"total_memory_bytes", g.total_memory_bytes},
                {"memory_bus_width_bits", g.memory_bus_width_bits},
                {"sm_clock_max_mhz", g.sm_clock_max_mhz},
                {"memory_clock_max_mhz", g.memory_clock_max_mhz},
                {"sm_clock_mhz", or_null(g.sm_clock_mhz)},
                {"memory_clock_mhz", or_null(g.memory_clock_mhz)},
                {"theoretical_bandwidth_gbs", g.theoretical_gbs()},
                {"driver_version", g.driver_version},
                {"cuda_driver_version", g.cuda_driver_version},
                {"cuda_runtime_version", g.cuda_runtime_version}};
  } else {
    j["gpu"] = nullptr;
  }
  return j;
}

json peak_json(const BandwidthPeak& p) {
  return {{"device", p.device},
          {"read_gbs", p.read_gbs},
          {"read_bytes", p.read_bytes},
          {"read_ms", p.read_ms},
          {"read_method", p.read_method},
          {"copy_gbs", p.copy_gbs},
          {"copy_bytes", p.copy_bytes},
          {"copy_ms", p.copy_ms},
          {"copy_method", p.copy_method},
          {"copy_kernel_gbs", p.copy_kernel_gbs > 0 ? json(p.copy_kernel_gbs) : json(nullptr)},
          {"copy_kernel_ms", p.copy_kernel_ms},
          {"copy_kernel_method", p.copy_kernel_method},
          {"copy_kernel_vs_memcpy", p.copy_kernel_vs_memcpy() > 0 ? json(p.copy_kernel_vs_memcpy()) : json(nullptr)},
          {"threads", p.threads}};
}

json timing_json(const RunTiming& t) {
  auto total = [](std::span<const ScenarioSeconds> xs) {
    double sum = 0;
    for (const auto& x : xs) sum += x.seconds;
    return sum;
  };
  json scenarios = json::object();
  for (const auto& e : t.estimated) scenarios[scenario_name(e.scenario)]["estimated_s"] = e.seconds;
  for (const auto& m : t.measured) scenarios[scenario_name(m.scenario)]["measured_s"] = m.seconds;
  const Calibration& c = t.calibration;
  return {{"calibration",
           {{"prefill_tokens", c.prefill_tokens},
            {"prefill_ms", c.prefill_ms},
            {"decode_cached", c.decode_cached},
            {"decode_step_ms", c.decode_step_ms}}},
          {"scenarios", scenarios},
          {"estimated_s", total(t.estimated)},
          {"measured_s", total(t.measured)},
          {"wall_s", t.wall_s},
          {"budget_s", t.budget_s > 0 ? json(t.budget_s) : json(nullptr)},
          {"definition", "estimated_s: before the run, from the calibration (a prompt and batch-1 decode steps) "
                         "scaled by the byte and FLOP model; measured_s: each scenario's wall time, warm-ups "
                         "included; wall_s: the whole command (peak, model, engines, calibration, scenarios)"}};
}

json cost_model_json(const CostModel& c) {
  return {{"weight_dtype", dtype_label(c.weight_dtype)},
          {"kv_dtype", dtype_label(c.kv_dtype)},
          {"activation_dtype", dtype_label(c.act_dtype)},
          {"parameters", c.parameter_count()},
          {"matmul_params", c.matmul_params()},
          {"lm_head_params", c.lm_head_params()},
          {"weight_bytes", c.weight_bytes()},
          {"decode_weight_bytes", decode_step_bytes(c, 1, 0).weights},
          {"kv_bytes_per_token", c.kv_bytes_per_token()},
          {"activation_bytes_per_token", c.activation_bytes_per_token()}};
}

json variant_json(const VariantReport& v, double peak_gbs) {
  json scenarios = json::object();
  const VariantResults& r = v.results;
  if (r.latency) scenarios["latency"] = latency_json(*r.latency, v.cost, peak_gbs);
  if (!r.throughput.empty()) {
    json arr = json::array();
    for (const auto& t : r.throughput) arr.push_back(throughput_json(t, v.cost, peak_gbs));
    scenarios["throughput"] = arr;
  }
  if (!r.prefill.empty()) {
    json arr = json::array();
    for (const auto& p : r.prefill) arr.push_back(prefill_json(p, v.cost));
    scenarios["prefill"] = arr;
  }
  if (!r.depth.empty()) {
    json arr = json::array();
    for (const auto& d : r.depth) arr.push_back(depth_json(d, v.cost, peak_gbs));
    scenarios["depth"] = arr;
  }
  if (r.stability) scenarios["stability"] = stability_json(*r.stability);
  if (r.serving) scenarios["serving"] = serving_json(*r.serving);
  return {{"path", v.path}, {"engine", v.engine}, {"byte_model", cost_model_json(v.cost)}, {"scenarios", scenarios}};
}

json compare_json(const json& first, const json& second) {
  const json& a = first.at("scenarios");
  const json& b = second.at("scenarios");
  json speedup = {{"first", first.at("path")},
                  {"second", second.at("path")},
                  {"definition",
                   "second over first for rates (tok/s), first over second for times (ms); rep r of each variant ran "
                   "back to back, so each pair is one ratio and every figure is the median of the pair ratios"},
                  {"decode", nullptr}};
  if (a.contains("latency") && b.contains("latency")) {
    const json& la = a["latency"]["samples"];
    const json& lb = b["latency"]["samples"];
    json decode = pair_ratios(la, lb, "decode_tok_s", true);
    speedup["decode"] = decode["speedup"];
    speedup["latency"] = {{"decode_tok_s", decode},
                          {"ttft_ms", pair_ratios(la, lb, "ttft_ms", false)},
                          {"e2e_ms", pair_ratios(la, lb, "e2e_ms", false)}};
  }
  auto per_config = [&](const char* scenario, const char* config_key, const char* metric) {
    json arr = json::array();
    if (!a.contains(scenario) || !b.contains(scenario)) return arr;
    for (size_t i = 0; i < std::min(a[scenario].size(), b[scenario].size()); ++i) {
      json r = pair_ratios(a[scenario][i]["samples"], b[scenario][i]["samples"], metric, true);
      r[config_key] = a[scenario][i][config_key];
      arr.push_back(r);
    }
    return arr;
  };
  if (a.contains("throughput")) speedup["throughput"] = per_config("throughput", "batch", "output_tok_s");
  if (a.contains("prefill")) speedup["prefill"] = per_config("prefill", "tokens", "tok_s");
  if (a.contains("depth")) speedup["depth"] = per_config("depth", "depth", "decode_tok_s");
  json c = json::object();
  c[first.at("path").get<std::string>()] = first;
  c[second.at("path").get<std::string>()] = second;
  c["order"] = {first.at("path"), second.at("path")};
  c["speedup"] = speedup;
  return c;
}

json report_json(const RunInfo& info, std::span<const VariantReport> variants) {
  FUSELM_CHECK(variants.size() == 1 || variants.size() == 2, "a report holds one variant or a pair to compare, got ",
               variants.size());
  const double peak_gbs = info.peak ? info.peak->read_gbs : 0.0;
  const ModelConfig& c = info.config;
  const CostModel& cost = variants.front().cost;
  json j;
  j["schema"] = kReportSchema;
  j["environment"] = environment_json(info.environment);
  j["model"] = {{"spec", info.model_spec},
                {"format", info.model_format},
                {"architecture", c.architecture},
                {"hidden_size", c.hidden_size},
                {"num_layers", c.num_layers},
                {"num_heads", c.num_heads},
                {"num_kv_heads", c.num_kv_heads},
                {"head_dim", c.head_dim},
                {"intermediate_size", c.intermediate_size},
                {"vocab_size", c.vocab_size},
                {"tie_word_embeddings", c.tie_word_embeddings},
                {"parameters", cost.parameter_count()},
                {"weight_bytes", cost.weight_bytes()},
                {"kv_bytes_per_token", cost.kv_bytes_per_token()}};
  j["device"] = info.device;
  j["dtype"] = info.dtype;
  const BenchOptions& o = info.options;
  json scenario_names = json::array();
  for (Scenario s : info.scenarios) scenario_names.push_back(scenario_name(s));
  j["options"] = {{"scenarios", scenario_names},
                  {"reps", o.reps},
                  {"warmup", o.warmup},
                  {"prompt_len", o.prompt_len},
                  {"gen_len", o.gen_len},
                  {"batches", o.batches},
                  {"batch_prompt_len", o.batch_prompt_len},
                  {"batch_gen_len", o.batch_gen_len},
                  {"prefill_lens", o.prefill_lens},
                  {"depths", o.depths},
                  {"depth_gen_len", o.depth_gen_len},
                  {"stability_gen_len", o.stability_gen_len},
                  {"stability_batches", o.stability_batches},
                  {"stability_steps", o.stability_steps},
                  {"max_prefill_tokens", o.max_prefill_tokens},
                  {"request_rate", rate_json(o.request_rate)},
                  {"num_prompts", o.num_prompts},
                  {"serving_input_len", o.serving_input_len},
                  {"serving_output_len", o.serving_output_len},
                  {"serving_max_batch", o.serving_max_batch},
                  {"goodput_ms", {{"ttft", o.goodput_ttft_ms > 0 ? json(o.goodput_ttft_ms) : json(nullptr)},
                                  {"tpot", o.goodput_tpot_ms > 0 ? json(o.goodput_tpot_ms) : json(nullptr)},
                                  {"e2el", o.goodput_e2el_ms > 0 ? json(o.goodput_e2el_ms) : json(nullptr)}}},
                  {"seed", o.seed},
                  {"sampling", "greedy, end-of-sequence ignored"}};
  j["peak_bandwidth"] = info.peak ? peak_json(*info.peak) : json(nullptr);
  if (info.timing) j["timing"] = timing_json(*info.timing);
  j["definitions"] = {
      {"percentiles", "linear interpolation between closest ranks (NumPy 'linear', Hyndman-Fan type 7)"},
      {"stddev", "sample standard deviation (n - 1)"},
      {"ttft_ms", "prompt submitted to first token on the host, prefill included; median over reps"},
      {"itl_ms", "gaps between consecutive output tokens (tokens 2..N) pooled over reps"},
      {"tpot_ms", "(end-to-end - TTFT) / (N - 1) per rep; median over reps"},
      {"jitter", "ITL p99 / p50, and ITL standard deviation"},
      {"stability", "ITL of one long batch-1 generation and decode-step times at larger batches, pooled over "
                    "reps: percentiles, p99/p50, stddev; trend = median over reps of the least-squares slope "
                    "per 1000 steps; detrended_stddev_ms = stddev of the residuals around each rep's line"},
      {"decode_tok_s", "1000 / TPOT per rep; median over reps"},
      {"bandwidth", "bytes a decode step must move (byte_model) summed over the timed steps, over their time; "
                    "utilization = achieved / peak_bandwidth.read_gbs"},
      {"tflops", "2 * matmul params * tokens + 2 * vocab * hidden (last position only) + "
                 "4 * layers * heads * head_dim * sum of causal context, over the median time"},
      {"serving", "requests arrive as a Poisson process (request_rate per second; inf = all at t = 0) and run "
                  "through the continuous-batching scheduler; per request TTFT = arrival to first token, E2E = "
                  "arrival to last token, TPOT = (E2E - TTFT) / (output tokens - 1) over requests with more than "
                  "one, ITL = every gap between consecutive tokens; throughputs and goodput (requests meeting every "
                  "SLO) over duration_s, the first arrival to the last token"},
      {"gb", "1 GB = 1e9 bytes"}};
  std::vector<json> variant_objects;
  for (const auto& v : variants) variant_objects.push_back(variant_json(v, peak_gbs));
  if (variants.size() == 1) {
    j["path"] = variants[0].path;
    j["engine"] = variants[0].engine;
  } else {
    j["path"] = variants[0].path + "," + variants[1].path;
    j["engine"] = variants[1].engine;
    j["compare"] = compare_json(variant_objects[0], variant_objects[1]);
  }
  j["byte_model"] = variant_objects.back()["byte_model"];
  j["scenarios"] = variant_objects.back()["scenarios"];
  return j;
}

// ---------------------------------------------------------------------------------------------
// Rendering: the same tables as aligned text (stdout) or Markdown.

namespace {

std::string fmt(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string num(const json& v, int decimals) { return v.is_number() ? fmt(v.get<double>(), decimals) : "-"; }

// Four significant digits, for quantities whose scale spans tiny test models to large ones.
std::string sig(const json& v) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", v.get<double>());
  return buf;
}

// 7241732096 -> "7.24 B", 14483464192 bytes -> "14.48 GB" (decimal units).
std::string human(double v, const char* unit_suffix) {
  const char* prefixes[] = {"", " k", " M", " B" /* billions: the usual unit for parameters */};
  const char* byte_prefixes[] = {" B", " kB", " MB", " GB"};
  const bool bytes = std::string(unit_suffix) == "bytes";
  int i = 0;
  while (i < 3 && v >= 1000.0) {
    v /= 1000.0;
    ++i;
  }
  return fmt(v, 2) + (bytes ? byte_prefixes[i] : prefixes[i]) + (bytes ? "" : unit_suffix);
}

std::string pct(const json& utilization) {
  return utilization.is_number() ? fmt(100.0 * utilization.get<double>(), 1) + "%" : "-";
}

struct Table {
  std::string title;
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
};

void render(const Table& t, bool markdown, std::ostringstream& out) {
  if (markdown) {
    out << "\n### " << t.title << "\n\n|";
    for (const auto& h : t.headers) out << " " << h << " |";
    out << "\n|";
    for (size_t i = 0; i < t.headers.size(); ++i) out << (i == 0 ? " --- |" : " ---: |");
    out << "\n";
    for (const auto& row : t.rows) {
      out << "|";
      for (const auto& cell : row) out << " " << cell << " |";
      out << "\n";
    }
    return;
  }
  std::vector<size_t> width(t.headers.size());
  for (size_t i = 0; i < t.headers.size(); ++i) width[i] = t.headers[i].size();
  for (const auto& row : t.rows)
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  auto line = [&](const std::vector<std::string>& cells) {
    out << " ";
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string pad(width[i] - cells[i].size(), ' ');
      // First column left-aligned (labels), numbers right-aligned.
      out << "  " << (i == 0 ? cells[i] + pad : pad + cells[i]);
    }
    out << "\n";
  };
  out << "\n" << t.title << "\n";
  line(t.headers);
  for (const auto& row : t.rows) line(row);
}

std::vector<Table> scenario_tables(const json& scenarios, const std::string& suffix) {
  std::vector<Table> tables;
  if (scenarios.contains("latency")) {
    const json& l = scenarios["latency"];
    const json& itl = l["itl_ms"];
    const json& bw = l["bandwidth"];
    Table t{str_cat("latency", suffix, ": batch 1, prompt ", l["prompt_len"].get<int>(), ", generate ",
                    l["gen_len"].get<int>(), ", ", l["reps"].get<int>(), " reps (medians over reps)"),
            {"metric", "value"},
            {}};
    t.rows = {{"TTFT ms", num(l["ttft_ms"], 3)},
              {"TPOT ms", num(l["tpot_ms"], 3)},
              {"ITL p50 / p90 / p99 / max ms",
               num(itl["p50"], 3) + " / " + num(itl["p90"], 3) + " / " + num(itl["p99"], 3) + " / " + num(itl["max"], 3)},
              {"jitter: ITL p99/p50, stddev ms", num(l["jitter"]["p99_over_p50"], 3) + ", " + num(l["jitter"]["stddev_ms"], 3)},
              {"decode tok/s", num(l["decode_tok_s"], 1)},
              {"end-to-end ms", num(l["e2e_ms"], 2)},
              {"decode bandwidth GB/s (of peak)", sig(bw["achieved_gbs"]) + " (" + pct(bw["utilization"]) + ")"}};
    tables.push_back(std::move(t));
  }
  if (scenarios.contains("throughput")) {
    const json& first = scenarios["throughput"][0];
    Table t{str_cat("throughput", suffix, ": prompt ", first["prompt_len"].get<int>(), ", generate ",
                    first["gen_len"].get<int>(), " per sequence (medians over reps)"),
            {"batch", "output tok/s", "total tok/s", "decode tok/s", "step p50 ms", "GB/s", "of peak"},
            {}};
    for (const json& p : scenarios["throughput"])
      t.rows.push_back({std::to_string(p["batch"].get<int>()), num(p["output_tok_s"], 1), num(p["total_tok_s"], 1),
                        num(p["decode_tok_s"], 1), num(p["step_ms_median"], 3), sig(p["bandwidth"]["achieved_gbs"]),
                        pct(p["bandwidth"]["utilization"])});
    tables.push_back(std::move(t));
  }
  if (scenarios.contains("prefill")) {
    Table t{str_cat("prefill", suffix, " (medians over reps; FLOPs counted from the model)"),
            {"tokens", "ms", "tok/s", "TFLOP/s"},
            {}};
    for (const json& p : scenarios["prefill"])
      t.rows.push_back({std::to_string(p["tokens"].get<int>()), num(p["ms"], 3), num(p["tok_s"], 1), sig(p["tflops"])});
    tables.push_back(std::move(t));
  }
  if (scenarios.contains("depth")) {
    const json& first = scenarios["depth"][0];
    Table t{str_cat("depth", suffix, ": ", first["gen_len"].get<int>(), " decode steps after prefilling to the depth"),
            {"depth", "decode tok/s", "step p50 ms", "GB/s", "of peak"},
            {}};
    for (const json& p : scenarios["depth"])
      t.rows.push_back({std::to_string(p["depth"].get<int>()), num(p["decode_tok_s"], 1), num(p["step_ms_median"], 3),
                        sig(p["bandwidth"]["achieved_gbs"]), pct(p["bandwidth"]["utilization"])});
    tables.push_back(std::move(t));
  }
  if (scenarios.contains("stability")) {
    const json& st = scenarios["stability"];
    const json& itl = st["itl"];
    std::string batches;
    for (const json& b : st["steps"]) batches += (batches.empty() ? "" : ", ") + std::to_string(b["batch"].get<int>());
    const int steps = st["steps"].empty() ? 0 : st["steps"][0]["steps"].get<int>();
    const int prompt = st["steps"].empty() ? 0 : st["steps"][0]["prompt_len"].get<int>();
    Table t{str_cat("stability", suffix, ": ITL of ", itl["gen_len"].get<int>(), " tokens at batch 1 (prompt ",
                    itl["prompt_len"].get<int>(), "); ", steps, " decode steps at batch ", batches, " (prompt ", prompt,
                    "); ", itl["reps"].get<int>(), " reps pooled; trend = least-squares slope, detrended sd = "
                    "stddev around it"),
            {"times", "n", "p50 ms", "p90 ms", "p99 ms", "max ms", "p99/p50", "stddev ms", "trend ms/1k steps",
             "detrended sd ms"},
            {}};
    auto row = [&](const std::string& label, const json& x, const char* key) {
      const json& m = x[key];
      t.rows.push_back({label, std::to_string(m["count"].get<int64_t>()), num(m["p50"], 3), num(m["p90"], 3),
                        num(m["p99"], 3), num(m["max"], 3), num(x["p99_over_p50"], 3), num(x["stddev_ms"], 3),
                        num(x["trend_ms_per_1k_steps"], 3), num(x["detrended_stddev_ms"], 3)});
    };
    row("ITL, batch 1", itl, "itl_ms");
    for (const json& b : st["steps"]) row(str_cat("step, batch ", b["batch"].get<int>()), b, "step_ms");
    tables.push_back(std::move(t));
  }
  if (scenarios.contains("serving")) {
    const json& sv = scenarios["serving"];
    const json& rate = sv["request_rate"];
    const std::string rate_text = rate.is_string() ? "all at once" : fmt(rate.get<double>(), 2) + " req/s (Poisson)";
    Table t{str_cat("serving", suffix, ": ", sv["num_prompts"].get<int>(), " requests of ", sv["input_len"].get<int>(),
                    " prompt + ", sv["output_len"].get<int>(), " output tokens, arriving ", rate_text, "; max batch ",
                    sv["scheduler"]["max_sequences"].get<int>(), ", ", sv["scheduler"]["max_step_tokens"].get<int>(),
                    " tokens a step"),
            {"metric", "value"},
            {}};
    t.rows = {{"completed requests", std::to_string(sv["completed"].get<int64_t>())},
              {"duration s", num(sv["duration_s"], 2)},
              {"engine steps", std::to_string(sv["steps"].get<int64_t>())},
              {"request throughput req/s", num(sv["request_throughput"], 3)},
              {"output token throughput tok/s", num(sv["output_throughput"], 1)},
              {"total token throughput tok/s", num(sv["total_token_throughput"], 1)}};
    if (sv["goodput"].is_object()) {
      const json& slo = sv["goodput"]["slo"];
      std::string what;
      for (const char* k : {"ttft_ms", "tpot_ms", "e2el_ms"})
        if (slo[k].is_number()) what += str_cat(what.empty() ? "" : ", ", k, " <= ", num(slo[k], 1));
      t.rows.push_back({"goodput req/s (" + what + ")", num(sv["goodput"]["requests_per_s"], 3)});
    }
    tables.push_back(std::move(t));
    Table lat{str_cat("serving latency", suffix, " (ms; TPOT per request, ITL every gap)"),
              {"metric", "mean", "median", "p90", "p99", "stddev"},
              {}};
    for (const auto& [label, key] : {std::pair{"TTFT", "ttft_ms"}, std::pair{"TPOT", "tpot_ms"},
                                     std::pair{"ITL", "itl_ms"}, std::pair{"E2E", "e2e_ms"}}) {
      const json& m = sv[key];
      if (!m.is_object()) {
        lat.rows.push_back({label, "-", "-", "-", "-", "-"});
        continue;
      }
      lat.rows.push_back({label, num(m["mean"], 3), num(m["p50"], 3), num(m["p90"], 3), num(m["p99"], 3),
                          num(m["stddev"], 3)});
    }
    tables.push_back(std::move(lat));
  }
  return tables;
}

std::vector<Table> compare_tables(const json& compare) {
  std::vector<Table> tables;
  const json& s = compare["speedup"];
  const std::string a = s["first"], b = s["second"];
  if (s.contains("latency")) {
    const json& d = s["latency"]["decode_tok_s"];
    Table t{str_cat("compare latency: decode tok/s pair by pair (", b, " / ", a, ")"), {"rep", a, b, "speedup"}, {}};
    int rep = 1;
    for (const json& p : d["pairs"])
      t.rows.push_back({std::to_string(rep++), num(p["first"], 1), num(p["second"], 1), num(p["speedup"], 3) + "x"});
    t.rows.push_back({"median", "", "", num(d["speedup"], 3) + "x"});
    const json& ttft = s["latency"]["ttft_ms"];
    t.rows.push_back({"TTFT (median pair)", "", "", num(ttft["speedup"], 3) + "x"});
    tables.push_back(std::move(t));
  }
  auto add = [&](const char* scenario, const char* key, const char* label) {
    if (!s.contains(scenario)) return;
    Table t{str_cat("compare ", scenario, ": ", label, " (", b, " / ", a, "; median of pair ratios, min-max)"),
            {key, "speedup", "pairs"},
            {}};
    for (const json& r : s[scenario]) {
      double lo = 1e300, hi = -1e300;
      for (const json& p : r["pairs"]) {
        lo = std::min(lo, p["speedup"].get<double>());
        hi = std::max(hi, p["speedup"].get<double>());
      }
      t.rows.push_back({std::to_string(r[key].get<int>()), num(r["speedup"], 3) + "x", fmt(lo, 3) + "-" + fmt(hi, 3)});
    }
    tables.push_back(std::move(t));
  };
  add("throughput", "batch", "output tok/s");
  add("prefill", "tokens", "tok/s");
  add("depth", "depth", "decode tok/s");
  return tables;
}

std::string gpu_line(const json& gpu) {
  auto mhz = [](const json& v) { return v.is_number() ? std::to_string(v.get<int>()) : std::string("?"); };
  return str_cat(gpu["name"].get<std::string>(), ", ", gpu["sm_count"].get<int>(), " SMs, SM clock ",
                 mhz(gpu["sm_clock_mhz"]), " MHz now / ", gpu["sm_clock_max_mhz"].get<int>(), " max, memory clock ",
                 mhz(gpu["memory_clock_mhz"]), " MHz now / ", gpu["memory_clock_max_mhz"].get<int>(),
                 " max, driver ", gpu["driver_version"].get<std::string>(), " (CUDA ",
                 gpu["cuda_driver_version"].get<int>() / 1000, ".", gpu["cuda_driver_version"].get<int>() % 1000 / 10,
                 "), runtime ", gpu["cuda_runtime_version"].get<int>() / 1000, ".",
                 gpu["cuda_runtime_version"].get<int>() % 1000 / 10);
}

std::string render_report(const json& r, bool markdown) {
  std::ostringstream out;
  const json& env = r["environment"];
  const json& m = r["model"];
  const std::string bullet = markdown ? "- " : "  ";
  if (markdown) out << "## fuselm bench: " << m["spec"].get<std::string>() << "\n\n";
  else out << "fuselm bench: " << m["spec"].get<std::string>() << "\n";
  out << bullet << "model: " << m["num_layers"].get<int>() << " layers, hidden " << m["hidden_size"].get<int>()
      << ", heads " << m["num_heads"].get<int>() << "/" << m["num_kv_heads"].get<int>() << " kv, ffn "
      << m["intermediate_size"].get<int>() << ", vocab " << m["vocab_size"].get<int>() << ", "
      << human(m["parameters"].get<double>(), " params") << ", " << human(m["weight_bytes"].get<double>(), "bytes")
      << " of weights, KV " << m["kv_bytes_per_token"].get<int64_t>() << " bytes/token\n";
  out << bullet << "device " << r["device"].get<std::string>() << ", dtype " << r["dtype"].get<std::string>()
      << ", path " << r["path"].get<std::string>() << "; engine: " << r["engine"].get<std::string>() << "\n";
  if (env["gpu"].is_object()) out << bullet << "GPU: " << gpu_line(env["gpu"]) << "\n";
  out << bullet << "host: " << env["host_cpu"].get<std::string>() << ", " << env["host_threads"].get<int>()
      << " threads" << (env["optimized_build"].get<bool>() ? "" : " (UNOPTIMIZED BUILD: numbers are meaningless)")
      << "\n";
  if (r["peak_bandwidth"].is_object()) out << bullet << render_peak(r["peak_bandwidth"]) << "\n";
  else out << bullet << "peak bandwidth: not measured (utilization not reported)\n";
  out << bullet << "commit " << env["commit"].get<std::string>() << ", " << env["date"].get<std::string>() << "\n";
  out << bullet << "command: " << (markdown ? "`" : "") << env["command_line"].get<std::string>()
      << (markdown ? "`" : "") << "\n";
  if (r.contains("timing")) {
    const json& t = r["timing"];
    std::string per;
    for (const json& name : r["options"]["scenarios"]) {  // in the order they ran
      const json& x = t["scenarios"].value(name.get<std::string>(), json::object());
      per += str_cat(per.empty() ? "" : ", ", name.get<std::string>(), " ", num(x.value("estimated_s", json()), 1),
                     " / ", num(x.value("measured_s", json()), 1));
    }
    out << bullet << "time, estimated / measured s: " << per << "; scenarios " << num(t["estimated_s"], 1) << " / "
        << num(t["measured_s"], 1) << ", whole command " << num(t["wall_s"], 1) << " s\n";
  }

  std::vector<Table> tables;
  if (r.contains("compare")) {
    for (const json& name : r["compare"]["order"]) {
      auto t = scenario_tables(r["compare"][name.get<std::string>()]["scenarios"], " [" + name.get<std::string>() + "]");
      tables.insert(tables.end(), t.begin(), t.end());
    }
    auto t = compare_tables(r["compare"]);
    tables.insert(tables.end(), t.begin(), t.end());
  } else {
    tables = scenario_tables(r["scenarios"], "");
  }
  for (const auto& t : tables) render(t, markdown, out);
  return out.str();
}

}  // namespace

std::string render_peak(const json& p) {
  std::string s = str_cat("peak memory bandwidth (", p["device"].get<std::string>(), "): read ",
                          fmt(p["read_gbs"].get<double>(), 1), " GB/s [", p["read_method"].get<std::string>(), "]");
  if (p["copy_gbs"].get<double>() > 0)
    s += str_cat("; copy ", fmt(p["copy_gbs"].get<double>(), 1), " GB/s [", p["copy_method"].get<std::string>(), "]");
  // Older results have no copy kernel; a CPU result has null.
  if (p.contains("copy_kernel_gbs") && p["copy_kernel_gbs"].is_number())
    s += str_cat("; copy kernel ", fmt(p["copy_kernel_gbs"].get<double>(), 1), " GB/s = ",
                 num(p["copy_kernel_vs_memcpy"], 3), " x the copy above [", p["copy_kernel_method"].get<std::string>(),
                 "]");
  return s;
}

std::string render_seconds(std::span<const ScenarioSeconds> seconds) {
  std::string s;
  double total = 0;
  for (const auto& x : seconds) {
    s += str_cat(s.empty() ? "" : ", ", scenario_name(x.scenario), " ", fmt(x.seconds, 1), " s");
    total += x.seconds;
  }
  return s + str_cat("; total ", fmt(total, 1), " s (", fmt(total / 60.0, 1), " min)");
}

std::string render_table(const json& report) { return render_report(report, false); }
std::string render_markdown(const json& report) { return render_report(report, true); }

}  // namespace fuselm::bench
