// Scenario runners over a recording fake engine (exact call pattern: chunking, token feeding,
// clean-up, alternation) and over the real CPU engine on a tiny in-memory model.
#include "bench/scenarios.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <map>

#include "core/error.h"
#include "runtime/cpu_engine.h"
#include "runtime/tiny_model.h"

namespace fuselm::bench {
namespace {

// Returns token (length after the step) % vocab for every chunk, and records every call.
class RecordingEngine final : public Engine {
 public:
  RecordingEngine(int id, std::vector<int>* log) : id_(id), log_(log) {
    config_.hidden_size = 8;
    config_.num_layers = 1;
    config_.num_heads = 1;
    config_.num_kv_heads = 1;
    config_.head_dim = 8;
    config_.intermediate_size = 8;
    config_.vocab_size = 1000;
  }
  struct Call {
    std::vector<std::pair<int, std::vector<int32_t>>> chunks;  // (seq, tokens)
  };

  const ModelConfig& config() const override { return config_; }
  std::string description() const override { return "recording fake"; }
  int add_sequence() override {
    lengths_[next_] = 0;
    return next_++;
  }
  void remove_sequence(int seq_id) override {
    ASSERT_EQ(lengths_.count(seq_id), 1u);
    lengths_.erase(seq_id);
  }
  int sequence_length(int seq_id) const override { return lengths_.at(seq_id); }
  KvCapacity kv_capacity() const override { return {1 << 20, 16, 1 << 16}; }
  void forward(std::span<const SequenceChunk>, std::vector<float>&) override {
    FAIL() << "the benchmark should sample through forward_sample";
  }
  void forward_sample(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers,
                      std::vector<int32_t>& tokens) override {
    if (log_) log_->push_back(id_);
    ASSERT_EQ(samplers.size(), chunks.size());
    Call call;
    tokens.clear();
    for (const SequenceChunk& c : chunks) {
      EXPECT_FALSE(c.all_logits);
      int& len = lengths_.at(c.seq_id);
      len += static_cast<int>(c.tokens.size());
      call.chunks.emplace_back(c.seq_id, std::vector<int32_t>(c.tokens.begin(), c.tokens.end()));
      tokens.push_back(len % config_.vocab_size);
    }
    calls.push_back(std::move(call));
  }

  size_t live_sequences() const { return lengths_.size(); }
  std::vector<Call> calls;

 private:
  int id_;
  std::vector<int>* log_;
  ModelConfig config_;
  std::map<int, int> lengths_;
  int next_ = 0;
};

TEST(Scenarios, ParseAndNeeds) {
  const auto all = parse_scenarios("all");
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[4], Scenario::Stability);
  EXPECT_EQ(parse_scenarios("stability,latency")[0], Scenario::Stability);
  const auto s = parse_scenarios("depth,latency,depth");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], Scenario::Depth);
  EXPECT_EQ(s[1], Scenario::Latency);
  EXPECT_THROW(parse_scenarios("serve"), Error);
  EXPECT_EQ(parse_scenarios("serving,latency")[0], Scenario::Serving);
  // "all" leaves serving out: it runs for as long as its arrivals take.
  for (Scenario x : all) EXPECT_NE(x, Scenario::Serving);
  EXPECT_THROW(parse_scenarios(""), Error);

  BenchOptions o;
  const EngineNeeds needs = engine_needs(parse_scenarios("all"), o);
  EXPECT_EQ(needs.max_batch, 256);
  EXPECT_EQ(needs.max_seq_len, 32768 + 32 + 1);
  EXPECT_EQ(needs.max_prefill_tokens, 8192);
  EXPECT_EQ(engine_needs(parse_scenarios("latency"), o).max_batch, 1);
  // Stability: 512 + 1000 tokens at batch 1, batches up to 64 of 128 + 256 + 1.
  const EngineNeeds st = engine_needs(parse_scenarios("stability"), o);
  EXPECT_EQ(st.max_batch, 64);
  EXPECT_EQ(st.max_seq_len, 512 + 1000);
  EXPECT_EQ(st.max_prefill_tokens, 8192);
  // Room for the time estimate's calibration even when the scenarios need less.
  o.prefill_lens = {4};
  EXPECT_GE(engine_needs(parse_scenarios("prefill"), o).max_seq_len, 16);

  o.gen_len = 1;  // no inter-token gap to time
  EXPECT_THROW(o.validate(parse_scenarios("latency")), Error);
  EXPECT_NO_THROW(o.validate(parse_scenarios("prefill")));
  o.stability_gen_len = 1;
  EXPECT_THROW(o.validate(parse_scenarios("stability")), Error);
  o.stability_gen_len = 10;
  o.stability_batches = {};
  EXPECT_THROW(o.validate(parse_scenarios("stability")), Error);
}

TEST(Scenarios, StabilityRunsOneLongGenerationAndEachBatch) {
  std::vector<int> log;
  RecordingEngine engine(0, &log);
  Engine* engines[] = {&engine};
  const std::string names[] = {"baseline"};
  BenchOptions o;
  o.reps = 2;
  o.warmup = 1;
  o.prompt_len = 6;
  o.stability_gen_len = 5;
  o.stability_batches = {2, 3};
  o.batch_prompt_len = 4;
  o.stability_steps = 3;
  const auto results = run_scenarios(engines, names, parse_scenarios("stability"), o, nullptr);
  ASSERT_TRUE(results[0].stability.has_value());
  const StabilityResult& st = *results[0].stability;
  EXPECT_EQ(st.itl.prompt_len, 6);
  EXPECT_EQ(st.itl.gen_len, 5);
  ASSERT_EQ(st.itl.reps.size(), 2u);
  EXPECT_EQ(st.itl.reps[1].itl_ms.size(), 4u);
  ASSERT_EQ(st.steps.size(), 2u);
  EXPECT_EQ(st.steps[1].batch, 3);
  EXPECT_EQ(st.steps[1].prompt_len, 4);
  ASSERT_EQ(st.steps[1].reps.size(), 2u);
  EXPECT_EQ(st.steps[1].reps[0].step_ms.size(), 3u);  // exactly --stability-steps timed steps
  // Calls: 3 runs x (1 prompt + 4 steps), then per batch 3 runs x (1 prefill + 3 steps).
  EXPECT_EQ(log.size(), 3u * 5u + 2u * 3u * 4u);
  // Every step of batch 3 feeds all 3 sequences.
  EXPECT_EQ(engine.calls.back().chunks.size(), 3u);
  EXPECT_EQ(engine.live_sequences(), 0u);
}

TEST(Scenarios, RecordsTheTimeOfEveryScenario) {
  RecordingEngine engine(0, nullptr);
  Engine* engines[] = {&engine};
  const std::string names[] = {"baseline"};
  BenchOptions o;
  o.reps = 1;
  o.prompt_len = 4;
  o.gen_len = 2;
  o.prefill_lens = {4};
  std::vector<ScenarioSeconds> seconds;
  run_scenarios(engines, names, parse_scenarios("prefill,latency"), o, nullptr, &seconds);
  ASSERT_EQ(seconds.size(), 2u);
  EXPECT_EQ(seconds[0].scenario, Scenario::Prefill);
  EXPECT_EQ(seconds[1].scenario, Scenario::Latency);
  for (const auto& s : seconds) EXPECT_GE(s.seconds, 0.0);
}

TEST(Scenarios, PromptsAreDeterministicAndInVocab) {
  const auto a = make_prompt(50, 200, 7, 1), b = make_prompt(50, 200, 7, 1), c = make_prompt(50, 200, 7, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (int32_t id : a) EXPECT_TRUE(id >= 0 && id < 50);
}

TEST(Scenarios, LatencyFeedsEachSampledTokenBack) {
  RecordingEngine engine(0, nullptr);
  const auto prompt = make_prompt(1000, 6, 1, 0);
  const LatencyRep rep = run_latency_once(engine, prompt, 4, 100);
  ASSERT_EQ(engine.calls.size(), 4u);  // the prompt, then 3 single-token steps
  EXPECT_EQ(engine.calls[0].chunks[0].second, prompt);
  // After the prompt the sequence holds 6 tokens, so the fake answers 6, then 7, 8.
  EXPECT_EQ(engine.calls[1].chunks[0].second, std::vector<int32_t>{6});
  EXPECT_EQ(engine.calls[2].chunks[0].second, std::vector<int32_t>{7});
  EXPECT_EQ(engine.calls[3].chunks[0].second, std::vector<int32_t>{8});
  EXPECT_EQ(rep.itl_ms.size(), 3u);
  EXPECT_GE(rep.e2e_ms, rep.ttft_ms);
  EXPECT_EQ(engine.live_sequences(), 0u);
}

TEST(Scenarios, ThroughputPrefillsWithinTheTokenBudget) {
  RecordingEngine engine(0, nullptr);
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11, 12, 13, 14, 15}};
  const ThroughputRep rep = run_throughput_once(engine, prompts, 3, 8);
  // 15 prompt tokens in calls of at most 8: [seq0 x5, seq1 x3], [seq1 x2, seq2 x5]; then 2 steps.
  ASSERT_EQ(engine.calls.size(), 4u);
  ASSERT_EQ(engine.calls[0].chunks.size(), 2u);
  EXPECT_EQ(engine.calls[0].chunks[1].second, (std::vector<int32_t>{6, 7, 8}));
  EXPECT_EQ(engine.calls[1].chunks[0].second, (std::vector<int32_t>{9, 10}));
  EXPECT_EQ(engine.calls[1].chunks[1].first, 2);
  for (size_t c = 2; c < 4; ++c) {
    ASSERT_EQ(engine.calls[c].chunks.size(), 3u);
    for (const auto& [seq, tokens] : engine.calls[c].chunks) {
      // Every sequence holds 5 tokens after its prompt, so each is fed 5, then 6.
      EXPECT_EQ(tokens, std::vector<int32_t>{static_cast<int32_t>(5 + c - 2)}) << "seq " << seq;
    }
  }
  EXPECT_EQ(rep.step_ms.size(), 2u);
  EXPECT_GE(rep.wall_ms, rep.prefill_ms);
  EXPECT_EQ(engine.live_sequences(), 0u);
}

TEST(Scenarios, DepthZeroStartsFromTheStartToken) {
  RecordingEngine engine(0, nullptr);
  const DepthRep rep = run_depth_once(engine, {}, 42, 3, 16);
  ASSERT_EQ(engine.calls.size(), 3u);
  EXPECT_EQ(engine.calls[0].chunks[0].second, std::vector<int32_t>{42});
  EXPECT_EQ(rep.step_ms.size(), 3u);

  RecordingEngine deep(0, nullptr);
  const auto context = make_prompt(1000, 40, 1, 3);
  run_depth_once(deep, context, 42, 2, 16);
  // 40 tokens of context in chunks of 16, 16, 8, then 2 timed steps starting from token 40.
  ASSERT_EQ(deep.calls.size(), 5u);
  EXPECT_EQ(deep.calls[2].chunks[0].second.size(), 8u);
  EXPECT_EQ(deep.calls[3].chunks[0].second, std::vector<int32_t>{40});
}

TEST(Scenarios, VariantsAlternateRepByRep) {
  std::vector<int> log;
  RecordingEngine a(0, &log), b(1, &log);
  Engine* engines[] = {&a, &b};
  const std::string names[] = {"baseline", "fused"};
  BenchOptions o;
  o.reps = 3;
  o.warmup = 1;
  o.prefill_lens = {8};
  const auto results = run_scenarios(engines, names, parse_scenarios("prefill"), o, nullptr);
  // One call per prefill: warm-up A B, then A B, B A, A B.
  EXPECT_EQ(log, (std::vector<int>{0, 1, 0, 1, 1, 0, 0, 1}));
  ASSERT_EQ(results.size(), 2u);
  ASSERT_EQ(results[1].prefill.size(), 1u);
  EXPECT_EQ(results[1].prefill[0].ms.size(), 3u);
}

TEST(Scenarios, ServingArrivalsAndOptions) {
  const auto a = make_arrival_times(2000, 4.0, 9), b = make_arrival_times(2000, 4.0, 9);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, make_arrival_times(2000, 4.0, 10));
  for (size_t i = 1; i < a.size(); ++i) EXPECT_LE(a[i - 1], a[i]);
  EXPECT_GT(a[0], 0.0);
  // Exponential gaps of mean 1 / rate: 2000 of them average 0.25 s within a few percent.
  EXPECT_NEAR(a.back() / 2000.0, 0.25, 0.25 * 0.08);
  for (double t : make_arrival_times(5, parse_request_rate("inf"), 1)) EXPECT_EQ(t, 0.0);

  EXPECT_DOUBLE_EQ(parse_request_rate("2.5"), 2.5);
  for (const char* bad : {"0", "-1", "fast", "3x", ""}) EXPECT_THROW(parse_request_rate(bad), Error) << bad;
  BenchOptions o;
  parse_goodput("ttft:500,tpot:50", o);
  EXPECT_EQ(o.goodput_ttft_ms, 500.0);
  EXPECT_EQ(o.goodput_tpot_ms, 50.0);
  EXPECT_EQ(o.goodput_e2el_ms, 0.0);
  for (const char* bad : {"ttft", "ttft:", "ttft:-1", "itl:5", "tpot:5ms"}) EXPECT_THROW(parse_goodput(bad, o), Error) << bad;

  o.num_prompts = 10;
  o.serving_max_batch = 4;
  o.serving_input_len = 100;
  o.serving_output_len = 20;
  o.max_prefill_tokens = 2;
  const EngineNeeds needs = engine_needs(parse_scenarios("serving"), o);
  EXPECT_EQ(needs.max_batch, 4);
  EXPECT_EQ(needs.max_seq_len, 120);
  EXPECT_EQ(needs.max_prefill_tokens, 4);  // a step holds one decode token per running request
  o.num_prompts = 0;
  EXPECT_THROW(o.validate(parse_scenarios("serving")), Error);
}

TEST(Scenarios, ServingRunsEveryRequestThroughTheScheduler) {
  RecordingEngine engine(0, nullptr);
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11, 12, 13, 14, 15}};
  const std::vector<double> arrivals = {0.0, 0.0, 0.02};
  SchedulerLimits limits;
  limits.max_sequences = 2;
  limits.max_step_tokens = 8;
  limits.kv_capacity_tokens = 1 << 20;
  int finished_calls = 0;
  const ServingResult r = run_serving_once(engine, prompts, arrivals, 3, limits, [&](int done) {
    EXPECT_EQ(done, finished_calls + 1);
    ++finished_calls;
  });
  EXPECT_EQ(finished_calls, 3);
  ASSERT_EQ(r.requests.size(), 3u);
  // Step 0: request 0's prompt and 3 of request 1's (budget 8, two slots; request 2 has not arrived).
  ASSERT_GE(engine.calls.size(), 2u);
  ASSERT_EQ(engine.calls[0].chunks.size(), 2u);
  EXPECT_EQ(engine.calls[0].chunks[0].second, prompts[0]);
  EXPECT_EQ(engine.calls[0].chunks[1].second, (std::vector<int32_t>{6, 7, 8}));
  for (const ServingRequest& q : r.requests) {
    EXPECT_EQ(q.prompt_tokens, 5);
    EXPECT_EQ(q.output_tokens, 3);
    EXPECT_EQ(q.itl_ms.size(), 2u);
    EXPECT_GE(q.ttft_ms, 0.0);
    EXPECT_LE(q.ttft_ms, q.e2e_ms);
  }
  EXPECT_EQ(r.requests[2].arrival_s, 0.02);
  EXPECT_GE(r.duration_s, 0.02);  // the run waited for the last arrival
  EXPECT_GT(r.steps, 3);
  EXPECT_EQ(engine.live_sequences(), 0u);

  SchedulerLimits tiny = limits;
  tiny.kv_capacity_tokens = 16;  // one block: a request of 5 + 20 tokens can never fit
  const std::vector<double> at_once = {0.0, 0.0, 0.0};
  EXPECT_THROW(run_serving_once(engine, prompts, at_once, 20, tiny), Error);
  EXPECT_EQ(engine.live_sequences(), 0u);
}

TEST(Scenarios, AllScenariosOnTheCpuEngine) {
  omp_set_num_threads(1);  // the protocol is under test, not speed; thread teams only slow a busy CI machine
  ModelConfig c = test::tiny_config();
  c.max_position_embeddings = 128;
  auto model = test::tiny_model(c, DType::BF16);
  BenchOptions o;
  o.reps = 2;
  o.warmup = 1;
  o.prompt_len = 8;
  o.gen_len = 4;
  o.batches = {1, 3};
  o.batch_prompt_len = 5;
  o.batch_gen_len = 3;
  o.prefill_lens = {4, 16};
  o.depths = {0, 20};
  o.depth_gen_len = 3;
  o.stability_gen_len = 6;
  o.stability_batches = {2};
  o.stability_steps = 4;
  o.max_prefill_tokens = 8;
  o.request_rate = 500;  // arrivals a few ms apart
  o.num_prompts = 5;
  o.serving_input_len = 12;
  o.serving_output_len = 4;
  o.serving_max_batch = 3;
  const auto scenarios = parse_scenarios("all,serving");
  const EngineNeeds needs = engine_needs(scenarios, o);
  EngineOptions eo;
  eo.max_batch = needs.max_batch;
  eo.max_seq_len = needs.max_seq_len;
  eo.max_prefill_tokens = needs.max_prefill_tokens;
  auto engine = make_cpu_engine(*model, eo);
  Engine* engines[] = {engine.get()};
  const std::string names[] = {"baseline"};
  const auto results = run_scenarios(engines, names, scenarios, o, nullptr);
  ASSERT_EQ(results.size(), 1u);
  const VariantResults& r = results[0];
  ASSERT_TRUE(r.latency.has_value());
  ASSERT_EQ(r.latency->reps.size(), 2u);
  EXPECT_EQ(r.latency->reps[0].itl_ms.size(), 3u);
  ASSERT_EQ(r.throughput.size(), 2u);
  EXPECT_EQ(r.throughput[1].batch, 3);
  EXPECT_EQ(r.throughput[1].reps[1].step_ms.size(), 2u);
  ASSERT_EQ(r.prefill.size(), 2u);
  EXPECT_EQ(r.prefill[1].ms.size(), 2u);
  ASSERT_EQ(r.depth.size(), 2u);
  EXPECT_EQ(r.depth[1].depth, 20);
  EXPECT_EQ(r.depth[1].reps[0].step_ms.size(), 3u);
  for (double ms : r.latency->reps[1].itl_ms) EXPECT_GT(ms, 0.0);
  ASSERT_TRUE(r.stability.has_value());
  EXPECT_EQ(r.stability->itl.reps[0].itl_ms.size(), 5u);
  ASSERT_EQ(r.stability->steps.size(), 1u);
  EXPECT_EQ(r.stability->steps[0].reps[1].step_ms.size(), 4u);
  ASSERT_TRUE(r.serving.has_value());
  EXPECT_EQ(r.serving->requests.size(), 5u);
  EXPECT_EQ(r.serving->limits.max_sequences, 3);
  EXPECT_EQ(r.serving->limits.max_step_tokens, 8);
  for (const ServingRequest& q : r.serving->requests) {
    EXPECT_EQ(q.output_tokens, 4);
    EXPECT_EQ(q.itl_ms.size(), 3u);
    EXPECT_LE(q.ttft_ms, q.e2e_ms);
  }
}

}  // namespace
}  // namespace fuselm::bench
