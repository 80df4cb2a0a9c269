// fuselm bench: the benchmark protocol (see bench/README.md). Measures the memory-bandwidth peak
// first, then estimates the run time from a short calibration (held to --time-budget), runs the
// chosen scenarios on one engine, or on two alternately with --compare, and writes a table to
// stdout, and JSON / Markdown on request.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "bench/cost_model.h"
#include "bench/environment.h"
#include "bench/estimate.h"
#include "bench/gpu_info.h"
#include "bench/peak_bandwidth.h"
#include "bench/progress.h"
#include "bench/report.h"
#include "bench/scenarios.h"
#include "cli/command.h"
#include "cli/common.h"
#include "model/loader.h"
#include "core/error.h"
#include "runtime/engine.h"

namespace fuselm::cli {
namespace {

using bench::BenchOptions;

struct BenchArgs {
  std::string model;
#if FUSELM_HAVE_CUDA
  std::string device = "cuda";
#else
  std::string device = "cpu";
#endif
  std::string dtype = "bf16";
  std::string path = execution_path_name(EngineOptions{}.path);
  std::string scenarios = "latency";
  std::string compare;
  std::string json_file;
  std::string markdown_file;
  bool peak_only = false;
  bool no_peak = false;
  std::string peak_bytes;
  int peak_runs = bench::kDefaultPeakRuns;
  int kv_block_size = 16;
  std::string plan_file;
  bool sync_decode = false;
  double kv_fraction = 0;  // 0: the engine default alone, split between two engines when comparing
  double time_budget_s = 0;  // 0: no limit
  bool quiet = false;
  std::string request_rate = "4";  // serving: parsed into options.request_rate ("inf" allowed)
  std::string goodput;             // serving: "ttft:MS,tpot:MS,e2el:MS", parsed into options
  BenchOptions options;
};

// "4G", "512M", "64K" (binary multiples) or a plain byte count.
size_t parse_bytes(const std::string& text) {
  size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    fail("--peak-bytes: expected a byte count like 4G, 512M or 1073741824, got '", text, "'");
  }
  const std::string suffix = text.substr(pos);
  if (suffix.empty()) return value;
  if (suffix == "K" || suffix == "k") return value << 10;
  if (suffix == "M" || suffix == "m") return value << 20;
  if (suffix == "G" || suffix == "g") return value << 30;
  fail("--peak-bytes: unknown suffix '", suffix, "' in '", text, "' (use K, M or G)");
}

bench::BandwidthPeak measure_peak(const BenchArgs& a, DeviceKind device) {
  if (device == DeviceKind::Cuda)
    return bench::measure_cuda_peak(a.peak_bytes.empty() ? bench::kDefaultCudaPeakBytes : parse_bytes(a.peak_bytes),
                                    a.peak_runs);
  return bench::measure_host_peak(a.peak_bytes.empty() ? bench::kDefaultHostPeakBytes : parse_bytes(a.peak_bytes),
                                  a.peak_runs);
}

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary);
  FUSELM_CHECK(out.good(), "cannot open '", path, "' to write the ", what, "; check the folder exists and is writable");
  out << text;
  out.close();
  FUSELM_CHECK(out.good(), "writing the ", what, " to '", path, "' failed (disk full?)");
  std::fprintf(stderr, "wrote %s to %s\n", what, path.c_str());
}

int run_peak_only(const BenchArgs& a, DeviceKind device) {
  const bench::Environment env = bench::collect_environment(device == DeviceKind::Cuda);
  const nlohmann::json env_json = bench::environment_json(env);
  if (env.gpu) std::printf("GPU: %s, %d SMs, memory bus %d bits, datasheet-style %.0f GB/s\n", env.gpu->name.c_str(),
                           env.gpu->sm_count, env.gpu->memory_bus_width_bits, env.gpu->theoretical_gbs());
  const bench::BandwidthPeak peak = measure_peak(a, device);
  const nlohmann::json peak_json = bench::peak_json(peak);
  std::printf("%s\n", bench::render_peak(peak_json).c_str());
  nlohmann::json j = {{"schema", bench::kReportSchema}, {"environment", env_json}, {"peak_bandwidth", peak_json}};
  if (env.gpu) {
    const bench::GpuClocks c = bench::query_gpu_clocks();
    std::printf("clocks right after the measurement: SM %d MHz, memory %d MHz (-1: NVML unavailable)\n", c.sm_mhz,
                c.memory_mhz);
    j["environment"]["gpu"]["clocks_after_peak"] = {{"sm_clock_mhz", c.sm_mhz}, {"memory_clock_mhz", c.memory_mhz}};
  }
  if (!a.json_file.empty()) {
    write_file(a.json_file, j.dump(2) + "\n", "peak bandwidth JSON");
  }
  return 0;
}

std::vector<ExecutionPath> variant_paths(const BenchArgs& a) {
  if (a.compare.empty()) return {parse_execution_path(a.path)};
  std::vector<ExecutionPath> paths;
  std::stringstream in(a.compare);
  std::string item;
  while (std::getline(in, item, ',')) paths.push_back(parse_execution_path(item));
  FUSELM_CHECK(paths.size() == 2 && paths[0] != paths[1], "--compare takes two different paths, e.g. "
               "--compare baseline,fused (speedups are the second over the first); got '", a.compare, "'");
  return paths;
}

int run_bench(const BenchArgs& a) {
  const auto command_start = std::chrono::steady_clock::now();
  const DeviceKind device = parse_device(a.device);
  if (a.peak_only) return run_peak_only(a, device);
  FUSELM_CHECK(!a.model.empty(), "fuselm bench needs a model: -m PATH or -m 'synthetic:llama-3.1-8b?vocab=32000' "
               "(or --peak to measure memory bandwidth alone)");
  const DType dtype = parse_dtype(a.dtype);
  FUSELM_CHECK(dtype == DType::BF16 || dtype == DType::F16, "--dtype must be bf16 or fp16, got '", a.dtype, "'");
  const std::vector<bench::Scenario> scenarios = bench::parse_scenarios(a.scenarios);
  a.options.validate(scenarios);
  const std::vector<ExecutionPath> paths = variant_paths(a);

  bench::RunInfo info;
  info.environment = bench::collect_environment(device == DeviceKind::Cuda);
  // The peak is measured before any engine exists, while the whole memory is free and idle.
  bench::GpuClocks clocks_after_peak;
  if (!a.no_peak) {
    if (!a.quiet) std::fprintf(stderr, "measuring peak memory bandwidth...\n");
    info.peak = measure_peak(a, device);
    if (info.environment.gpu) clocks_after_peak = bench::query_gpu_clocks();  // clocks under load, not idle
  }

  LoadOptions load_options;
  load_options.materialize_synthetic = device == DeviceKind::Cpu;  // the CUDA engine generates on the device
  std::unique_ptr<Model> model = load_model(a.model, load_options);

  const bench::EngineNeeds needs = bench::engine_needs(scenarios, a.options);
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<Engine*> engine_ptrs;
  std::vector<std::string> names;
  for (size_t i = 0; i < paths.size(); ++i) {
    EngineOptions eo;
    eo.device = device;
    eo.dtype = dtype;
    eo.path = paths[i];
    eo.max_batch = needs.max_batch;
    eo.max_seq_len = needs.max_seq_len;
    eo.max_prefill_tokens = needs.max_prefill_tokens;
    eo.kv_block_size = a.kv_block_size;
    eo.plan_file = a.plan_file;
    eo.pipeline_decode = !a.sync_decode;
    if (a.kv_fraction > 0) {
      eo.kv_memory_fraction = a.kv_fraction;
    } else if (paths.size() == 2) {
      // Each engine takes a share of what is free when it starts: about equal halves.
      eo.kv_memory_fraction = i == 0 ? 0.45 : 0.8;
    }
    engines.push_back(make_engine(*model, eo));
    engine_ptrs.push_back(engines.back().get());
    names.push_back(execution_path_name(paths[i]));
  }

  // The bytes each step must move, in the dtypes the engine keeps: bf16/fp16 on the GPU; on the
  // CPU the weights as stored and fp32 KV cache and activations.
  const ModelConfig& config = model->config;
  bench::CostModel cost =
      device == DeviceKind::Cuda
          ? bench::make_cost_model(config, dtype, dtype, dtype)
          : bench::make_cost_model(config, model->weights.layers.at(0).wq.dtype, DType::F32, DType::F32);

  // The time estimate, before anything long starts: a budget that cannot be met fails here.
  bench::RunTiming timing;
  timing.budget_s = a.time_budget_s;
  timing.calibration = bench::calibrate(*engines[0], needs.max_seq_len, needs.max_prefill_tokens, a.options.seed);
  timing.estimated = bench::estimate_seconds(scenarios, a.options, cost, timing.calibration,
                                             static_cast<int>(engines.size()));
  double estimated_total = 0;
  for (const auto& e : timing.estimated) estimated_total += e.seconds;
  if (!a.quiet)
    std::fprintf(stderr,
                 "estimated time: %s (from a %d-token prefill in %.2f ms and a batch-1 decode step of %.3f ms)\n",
                 bench::render_seconds(timing.estimated).c_str(), timing.calibration.prefill_tokens,
                 timing.calibration.prefill_ms, timing.calibration.decode_step_ms);
  FUSELM_CHECK(a.time_budget_s <= 0 || estimated_total <= a.time_budget_s, "the scenarios are estimated to take ",
               static_cast<int>(estimated_total + 0.5), " s, over --time-budget ", a.time_budget_s, " s (",
               bench::render_seconds(timing.estimated), "). HINT: lower --reps or --warmup, drop the largest "
               "configurations (--depths, --batches, --prefill-lens, --stability-batches), send serving fewer "
               "--num-prompts or a higher --request-rate, or raise --time-budget");

  bench::Progress progress(!a.quiet);
  std::vector<bench::VariantResults> results =
      bench::run_scenarios(engine_ptrs, names, scenarios, a.options, &progress, &timing.measured);
  if (!a.quiet) std::fprintf(stderr, "took: %s\n", bench::render_seconds(timing.measured).c_str());

  info.model_spec = a.model;
  info.model_format = model_format_name(model->format);
  info.config = config;
  info.device = device_name(device);
  info.dtype = device == DeviceKind::Cuda ? std::string(dtype_name(dtype)) : "f32";  // the CPU computes in fp32
  info.options = a.options;
  info.scenarios = scenarios;
  timing.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - command_start).count();
  info.timing = timing;
  std::vector<bench::VariantReport> variants;
  for (size_t i = 0; i < engines.size(); ++i)
    variants.push_back({names[i], engines[i]->description(), cost, std::move(results[i])});
  nlohmann::json report = bench::report_json(info, variants);
  if (info.environment.gpu) {
    auto clocks_json = [](const bench::GpuClocks& c) {
      auto or_null = [](int v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
      return nlohmann::json{{"sm_clock_mhz", or_null(c.sm_mhz)}, {"memory_clock_mhz", or_null(c.memory_mhz)}};
    };
    report["environment"]["gpu"]["clocks_after_peak"] = clocks_json(clocks_after_peak);
    report["environment"]["gpu"]["clocks_after_run"] = clocks_json(bench::query_gpu_clocks());
  }

  std::fputs(bench::render_table(report).c_str(), stdout);
  std::fflush(stdout);
  if (!a.json_file.empty()) write_file(a.json_file, report.dump(2) + "\n", "JSON results");
  if (!a.markdown_file.empty()) write_file(a.markdown_file, bench::render_markdown(report), "Markdown results");
  return 0;
}

std::function<int()> setup_bench(CLI::App& sub) {
  auto a = std::make_shared<BenchArgs>();
  BenchOptions& o = a->options;
  sub.add_option("-m,--model", a->model, "model: HF folder, .gguf, llama2.c .bin or synthetic:PRESET?key=value");
  sub.add_option("--device", a->device, "cuda | cpu")->capture_default_str();
  sub.add_option("--dtype", a->dtype, "GPU compute/storage dtype: bf16 | fp16")->capture_default_str();
  sub.add_option("--path", a->path, "execution path: fused | baseline")->capture_default_str();
  sub.add_option("--scenario", a->scenarios,
                 "comma list of latency, throughput, prefill, depth, stability, serving, or all (every one but "
                 "serving, which lasts as long as its arrivals: add it by name)")
      ->capture_default_str();
  sub.add_option("--compare", a->compare, "run two paths alternately and report speedups, e.g. baseline,fused");
  sub.add_flag("--sync-decode", a->sync_decode,
               "fused path: finish each decode step before preparing the next (by default the next step is queued "
               "behind it and takes its sampled tokens on the device)");
  sub.add_option("--reps", o.reps, "timed repetitions of every configuration")->capture_default_str();
  sub.add_option("--warmup", o.warmup, "untimed repetitions before them")->capture_default_str();
  sub.add_option("--prompt-len", o.prompt_len, "latency: prompt tokens")->capture_default_str();
  sub.add_option("--gen-len", o.gen_len, "latency: tokens generated")->capture_default_str();
  sub.add_option("--batches", o.batches, "throughput: batch sizes")->delimiter(',')->capture_default_str();
  sub.add_option("--batch-prompt-len", o.batch_prompt_len, "throughput: prompt tokens per sequence")
      ->capture_default_str();
  sub.add_option("--batch-gen-len", o.batch_gen_len, "throughput: tokens generated per sequence")
      ->capture_default_str();
  sub.add_option("--prefill-lens", o.prefill_lens, "prefill: prompt lengths")->delimiter(',')->capture_default_str();
  sub.add_option("--depths", o.depths, "depth: KV depths to decode at")->delimiter(',')->capture_default_str();
  sub.add_option("--depth-gen-len", o.depth_gen_len, "depth: decode steps timed at each depth")
      ->capture_default_str();
  sub.add_option("--stability-gen-len", o.stability_gen_len,
                 "stability: tokens generated at batch 1 (after --prompt-len) for the ITL spread")
      ->capture_default_str();
  sub.add_option("--stability-batches", o.stability_batches,
                 "stability: batch sizes for the decode-step spread (after --batch-prompt-len)")
      ->delimiter(',')
      ->capture_default_str();
  sub.add_option("--stability-steps", o.stability_steps, "stability: decode steps timed at each of those batches")
      ->capture_default_str();
  sub.add_option("--request-rate", a->request_rate,
                 "serving: requests per second, arriving as a Poisson process; inf = all at once")
      ->capture_default_str();
  sub.add_option("--num-prompts", o.num_prompts, "serving: requests in the run")->capture_default_str();
  sub.add_option("--serving-input-len", o.serving_input_len, "serving: random prompt tokens per request")
      ->capture_default_str();
  sub.add_option("--serving-output-len", o.serving_output_len, "serving: tokens generated per request (EOS ignored)")
      ->capture_default_str();
  sub.add_option("--serving-max-batch", o.serving_max_batch, "serving: most requests running at once")
      ->capture_default_str();
  sub.add_option("--goodput", a->goodput,
                 "serving: SLOs in ms a request must meet to count for goodput, e.g. ttft:500,tpot:50 (also e2el)");
  sub.add_option("--time-budget", a->time_budget_s,
                 "seconds the scenarios may take; fails before running when the estimate is over (0: no limit)")
      ->capture_default_str();
  sub.add_option("--max-prefill-tokens", o.max_prefill_tokens,
                 "most tokens per forward call when prefilling a batch or a depth; serving: tokens per step")
      ->capture_default_str();
  sub.add_option("--seed", o.seed, "seed of the pseudo-random prompt token ids")->capture_default_str();
  sub.add_option("--json", a->json_file, "write every sample, the environment and the metrics as JSON");
  sub.add_option("--markdown", a->markdown_file, "write the tables as Markdown");
  sub.add_flag("--peak", a->peak_only, "measure the memory-bandwidth peak (read kernel and copy) and exit");
  sub.add_flag("--no-peak", a->no_peak, "skip the peak measurement (utilization is then not reported)");
  sub.add_option("--peak-bytes", a->peak_bytes, "buffer for the peak measurement, e.g. 4G (GPU) or 1G (CPU)");
  sub.add_option("--peak-runs", a->peak_runs, "timed runs of the peak measurement (the median is reported)")
      ->capture_default_str();
  sub.add_option("--kv-block-size", a->kv_block_size, "GPU: tokens per paged KV block")->capture_default_str();
  sub.add_option("--plan", a->plan_file, "GPU: kernel plan file (made by fuselm tune); default: the rule table");
  sub.add_option("--kv-fraction", a->kv_fraction,
                 "share of free memory each engine gives its KV cache (default: the engine's; split when comparing)");
  sub.add_flag("-q,--quiet", a->quiet, "no progress line on stderr");
  return [a] {
    a->options.request_rate = bench::parse_request_rate(a->request_rate);
    bench::parse_goodput(a->goodput, a->options);
    return run_bench(*a);
  };
}

FUSELM_COMMAND("bench",
               "benchmark latency, throughput, prefill, decode at depth, stability and serving; JSON/Markdown output",
               setup_bench);

}  // namespace
}  // namespace fuselm::cli
