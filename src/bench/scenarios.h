#pragma once
// Benchmark scenarios over the Engine interface. Each scenario is a function that runs one
// repetition on one engine and returns raw per-step samples; the driver repeats it after warm-up
// and, when comparing variants, alternates them repetition by repetition in one process.
//
// Timing: a steady clock around Engine calls. Prefill calls forward_sample, which returns the
// sampled tokens on the host once the device has finished the step. Decode loops submit step n + 1
// (Engine::submit_sample, fed step n's tokens on the engine's side) before they wait for step n, as
// a serving loop would; an interval ends when a step's tokens are on the host, so it still covers a
// whole step including sampling (`--sync-decode` runs one step at a time). Prompts are token ids (tokenization is excluded),
// deterministic pseudo-random in [0, vocab); sampling is greedy and end-of-sequence tokens are
// ignored, so every run generates exactly the requested number of tokens.
//
// The serving scenario is the exception to "repeat after warm-up": requests arrive over real time
// (a Poisson process) and go through the continuous-batching scheduler (runtime/batch_runner.h)
// once per engine; its samples are the requests, not repetitions.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/cost_model.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"

namespace fuselm::bench {

class Progress;

enum class Scenario { Latency, Throughput, Prefill, Depth, Stability, Serving };
std::string scenario_name(Scenario s);
// A comma-separated list of latency, throughput, prefill, depth, stability, serving and all (in the
// order given). "all" is every scenario but serving, which runs for as long as its arrivals take.
std::vector<Scenario> parse_scenarios(const std::string& list);

struct BenchOptions {
  int reps = 5;    // timed repetitions of every configuration
  int warmup = 1;  // untimed repetitions before them
  // latency: one sequence
  int prompt_len = 512;
  int gen_len = 128;
  // throughput: a batch sweep at fixed lengths
  std::vector<int> batches = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int batch_prompt_len = 128;
  int batch_gen_len = 64;
  // prefill: one prompt per length
  std::vector<int> prefill_lens = {128, 512, 2048, 8192};
  // depth: decode after prefilling to a KV depth
  std::vector<int> depths = {0, 4096, 16384, 32768};
  int depth_gen_len = 32;
  // stability: ITL spread over a long batch-1 generation (after a prompt of prompt_len), and the
  // spread of decode-step times at a few batch sizes (after prompts of batch_prompt_len)
  int stability_gen_len = 1000;
  std::vector<int> stability_batches = {16, 64};
  int stability_steps = 256;
  // serving: num_prompts requests of serving_input_len random prompt tokens, each generating
  // serving_output_len tokens, arriving as a Poisson process of request_rate per second
  // (infinity: all at once), at most serving_max_batch running at a time (vLLM's max_num_seqs).
  double request_rate = 4.0;
  int num_prompts = 64;
  int serving_input_len = 512;
  int serving_output_len = 128;
  int serving_max_batch = 256;
  // Goodput SLOs in ms (0 = none): a request counts when it meets every one given.
  double goodput_ttft_ms = 0, goodput_tpot_ms = 0, goodput_e2el_ms = 0;
  // Most tokens per forward call when prefilling a batch or a depth (longer prompts are chunked);
  // serving: the scheduler's token budget per step.
  int max_prefill_tokens = 8192;
  uint64_t seed = 0x5eedf00d;

  // Throws Error naming the bad option.
  void validate(std::span<const Scenario> scenarios) const;
};

// What engines must hold for the chosen scenarios (EngineOptions fields).
struct EngineNeeds {
  int max_batch = 1;
  int max_seq_len = 1;
  int max_prefill_tokens = 1;
};
EngineNeeds engine_needs(std::span<const Scenario> scenarios, const BenchOptions& options);

// `len` token ids in [0, vocab), a pure function of (seed, stream).
std::vector<int32_t> make_prompt(int vocab, int len, uint64_t seed, uint64_t stream);

// --request-rate: requests per second, or "inf" (every request at t = 0). Throws Error otherwise.
double parse_request_rate(const std::string& text);
// --goodput "ttft:MS,tpot:MS,e2el:MS" (any subset) into the options' SLOs; throws Error naming the
// bad part.
void parse_goodput(const std::string& text, BenchOptions& options);
// Arrival times in seconds from the start, non-decreasing: exponential gaps of mean 1 / rate (a
// Poisson process), a pure function of (count, rate, seed); all 0 for an infinite rate.
std::vector<double> make_arrival_times(int count, double rate, uint64_t seed);

// ---- raw results: every sample kept ----
struct LatencyRep {
  double ttft_ms = 0;           // prompt in, first token out
  double e2e_ms = 0;            // prompt in, last token out
  std::vector<double> itl_ms;   // gen_len - 1 gaps between consecutive output tokens
};
struct LatencyResult {
  int prompt_len = 0, gen_len = 0;
  std::vector<LatencyRep> reps;
};

struct ThroughputRep {
  double wall_ms = 0;           // first prefill call to last token
  double prefill_ms = 0;        // prefill of every prompt (yields each sequence's first token)
  std::vector<double> step_ms;  // batch_gen_len - 1 decode steps of the whole batch
};
struct ThroughputResult {
  int batch = 0, prompt_len = 0, gen_len = 0;
  std::vector<ThroughputRep> reps;
};

struct PrefillResult {
  int tokens = 0;
  std::vector<double> ms;  // one per repetition: the prompt in, its first token out
};

struct DepthRep {
  std::vector<double> step_ms;  // depth_gen_len single-token steps starting at the depth
};
struct DepthResult {
  int depth = 0, gen_len = 0;
  std::vector<DepthRep> reps;
};

// The latency runner at stability_gen_len tokens, and the throughput runner with
// stability_steps + 1 tokens per sequence (so stability_steps timed decode steps) per batch.
struct StabilityResult {
  LatencyResult itl;
  std::vector<ThroughputResult> steps;
};

// One request of the serving scenario. Times run from its scheduled arrival, so a request that
// arrived while a step was running counts that wait.
struct ServingRequest {
  int prompt_tokens = 0;
  int output_tokens = 0;
  double arrival_s = 0;        // scheduled arrival, from the start of the run
  double ttft_ms = 0;          // arrival to the first generated token on the host
  double e2e_ms = 0;           // arrival to the last token on the host
  std::vector<double> itl_ms;  // gaps between consecutive output tokens (output_tokens - 1)
};
struct ServingResult {
  double request_rate = 0;  // infinity: all at t = 0
  int num_prompts = 0, input_len = 0, output_len = 0;
  SchedulerLimits limits;  // what the scheduler ran with (from the engine and the options)
  double goodput_ttft_ms = 0, goodput_tpot_ms = 0, goodput_e2el_ms = 0;  // the SLOs; 0 = none
  double duration_s = 0;   // start of the run (the first arrival) to the last token
  int64_t steps = 0;       // engine steps run
  std::vector<ServingRequest> requests;  // in arrival order
};

struct VariantResults {
  std::optional<LatencyResult> latency;
  std::vector<ThroughputResult> throughput;
  std::vector<PrefillResult> prefill;
  std::vector<DepthResult> depth;
  std::optional<StabilityResult> stability;
  std::optional<ServingResult> serving;
};

// ---- one repetition on one engine ----
LatencyRep run_latency_once(Engine& engine, std::span<const int32_t> prompt, int gen_len, int max_prefill_tokens);
ThroughputRep run_throughput_once(Engine& engine, std::span<const std::vector<int32_t>> prompts, int gen_len,
                                  int max_prefill_tokens);
double run_prefill_once(Engine& engine, std::span<const int32_t> prompt, int max_prefill_tokens);
// Prefills `context` (untimed; none for depth 0, where `start_token` is fed first), then times
// `gen_len` single-token decode steps.
DepthRep run_depth_once(Engine& engine, std::span<const int32_t> context, int32_t start_token, int gen_len,
                        int max_prefill_tokens);
// Submits prompts[i] at arrival_s[i] seconds after the start (real time; the loop sleeps while
// nothing is running), steps the engine through the scheduler until every request has produced
// output_len tokens, and records each request's times. `on_finished`, when given, is called after
// each request completes. Throws Error when the scheduler rejects a request.
ServingResult run_serving_once(Engine& engine, std::span<const std::vector<int32_t>> prompts,
                               std::span<const double> arrival_s, int output_len, const SchedulerLimits& limits,
                               const std::function<void(int done)>& on_finished = {});

// Seconds one scenario takes over every engine, warm-ups included: measured by run_scenarios
// (wall clock) or estimated before the run (estimate.h).
struct ScenarioSeconds {
  Scenario scenario = Scenario::Latency;
  double seconds = 0;
};

// Runs the scenarios over every engine. With several engines, each configuration's warm-up and
// repetitions alternate between them (ABBA order: A B, B A, A B, ...), so drift in clocks or
// temperature lands on both alike. Returns one result set per engine, in order; `seconds`, when
// given, receives the time each scenario took.
std::vector<VariantResults> run_scenarios(std::span<Engine* const> engines, std::span<const std::string> names,
                                          std::span<const Scenario> scenarios, const BenchOptions& options,
                                          Progress* progress, std::vector<ScenarioSeconds>* seconds = nullptr);

}  // namespace fuselm::bench
