#include "bench/scenarios.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "bench/estimate.h"
#include "bench/progress.h"
#include "core/error.h"
#include "core/rng.h"

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
    else fail("unknown scenario '", item, "' (supported: latency, throughput, prefill, depth, stability, all)");
    for (Scenario s : add)
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  FUSELM_CHECK(!out.empty(), "no scenario given (supported: latency, throughput, prefill, depth, stability, all)");
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
  for (int i = 0; i + 1 < gen_len; ++i) {
    engine.forward_sample({&step, 1}, samplers.pointers, scratch.out);
    token = scratch.out[0];
    const auto now = Clock::now();
    rep.itl_ms[i] = ms_between(prev, now);
    prev = now;
  }
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
  for (int i = 0; i + 1 < gen_len; ++i) {
    engine.forward_sample(steps, samplers.pointers, scratch.out);
    std::copy(scratch.out.begin(), scratch.out.end(), tokens.begin());
    const auto now = Clock::now();
    rep.step_ms[i] = ms_between(prev, now);
    prev = now;
  }
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
  for (int i = 0; i < gen_len; ++i) {
    engine.forward_sample({&step, 1}, samplers.pointers, scratch.out);
    token = scratch.out[0];
    const auto now = Clock::now();
    rep.step_ms[i] = ms_between(prev, now);
    prev = now;
  }
  return rep;
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
      }
    }
    progress->set_total(configs * (o.warmup + o.reps) * n);
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
    }
    if (seconds) seconds->push_back({s, std::chrono::duration<double>(Clock::now() - scenario_start).count()});
  }
  if (progress) progress->finish();
  return results;
}

}  // namespace fuselm::bench
