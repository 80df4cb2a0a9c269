// The batch runner over the CPU engine and a tiny in-memory model: continuous batching with
// chunked prefill and queued requests gives every request the tokens it gets when run alone.
#include "runtime/batch_runner.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <map>

#include "core/error.h"
#include "runtime/cpu_engine.h"
#include "runtime/tiny_model.h"

namespace fuselm {
namespace {

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + salt * 11 + 5) % 97);
  return ids;
}

// The request alone: its whole prompt in one call, then one token per call.
std::vector<int32_t> generate_alone(Engine& engine, std::span<const int32_t> tokens, int max_new,
                                    const SamplingParams& sampling) {
  const int seq = engine.add_sequence();
  SamplerState sampler(sampling);
  SamplerState* samplers[] = {&sampler};
  std::vector<int32_t> out, sampled;
  SequenceChunk chunk{seq, tokens, false};
  for (int i = 0; i < max_new; ++i) {
    engine.forward_sample({&chunk, 1}, samplers, sampled);
    out.push_back(sampled[0]);
    chunk.tokens = std::span<const int32_t>(&out.back(), 1);
  }
  engine.remove_sequence(seq);
  return out;
}

struct Case {
  int prompt_len, max_new;
  SamplingParams sampling;
};

std::vector<Case> mixed_cases() {
  std::vector<Case> cases;
  for (int i = 0; i < 7; ++i) {
    SamplingParams p = BatchRunner::greedy_sampling();
    if (i == 3 || i == 5) {  // seeded sampling too: the runner must not advance their RNG for prompt chunks
      p.temperature = 0.9f;
      p.top_p = 0.9f;
      p.seed = 17 + i;
    }
    cases.push_back({3 + (i * 9) % 19, 2 + (i * 5) % 7, p});
  }
  return cases;
}

class BatchRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    omp_set_num_threads(1);
    model_ = test::tiny_model();
    EngineOptions eo;
    eo.max_batch = 3;
    eo.max_prefill_tokens = 8;
    engine_ = make_cpu_engine(*model_, eo);
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(BatchRunnerTest, EveryRequestGetsTheTokensItGetsAlone) {
  const std::vector<Case> cases = mixed_cases();
  auto single = make_cpu_engine(*model_, {});  // takes each prompt in one call
  std::vector<std::vector<int32_t>> alone;
  for (size_t i = 0; i < cases.size(); ++i)
    alone.push_back(generate_alone(*single, prompt(cases[i].prompt_len, static_cast<int>(i)), cases[i].max_new,
                                   cases[i].sampling));

  // 3 sequences and 8 tokens a step, KV for 64 tokens in blocks of 4: prompts are chunked, requests
  // queue for slots and for blocks.
  SchedulerLimits limits = BatchRunner::limits_for(*engine_, 3, 8);
  limits.kv_capacity_tokens = 64;
  limits.kv_block_size = 4;
  BatchRunner runner(*engine_, limits);
  for (size_t i = 0; i < cases.size(); ++i) {
    Request r{.id = 100 + static_cast<int64_t>(i),
              .prompt = prompt(cases[i].prompt_len, static_cast<int>(i)),
              .max_new_tokens = cases[i].max_new};
    ASSERT_TRUE(runner.submit(std::move(r), cases[i].sampling).ok());
  }
  std::map<int64_t, std::vector<int32_t>> streamed;
  std::map<int64_t, int> finished_events;
  runner.run_until_idle([&](const BatchRunner::TokenEvent& e) {
    EXPECT_EQ(e.index, static_cast<int>(streamed[e.request_id].size()));
    streamed[e.request_id].push_back(e.token);
    if (e.finished) ++finished_events[e.request_id];
  });
  EXPECT_TRUE(runner.scheduler().idle());
  EXPECT_GT(runner.steps_run(), 10);

  std::vector<BatchRunner::Result> results = runner.take_finished();
  ASSERT_EQ(results.size(), cases.size());
  for (const BatchRunner::Result& r : results) {
    const size_t i = static_cast<size_t>(r.id - 100);
    EXPECT_EQ(r.tokens, alone[i]) << "request " << r.id;
    EXPECT_EQ(streamed[r.id], r.tokens) << "request " << r.id;
    EXPECT_EQ(finished_events[r.id], 1) << "request " << r.id;
    EXPECT_EQ(r.reason, FinishReason::Length);
    ASSERT_EQ(r.token_times.size(), r.tokens.size());
    EXPECT_LE(r.submitted, r.token_times.front());
    for (size_t k = 1; k < r.token_times.size(); ++k) EXPECT_LE(r.token_times[k - 1], r.token_times[k]);
  }
}

TEST_F(BatchRunnerTest, StopTokensEndRequestsAndSequencesAreFreed) {
  const std::vector<int32_t> p = prompt(5, 1);
  const std::vector<int32_t> alone = generate_alone(*engine_, p, 6, BatchRunner::greedy_sampling());
  BatchRunner runner(*engine_, BatchRunner::limits_for(*engine_, 3, 8));
  const Request r{.id = 1, .prompt = p, .max_new_tokens = 6, .stop_tokens = {alone[1]}};
  ASSERT_TRUE(runner.submit(r).ok());
  runner.run_until_idle();
  std::vector<BatchRunner::Result> results = runner.take_finished();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].reason, FinishReason::StopToken);
  EXPECT_EQ(results[0].tokens, std::vector<int32_t>(alone.begin(), alone.begin() + 2));
  // The sequence was removed: the engine's next one gets a fresh id and the old one is gone.
  EXPECT_THROW(engine_->sequence_length(engine_->add_sequence() - 1), Error);
}

// The runner submits the next step before it waits for one (the engine holds it after step()
// returns), except while a request has a repetition penalty; either way a request gets what it
// gets alone.
TEST_F(BatchRunnerTest, StepsOverlapUnlessAPenaltyNeedsEveryToken) {
  for (float penalty : {1.0f, 1.3f}) {
    SCOPED_TRACE("repetition penalty " + std::to_string(penalty));
    SamplingParams sampling = BatchRunner::greedy_sampling();
    sampling.repetition_penalty = penalty;
    const std::vector<int32_t> p = prompt(6, 4);
    const std::vector<int32_t> alone = generate_alone(*engine_, p, 5, sampling);
    BatchRunner runner(*engine_, BatchRunner::limits_for(*engine_, 3, 8));
    const Request r{.id = 7, .prompt = p, .max_new_tokens = 5};
    ASSERT_TRUE(runner.submit(r, sampling).ok());
    ASSERT_TRUE(runner.step());
    EXPECT_EQ(engine_->steps_in_flight(), penalty == 1.0f ? 1 : 0);
    runner.run_until_idle();
    EXPECT_EQ(engine_->steps_in_flight(), 0);
    std::vector<BatchRunner::Result> results = runner.take_finished();
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].tokens, alone);
  }
}

// Once the penalised request is finished and retired, the next steps overlap again, and the other
// request still gets what it gets alone.
TEST_F(BatchRunnerTest, StepsOverlapAgainOnceThePenalisedRequestIsGone) {
  SamplingParams penalised = BatchRunner::greedy_sampling();
  penalised.repetition_penalty = 1.3f;
  const std::vector<int32_t> p1 = prompt(4, 2), p2 = prompt(4, 5);
  const std::vector<int32_t> alone = generate_alone(*engine_, p2, 12, BatchRunner::greedy_sampling());
  BatchRunner runner(*engine_, BatchRunner::limits_for(*engine_, 3, 8));
  const Request short_one{.id = 1, .prompt = p1, .max_new_tokens = 2};
  const Request long_one{.id = 2, .prompt = p2, .max_new_tokens = 12};
  ASSERT_TRUE(runner.submit(short_one, penalised).ok());
  ASSERT_TRUE(runner.submit(long_one).ok());
  ASSERT_TRUE(runner.step());
  EXPECT_EQ(engine_->steps_in_flight(), 0);  // request 1 needs each of its tokens first
  std::vector<BatchRunner::Result> results;
  while (results.empty()) {
    ASSERT_TRUE(runner.step());
    results = runner.take_finished();
  }
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].id, 1);
  ASSERT_TRUE(runner.step());
  EXPECT_EQ(engine_->steps_in_flight(), 1);
  runner.run_until_idle();
  results = runner.take_finished();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].tokens, alone);
}

TEST_F(BatchRunnerTest, RejectsWhatCanNeverRun) {
  BatchRunner runner(*engine_, BatchRunner::limits_for(*engine_, 3, 8));
  Request outside;
  outside.id = 1;
  outside.prompt = {5, 97};  // the tiny model's vocabulary is 0..96
  const Status s = runner.submit(outside);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("vocabulary of 97"), std::string::npos) << s.message();
  Request too_long;
  too_long.id = 2;
  too_long.prompt = prompt(60, 0);
  too_long.max_new_tokens = 10;  // 70 tokens; the tiny model holds 64 positions
  EXPECT_FALSE(runner.submit(too_long).ok());
  EXPECT_FALSE(runner.step());
  EXPECT_THROW(BatchRunner(*engine_, BatchRunner::limits_for(*engine_, 3, 2)), Error);  // 3 decoders, 2 tokens
}

}  // namespace
}  // namespace fuselm
