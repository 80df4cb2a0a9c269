#include "bench/scenarios.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <thread>

#include "bench/estimate.h"
#include "bench/progress.h"
#include "core/error.h"
#include "core/rng.h"
#include "runtime/batch_runner.h"

namespace fuselm::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

// Sequences that are removed again however the repetition ends.
class SequenceSet {
 public:
  SequenceSet(Engine& engine, int count) : engine_(engine) {
    ids_.reserve(count);
    for (int i = 0; i < count; ++i) ids_.push_back(engine_.add_sequence());
  }
  ~SequenceSet() {
    for (int id : ids_) {
      try {
        engine_.remove_sequence(id);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: removing benchmark sequence %d failed: %s\n", id, e.what());
      }
    }
  }
  SequenceSet(const SequenceSet&) = delete;
  SequenceSet& operator=(const SequenceSet&) = delete;
  std::span<const int> ids() const { return ids_; }

 private:
  Engine& engine_;
  std::vector<int> ids_;
};

// Greedy sampler states with room for their whole history, so sampling does not allocate.
struct Samplers {
  Samplers(int count, size_t history) : states(count, SamplerState(greedy_params())) {
    for (auto& s : states) {
      s.history.reserve(history);
      pointers.push_back(&s);
    }
  }
  std::vector<SamplerState> states;
  std::vector<SamplerState*> pointers;
};

// Buffers for one prefill or decode call, sized before the timed region.
struct CallScratch {
  explicit CallScratch(size_t max_chunks) {
    chunks.reserve(max_chunks);
    samplers.reserve(max_chunks);
    owners.reserve(max_chunks);
    out.reserve(max_chunks);
  }
  std::vector<SequenceChunk> chunks;
  std::vector<SamplerState*> samplers;
  std::vector<int> owners;  // which prompt a chunk finishes, or -1
  std::vector<int32_t> out;
};

// Feeds prompts[i] to seq_ids[i] in forward calls of at most `budget` tokens (a long prompt is
// split across calls, each sequence at most once per call); first_tokens[i] receives the token
// sampled after the whole of prompt i.
void prefill_sequences(Engine& engine, std::span<const int> seq_ids, std::span<const std::span<const int32_t>> prompts,
                       std::span<SamplerState* const> samplers, int budget, std::span<int32_t> first_tokens,
                       CallScratch& scratch) {
  size_t i = 0, offset = 0;
  while (i < prompts.size()) {
    scratch.chunks.clear();
    scratch.samplers.clear();
    scratch.owners.clear();
    size_t used = 0;
    while (i < prompts.size() && used < static_cast<size_t>(budget)) {
      const size_t take = std::min(prompts[i].size() - offset, static_cast<size_t>(budget) - used);
      scratch.chunks.push_back(SequenceChunk{seq_ids[i], prompts[i].subspan(offset, take), false});
      scratch.samplers.push_back(samplers[i]);
      offset += take;
      used += take;
      const bool finished = offset == prompts[i].size();
      scratch.owners.push_back(finished ? static_cast<int>(i) : -1);
      if (finished) {
        ++i;
        offset = 0;
      }
    }
    engine.forward_sample(scratch.chunks, scratch.samplers, scratch.out);
    FUSELM_CHECK(scratch.out.size() == scratch.chunks.size(), "engine returned ", scratch.out.size(),
                 " tokens for ", scratch.chunks.size(), " chunks");
    for (size_t k = 0; k < scratch.owners.size(); ++k)
      if (scratch.owners[k] >= 0) first_tokens[scratch.owners[k]] = scratch.out[k];
  }
}

// Runs `count` decode steps over `first` (one token per chunk), each step's sampled tokens fed to
// the next one on the engine's side (kPendingToken): step i + 1 is submitted before the host waits
// for step i, so the device does not idle while the host reads a step's tokens. on_step(i) runs as
// soon as step i's tokens are in `out`.
template <class OnStep>
void decode_steps(Engine& engine, std::span<const SequenceChunk> first, std::span<SamplerState* const> samplers,
                  int count, std::vector<int32_t>& out, OnStep on_step) {
  if (count <= 0) return;
  static const int32_t pending = kPendingToken;
  std::vector<SequenceChunk> next(first.begin(), first.end());
  for (SequenceChunk& c : next) c.tokens = std::span<const int32_t>(&pending, 1);
  engine.submit_sample(first, samplers);
  for (int i = 0; i < count; ++i) {
    if (i + 1 < count) engine.submit_sample(next, samplers);
    engine.wait_sample(out);
    on_step(i);
  }
}

void check_positive(int value, const char* option, int minimum = 1) {
  FUSELM_CHECK(value >= minimum, "bench: ", option, " must be at least ", minimum, ", got ", value);
}

}  // namespace

std::string scenario_name(Scenario s) {
  switch (s) {
    case Scenario::Latency: return "latency";
    case Scenario::Throughput: return "throughput";
    case Scenario::Prefill: return "prefill";
    case Scenario::Depth: return "depth";
    case Scenario::Stability: return "stability";
    case Scenario::Serving: return "serving";
  }
  return "?";
}

std::vector<Scenario> parse_scenarios(const std::string& list) {
  std::vector<Scenario> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    std::vector<Scenario> add;
    if (item == "all")
      add = {Scenario::Latency, Scenario::Throughput, Scenario::Prefill, Scenario::Depth, Scenario::Stability};
    else if (item == "latency") add = {Scenario::Latency};
    else if (item == "throughput") add = {Scenario::Throughput};
    else if (item == "prefill") add = {Scenario::Prefill};
    else if (item == "depth") add = {Scenario::Depth};
    else if (item == "stability") add = {Scenario::Stability};
    else if (item == "serving") add = {Scenario::Serving};
    else fail("unknown scenario '", item, "' (supported: latency, throughput, prefill, depth, stability, serving, all)");
    for (Scenario s : add)
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  FUSELM_CHECK(!out.empty(),
               "no scenario given (supported: latency, throughput, prefill, depth, stability, serving, all)");
  return out;
}

void BenchOptions::validate(std::span<const Scenario> scenarios) const {
  check_positive(reps, "--reps");
  check_positive(warmup, "--warmup", 0);
  check_positive(max_prefill_tokens, "--max-prefill-tokens");
  for (Scenario s : scenarios) {
    switch (s) {
      case Scenario::Latency:
        check_positive(prompt_len, "--prompt-len");
        check_positive(gen_len, "--gen-len (the latency scenario needs 2 tokens for an inter-token gap)", 2);
        break;
      case Scenario::Throughput:
        FUSELM_CHECK(!batches.empty(), "bench: --batches is empty");
        for (int b : batches) check_positive(b, "every --batches entry");
        check_positive(batch_prompt_len, "--batch-prompt-len");
        check_positive(batch_gen_len, "--batch-gen-len (a decode step needs 2 tokens)", 2);
        break;
      case Scenario::Prefill:
        FUSELM_CHECK(!prefill_lens.empty(), "bench: --prefill-lens is empty");
        for (int p : prefill_lens) check_positive(p, "every --prefill-lens entry");
        break;
      case Scenario::Depth:
        FUSELM_CHECK(!depths.empty(), "bench: --depths is empty");
        for (int d : depths) check_positive(d, "every --depths entry", 0);
        check_positive(depth_gen_len, "--depth-gen-len");
        break;
      case Scenario::Stability:
        check_positive(prompt_len, "--prompt-len");
        check_positive(stability_gen_len, "--stability-gen-len (an inter-token gap needs 2 tokens)", 2);
        FUSELM_CHECK(!stability_batches.empty(), "bench: --stability-batches is empty");
        for (int b : stability_batches) check_positive(b, "every --stability-batches entry");
        check_positive(batch_prompt_len, "--batch-prompt-len");
        check_positive(stability_steps, "--stability-steps");
        break;
      case Scenario::Serving:
        FUSELM_CHECK(request_rate > 0 && !std::isnan(request_rate),
                     "bench: --request-rate must be positive or inf, got ", request_rate);
        check_positive(num_prompts, "--num-prompts");
        check_positive(serving_input_len, "--serving-input-len");
        check_positive(serving_output_len, "--serving-output-len");
        check_positive(serving_max_batch, "--serving-max-batch");
        FUSELM_CHECK(goodput_ttft_ms >= 0 && goodput_tpot_ms >= 0 && goodput_e2el_ms >= 0,
                     "bench: --goodput limits must be positive milliseconds");
        break;
    }
  }
}

EngineNeeds engine_needs(std::span<const Scenario> scenarios, const BenchOptions& o) {
  EngineNeeds needs;
  needs.max_seq_len = kCalibrationMinSeqLen;  // room for the time estimate's calibration
  needs.max_prefill_tokens = o.max_prefill_tokens;
  for (Scenario s : scenarios) {
    switch (s) {
      case Scenario::Latency:
        needs.max_seq_len = std::max(needs.max_seq_len, o.prompt_len + o.gen_len);
        needs.max_prefill_tokens = std::max(needs.max_prefill_tokens, o.prompt_len);
        break;
      case Scenario::Throughput:
        needs.max_batch = std::max(needs.max_batch, *std::max_element(o.batches.begin(), o.batches.end()));
        needs.max_seq_len = std::max(needs.max_seq_len, o.batch_prompt_len + o.batch_gen_len);
        break;
      case Scenario::Prefill: {
        const int longest = *std::max_element(o.prefill_lens.begin(), o.prefill_lens.end());
        needs.max_seq_len = std::max(needs.max_seq_len, longest + 1);
        needs.max_prefill_tokens = std::max(needs.max_prefill_tokens, longest);
        break;
      }
      case Scenario::Depth:
        needs.max_seq_len =
            std::max(needs.max_seq_len, *std::max_element(o.depths.begin(), o.depths.end()) + o.depth_gen_len + 1);
        break;
      case Scenario::Stability:
        needs.max_seq_len = std::max({needs.max_seq_len, o.prompt_len + o.stability_gen_len,
                                      o.batch_prompt_len + o.stability_steps + 1});
        needs.max_prefill_tokens = std::max(needs.max_prefill_tokens, o.prompt_len);
        needs.max_batch =
            std::max(needs.max_batch, *std::max_element(o.stability_batches.begin(), o.stability_batches.end()));
        break;
      case Scenario::Serving: {
        const int batch = std::min(o.num_prompts, o.serving_max_batch);
        needs.max_batch = std::max(needs.max_batch, batch);
        needs.max_seq_len = std::max(needs.max_seq_len, o.serving_input_len + o.serving_output_len);
        // Every running request decodes in each step, so a step holds at least one token per slot.
        needs.max_prefill_tokens = std::max(needs.max_prefill_tokens, batch);
        break;
      }
    }
  }
  return needs;
}

std::vector<int32_t> make_prompt(int vocab, int len, uint64_t seed, uint64_t stream) {
  FUSELM_CHECK(vocab > 0 && len >= 0, "make_prompt: vocab must be positive and len non-negative");
  Rng rng(splitmix64(seed) ^ splitmix64(~stream));
  std::vector<int32_t> ids(len);
  for (auto& id : ids) id = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab));
  return ids;
}

double parse_request_rate(const std::string& text) {
  if (text == "inf" || text == "infinity") return std::numeric_limits<double>::infinity();
  size_t pos = 0;
  double rate = 0;
  try {
    rate = std::stod(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  FUSELM_CHECK(pos == text.size() && pos > 0 && rate > 0 && std::isfinite(rate),
               "--request-rate: expected requests per second (a positive number) or inf, got '", text, "'");
  return rate;
}

void parse_goodput(const std::string& text, BenchOptions& o) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon == std::string::npos ? item.size() : colon);
    double ms = 0;
    size_t pos = 0;
    if (colon != std::string::npos) {
      try {
        ms = std::stod(item.substr(colon + 1), &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
    }
    FUSELM_CHECK(colon != std::string::npos && pos > 0 && pos == item.size() - colon - 1 && ms > 0 && std::isfinite(ms),
                 "--goodput: expected NAME:MILLISECONDS with a positive number, e.g. ttft:500,tpot:50; got '", item,
                 "'");
    if (name == "ttft") o.goodput_ttft_ms = ms;
    else if (name == "tpot") o.goodput_tpot_ms = ms;
    else if (name == "e2el") o.goodput_e2el_ms = ms;
    else fail("--goodput: unknown metric '", name, "' in '", item, "' (supported: ttft, tpot, e2el)");
  }
}

std::vector<double> make_arrival_times(int count, double rate, uint64_t seed) {
  FUSELM_CHECK(count >= 0 && rate > 0, "make_arrival_times: count must be non-negative and rate positive");
  std::vector<double> out(static_cast<size_t>(count), 0.0);
  if (std::isinf(rate)) return out;
  Rng rng(splitmix64(seed ^ 0x5e2f1a6b0c3d4e7full));
  double t = 0;
  for (double& a : out) {
    // Inverse-CDF of the exponential; 1 - u is in (0, 1], so the log is finite.
    const double u = static_cast<double>(rng.next_u64() >> 11) * 0x1.0p-53;
    t += -std::log(1.0 - u) / rate;
    a = t;
  }
  return out;
}

LatencyRep run_latency_once(Engine& engine, std::span<const int32_t> prompt, int gen_len, int max_prefill_tokens) {
  SequenceSet seq(engine, 1);
  Samplers samplers(1, prompt.size() + gen_len + 16);
  CallScratch scratch(1);
  const std::span<const int32_t> prompts[1] = {prompt};
  int32_t token = 0;
  LatencyRep rep;
  rep.itl_ms.resize(gen_len - 1);
  SequenceChunk step{seq.ids()[0], std::span<const int32_t>(&token, 1), false};

  const auto t0 = Clock::now();
  prefill_sequences(engine, seq.ids(), prompts, samplers.pointers, max_prefill_tokens, {&token, 1}, scratch);
  auto prev = Clock::now();
  rep.ttft_ms = ms_between(t0, prev);
  decode_steps(engine, {&step, 1}, samplers.pointers, gen_len - 1, scratch.out, [&](int i) {
    const auto now = Clock::now();
    rep.itl_ms[i] = ms_between(prev, now);
    prev = now;
  });
  rep.e2e_ms = ms_between(t0, prev);
  return rep;
}

ThroughputRep run_throughput_once(Engine& engine, std::span<const std::vector<int32_t>> prompts, int gen_len,
                                  int max_prefill_tokens) {
  const int batch = static_cast<int>(prompts.size());
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  SequenceSet seqs(engine, batch);
  Samplers samplers(batch, longest + gen_len + 16);
  CallScratch scratch(batch);
  std::vector<std::span<const int32_t>> prompt_spans(prompts.begin(), prompts.end());
  std::vector<int32_t> tokens(batch);
  std::vector<SequenceChunk> steps(batch);
  for (int b = 0; b < batch; ++b) steps[b] = SequenceChunk{seqs.ids()[b], std::span<const int32_t>(&tokens[b], 1), false};
  ThroughputRep rep;
  rep.step_ms.resize(gen_len - 1);

  const auto t0 = Clock::now();
  prefill_sequences(engine, seqs.ids(), prompt_spans, samplers.pointers, max_prefill_tokens, tokens, scratch);
  auto prev = Clock::now();
  rep.prefill_ms = ms_between(t0, prev);
  decode_steps(engine, steps, samplers.pointers, gen_len - 1, scratch.out, [&](int i) {
    const auto now = Clock::now();
    rep.step_ms[i] = ms_between(prev, now);
    prev = now;
  });
  rep.wall_ms = ms_between(t0, prev);
  return rep;
}

double run_prefill_once(Engine& engine, std::span<const int32_t> prompt, int max_prefill_tokens) {
  SequenceSet seq(engine, 1);
  Samplers samplers(1, prompt.size() + 16);
  CallScratch scratch(1);
  const std::span<const int32_t> prompts[1] = {prompt};
  int32_t token = 0;
  const auto t0 = Clock::now();
  prefill_sequences(engine, seq.ids(), prompts, samplers.pointers, max_prefill_tokens, {&token, 1}, scratch);
  return ms_between(t0, Clock::now());
}

DepthRep run_depth_once(Engine& engine, std::span<const int32_t> context, int32_t start_token, int gen_len,
                        int max_prefill_tokens) {
  SequenceSet seq(engine, 1);
  Samplers samplers(1, context.size() + gen_len + 16);
  CallScratch scratch(1);
  int32_t token = start_token;
  if (!context.empty()) {
    const std::span<const int32_t> prompts[1] = {context};
    prefill_sequences(engine, seq.ids(), prompts, samplers.pointers, max_prefill_tokens, {&token, 1}, scratch);
  }
  SequenceChunk step{seq.ids()[0], std::span<const int32_t>(&token, 1), false};
  DepthRep rep;
  rep.step_ms.resize(gen_len);
  auto prev = Clock::now();
  decode_steps(engine, {&step, 1}, samplers.pointers, gen_len, scratch.out, [&](int i) {
    const auto now = Clock::now();
    rep.step_ms[i] = ms_between(prev, now);
    prev = now;
  });
  return rep;
}

ServingResult run_serving_once(Engine& engine, std::span<const std::vector<int32_t>> prompts,
                               std::span<const double> arrival_s, int output_len, const SchedulerLimits& limits,
                               const std::function<void(int done)>& on_finished) {
  FUSELM_CHECK(prompts.size() == arrival_s.size(), "run_serving_once: one arrival time per prompt expected");
  const size_t n = prompts.size();
  ServingResult result;
  result.num_prompts = static_cast<int>(n);
  result.output_len = output_len;
  result.limits = limits;
  result.requests.resize(n);
  BatchRunner runner(engine, limits);

  const auto start = Clock::now();
  auto at = [&](double seconds) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  size_t submitted = 0, done = 0;
  while (done < n) {
    const auto now = Clock::now();
    while (submitted < n && at(arrival_s[submitted]) <= now) {
      Request r;
      r.id = static_cast<int64_t>(submitted);
      r.prompt = prompts[submitted];
      r.max_new_tokens = output_len;  // no stop tokens: end-of-sequence is ignored
      const Status s = runner.submit(std::move(r));
      FUSELM_CHECK(s.ok(), "serving: ", s.message());
      ++submitted;
    }
    if (runner.scheduler().idle()) {
      // Everything submitted is done, so a request is still to come: wait for it.
      std::this_thread::sleep_until(at(arrival_s[submitted]));
      continue;
    }
    runner.step();
    for (BatchRunner::Result& r : runner.take_finished()) {
      const size_t i = static_cast<size_t>(r.id);
      const auto arrival = at(arrival_s[i]);
      ServingRequest& out = result.requests[i];
      out.prompt_tokens = static_cast<int>(prompts[i].size());
      out.output_tokens = static_cast<int>(r.tokens.size());
      out.arrival_s = arrival_s[i];
      out.ttft_ms = ms_between(arrival, r.token_times.front());
      out.e2e_ms = ms_between(arrival, r.token_times.back());
      for (size_t k = 1; k < r.token_times.size(); ++k)
        out.itl_ms.push_back(ms_between(r.token_times[k - 1], r.token_times[k]));
      ++done;
      if (on_finished) on_finished(static_cast<int>(done));
    }
  }
  result.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  result.steps = runner.steps_run();
  return result;
}

std::vector<VariantResults> run_scenarios(std::span<Engine* const> engines, std::span<const std::string> names,
                                          std::span<const Scenario> scenarios, const BenchOptions& o,
                                          Progress* progress, std::vector<ScenarioSeconds>* seconds) {
  FUSELM_CHECK(!engines.empty() && engines.size() == names.size(), "run_scenarios: one name per engine expected");
  o.validate(scenarios);
  const int vocab = engines[0]->config().vocab_size;
  for (Engine* e : engines)
    FUSELM_CHECK(e->config().vocab_size == vocab, "compared engines must run the same model (vocab ",
                 e->config().vocab_size, " vs ", vocab, ")");
  const int n = static_cast<int>(engines.size());

  if (progress) {
    int configs = 0;
    for (Scenario s : scenarios) {
      switch (s) {
        case Scenario::Latency: configs += 1; break;
        case Scenario::Throughput: configs += static_cast<int>(o.batches.size()); break;
        case Scenario::Prefill: configs += static_cast<int>(o.prefill_lens.size()); break;
        case Scenario::Depth: configs += static_cast<int>(o.depths.size()); break;
        case Scenario::Stability: configs += 1 + static_cast<int>(o.stability_batches.size()); break;
        case Scenario::Serving: break;  // counted below: one unit per request, not per repetition
      }
    }
    int serving_units = 0;
    for (Scenario s : scenarios)
      if (s == Scenario::Serving) serving_units = (o.num_prompts + (o.warmup > 0 ? 1 : 0)) * n;
    progress->set_total(configs * (o.warmup + o.reps) * n + serving_units);
  }

  // Warm-up, then the timed repetitions, each engine in turn, alternating the order every rep.
  auto repeat = [&](const std::string& label, auto&& run_one) {
    auto announce = [&](int v, const std::string& what) {
      if (progress) progress->update(label + " " + what + (n > 1 ? " [" + names[v] + "]" : ""));
    };
    for (int w = 0; w < o.warmup; ++w) {
      for (int v = 0; v < n; ++v) {
        announce(v, "warm-up " + std::to_string(w + 1) + "/" + std::to_string(o.warmup));
        run_one(v, false);
      }
    }
    for (int r = 0; r < o.reps; ++r) {
      for (int k = 0; k < n; ++k) {
        const int v = r % 2 == 0 ? k : n - 1 - k;
        announce(v, "rep " + std::to_string(r + 1) + "/" + std::to_string(o.reps));
        run_one(v, true);
      }
    }
  };

  std::vector<VariantResults> results(n);
  if (seconds) seconds->clear();
  for (Scenario s : scenarios) {
    const auto scenario_start = Clock::now();
    switch (s) {
      case Scenario::Latency: {
        const auto prompt = make_prompt(vocab, o.prompt_len, o.seed, 0);
        for (auto& r : results) r.latency = LatencyResult{o.prompt_len, o.gen_len, {}};
        const int budget = std::max(o.max_prefill_tokens, o.prompt_len);  // the prompt in one call
        repeat("latency", [&](int v, bool timed) {
          LatencyRep rep = run_latency_once(*engines[v], prompt, o.gen_len, budget);
          if (timed) results[v].latency->reps.push_back(std::move(rep));
        });
        break;
      }
      case Scenario::Throughput:
        for (int batch : o.batches) {
          std::vector<std::vector<int32_t>> prompts;
          for (int b = 0; b < batch; ++b) prompts.push_back(make_prompt(vocab, o.batch_prompt_len, o.seed, 1000 + b));
          for (auto& r : results) r.throughput.push_back(ThroughputResult{batch, o.batch_prompt_len, o.batch_gen_len, {}});
          repeat("throughput batch " + std::to_string(batch), [&](int v, bool timed) {
            ThroughputRep rep = run_throughput_once(*engines[v], prompts, o.batch_gen_len, o.max_prefill_tokens);
            if (timed) results[v].throughput.back().reps.push_back(std::move(rep));
          });
        }
        break;
      case Scenario::Prefill:
        for (int len : o.prefill_lens) {
          const auto prompt = make_prompt(vocab, len, o.seed, 2'000'000 + static_cast<uint64_t>(len));
          for (auto& r : results) r.prefill.push_back(PrefillResult{len, {}});
          // Prefill calls are sized to the engine's limit so one prompt is one call where it can be.
          const int budget = std::max(o.max_prefill_tokens, len);
          repeat("prefill " + std::to_string(len), [&](int v, bool timed) {
            const double ms = run_prefill_once(*engines[v], prompt, budget);
            if (timed) results[v].prefill.back().ms.push_back(ms);
          });
        }
        break;
      case Scenario::Depth:
        for (int depth : o.depths) {
          const auto context = make_prompt(vocab, depth, o.seed, 3'000'000 + static_cast<uint64_t>(depth));
          const int32_t start = make_prompt(vocab, 1, o.seed, 3'000'000 - 1)[0];
          for (auto& r : results) r.depth.push_back(DepthResult{depth, o.depth_gen_len, {}});
          repeat("depth " + std::to_string(depth), [&](int v, bool timed) {
            DepthRep rep = run_depth_once(*engines[v], context, start, o.depth_gen_len, o.max_prefill_tokens);
            if (timed) results[v].depth.back().reps.push_back(std::move(rep));
          });
        }
        break;
      case Scenario::Stability: {
        // The latency scenario's prompt and the throughput scenario's prompts, longer runs.
        const auto prompt = make_prompt(vocab, o.prompt_len, o.seed, 0);
        for (auto& r : results) r.stability = StabilityResult{LatencyResult{o.prompt_len, o.stability_gen_len, {}}, {}};
        const int budget = std::max(o.max_prefill_tokens, o.prompt_len);
        repeat("stability batch 1, " + std::to_string(o.stability_gen_len) + " tokens", [&](int v, bool timed) {
          LatencyRep rep = run_latency_once(*engines[v], prompt, o.stability_gen_len, budget);
          if (timed) results[v].stability->itl.reps.push_back(std::move(rep));
        });
        for (int batch : o.stability_batches) {
          std::vector<std::vector<int32_t>> prompts;
          for (int b = 0; b < batch; ++b) prompts.push_back(make_prompt(vocab, o.batch_prompt_len, o.seed, 1000 + b));
          for (auto& r : results)
            r.stability->steps.push_back(ThroughputResult{batch, o.batch_prompt_len, o.stability_steps + 1, {}});
          repeat("stability batch " + std::to_string(batch), [&](int v, bool timed) {
            ThroughputRep rep = run_throughput_once(*engines[v], prompts, o.stability_steps + 1, o.max_prefill_tokens);
            if (timed) results[v].stability->steps.back().reps.push_back(std::move(rep));
          });
        }
        break;
      }
      case Scenario::Serving: {
        // One run per engine (engines one after another), after one warm-up request unless
        // --warmup 0; the requests are the samples.
        std::vector<std::vector<int32_t>> prompts;
        for (int i = 0; i < o.num_prompts; ++i)
          prompts.push_back(make_prompt(vocab, o.serving_input_len, o.seed, 5'000'000 + static_cast<uint64_t>(i)));
        const std::vector<double> arrivals = make_arrival_times(o.num_prompts, o.request_rate, o.seed);
        const int batch = std::min(o.num_prompts, o.serving_max_batch);
        const int step_tokens = std::max(o.max_prefill_tokens, batch);
        for (int v = 0; v < n; ++v) {
          const std::string tag = n > 1 ? " [" + names[v] + "]" : "";
          const SchedulerLimits limits = BatchRunner::limits_for(*engines[v], batch, step_tokens);
          if (o.warmup > 0) {
            if (progress) progress->update("serving warm-up" + tag);
            const double at_once[1] = {0.0};
            run_serving_once(*engines[v], {&prompts[0], 1}, at_once, std::min(o.serving_output_len, 2), limits);
          }
          ServingResult r = run_serving_once(*engines[v], prompts, arrivals, o.serving_output_len, limits, [&](int done) {
            if (progress)
              progress->update(str_cat("serving", tag, ": ", done, "/", o.num_prompts, " requests done"));
          });
          r.request_rate = o.request_rate;
          r.input_len = o.serving_input_len;
          r.goodput_ttft_ms = o.goodput_ttft_ms;
          r.goodput_tpot_ms = o.goodput_tpot_ms;
          r.goodput_e2el_ms = o.goodput_e2el_ms;
          results[v].serving = std::move(r);
        }
        break;
      }
    }
    if (seconds) seconds->push_back({s, std::chrono::duration<double>(Clock::now() - scenario_start).count()});
  }
  if (progress) progress->finish();
  return results;
}

}  // namespace fuselm::bench
