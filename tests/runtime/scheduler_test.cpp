// The continuous-batching scheduler on its own: admission, decode-first, the token budget, chunked
// prefill, KV reservation, rejections, and that the same requests give the same step plans.
#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"

namespace fuselm {
namespace {

SchedulerLimits limits(int max_sequences, int max_step_tokens, int64_t kv_tokens, int block) {
  SchedulerLimits l;
  l.max_sequences = max_sequences;
  l.max_step_tokens = max_step_tokens;
  l.kv_capacity_tokens = kv_tokens;
  l.kv_block_size = block;
  return l;
}

Request request(int64_t id, int prompt_len, int max_new, std::vector<int32_t> stops = {}) {
  Request r;
  r.id = id;
  for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(static_cast<int32_t>(id * 100 + i));
  r.max_new_tokens = max_new;
  r.stop_tokens = std::move(stops);
  return r;
}

// A token that depends only on the request and how far it is: what a greedy engine would give.
int32_t fake_token(const PlannedChunk& c) { return static_cast<int32_t>(1000 + c.request_id * 10 + c.start + c.count); }

StepPlan plan_and_commit(Scheduler& s) {
  StepPlan plan = s.plan_step();
  std::vector<int32_t> sampled;
  for (const PlannedChunk& c : plan.chunks) sampled.push_back(fake_token(c));
  if (!plan.empty()) s.commit(plan, sampled);
  return plan;
}

std::string describe(const StepPlan& p) {
  std::string s;
  for (const PlannedChunk& c : p.chunks)
    s += std::to_string(c.request_id) + (c.kind == ChunkKind::Decode ? "D" : "P") + std::to_string(c.start) + "+" +
         std::to_string(c.count) + (c.last_prefill_chunk ? "!" : "") + " ";
  return s;
}

TEST(Scheduler, RejectsInvalidLimits) {
  EXPECT_FALSE(limits(0, 8, 64, 16).validate().ok());
  const Status budget = limits(8, 4, 64, 16).validate();
  ASSERT_FALSE(budget.ok());
  EXPECT_NE(budget.message().find("every running sequence can decode"), std::string::npos) << budget.message();
  EXPECT_FALSE(limits(1, 8, 8, 16).validate().ok());  // not one whole block
  EXPECT_FALSE(limits(1, 8, 64, 0).validate().ok());
  EXPECT_THROW(Scheduler(limits(8, 4, 64, 16)), Error);
  EXPECT_TRUE(limits(1, 1, 16, 16).validate().ok());
}

TEST(Scheduler, RejectsRequestsThatCanNeverRun) {
  SchedulerLimits l = limits(4, 64, 64, 16);  // 4 blocks of 16 tokens
  l.max_sequence_tokens = 40;
  Scheduler s(l);
  EXPECT_FALSE(s.add(request(1, 0, 4)).ok());  // empty prompt
  EXPECT_FALSE(s.add(request(2, 4, 0)).ok());  // nothing to generate
  Request negative = request(3, 4, 4);
  negative.prompt[2] = -5;
  EXPECT_FALSE(s.add(negative).ok());
  const Status too_long = s.add(request(4, 30, 20));  // 50 tokens, over the 40-token sequence limit
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("40"), std::string::npos) << too_long.message();

  l.max_sequence_tokens = 0;
  Scheduler t(l);
  const Status too_big = t.add(request(5, 60, 10));  // 70 tokens = 5 blocks of a 4-block cache
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.message().find("5 KV blocks"), std::string::npos) << too_big.message();
  EXPECT_NE(too_big.message().find("never run"), std::string::npos) << too_big.message();
  ASSERT_TRUE(t.add(request(6, 60, 4)).ok());  // exactly 4 blocks: fits
  EXPECT_FALSE(t.add(request(6, 4, 4)).ok());  // duplicate id
  // Rejected requests left nothing behind: only request 6 runs, and the scheduler drains.
  EXPECT_EQ(t.waiting_count(), 1u);
  int steps = 0;
  while (!plan_and_commit(t).empty()) ++steps;
  EXPECT_EQ(steps, 1 + 3);  // the 60-token prompt in one step, then 3 decode steps
  EXPECT_TRUE(t.idle());
  EXPECT_EQ(t.reserved_blocks(), 0);
}

TEST(Scheduler, DecodeFirstThenPrefillWithinTheTokenBudget) {
  Scheduler s(limits(4, 8, 1024, 4));
  ASSERT_TRUE(s.add(request(1, 6, 3)).ok());
  ASSERT_TRUE(s.add(request(2, 10, 2)).ok());
  // Step 0: request 1's whole prompt, then 2 of request 2's 10 prompt tokens (budget 8).
  StepPlan p0 = plan_and_commit(s);
  EXPECT_EQ(describe(p0), "1P0+6! 2P0+2 ");
  EXPECT_EQ(p0.tokens(), 8);
  // Step 1: request 1 decodes first (1 token); the 7 left go to request 2's prompt.
  EXPECT_EQ(describe(plan_and_commit(s)), "1D6+1 2P2+7 ");
  // Step 2: request 1 decodes its third and last token; request 2's prompt ends.
  EXPECT_EQ(describe(plan_and_commit(s)), "1D7+1 2P9+1! ");
  EXPECT_EQ(s.running_count(), 1u);
  std::vector<FinishedRequest> done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, 1);
  EXPECT_EQ(done[0].reason, FinishReason::Length);
  // Tokens: after the prompt (0 + 6), after decoding at 6 (6 + 1), at 7 (7 + 1).
  EXPECT_EQ(done[0].tokens, (std::vector<int32_t>{1016, 1017, 1018}));
  EXPECT_EQ(describe(plan_and_commit(s)), "2D10+1 ");
  EXPECT_TRUE(plan_and_commit(s).empty());
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.take_finished().size(), 1u);
}

TEST(Scheduler, ChunkedPrefillFeedsThePromptInOrder) {
  Scheduler s(limits(2, 8, 1024, 16));
  Request r = request(7, 20, 2);
  const std::vector<int32_t> prompt = r.prompt;
  ASSERT_TRUE(s.add(std::move(r)).ok());
  std::vector<int32_t> fed;
  std::vector<int> counts;
  for (int step = 0; step < 3; ++step) {
    StepPlan p = s.plan_step();
    ASSERT_EQ(p.chunks.size(), 1u);
    const PlannedChunk& c = p.chunks[0];
    EXPECT_EQ(c.kind, ChunkKind::Prefill);
    EXPECT_EQ(c.last_prefill_chunk, step == 2);
    EXPECT_EQ(c.yields_token(), step == 2);
    const auto tokens = s.chunk_tokens(c);
    fed.insert(fed.end(), tokens.begin(), tokens.end());
    counts.push_back(c.count);
    s.commit(p, std::vector<int32_t>{42});
  }
  EXPECT_EQ(counts, (std::vector<int>{8, 8, 4}));
  EXPECT_EQ(fed, prompt);
  // The decode step feeds back the token the last prompt chunk yielded.
  StepPlan d = s.plan_step();
  ASSERT_EQ(d.chunks.size(), 1u);
  EXPECT_EQ(d.chunks[0].kind, ChunkKind::Decode);
  EXPECT_EQ(d.chunks[0].start, 20);
  EXPECT_EQ(std::vector<int32_t>(s.chunk_tokens(d.chunks[0]).begin(), s.chunk_tokens(d.chunks[0]).end()),
            std::vector<int32_t>{42});
  s.commit(d, std::vector<int32_t>{43});
  ASSERT_EQ(s.take_finished()[0].tokens, (std::vector<int32_t>{42, 43}));  // the tokens of non-final chunks are dropped
}

TEST(Scheduler, AdmissionReservesTheWorstCaseInArrivalOrder) {
  Scheduler s(limits(8, 64, 32, 8));  // 4 blocks of 8 tokens
  ASSERT_TRUE(s.add(request(1, 10, 6)).ok());  // 16 tokens: 2 blocks
  ASSERT_TRUE(s.add(request(2, 9, 8)).ok());   // 17 tokens: 3 blocks, does not fit beside request 1
  ASSERT_TRUE(s.add(request(3, 1, 1)).ok());   // 1 block would fit, but may not overtake request 2
  StepPlan p = plan_and_commit(s);
  EXPECT_EQ(describe(p), "1P0+10! ");
  EXPECT_EQ(s.reserved_blocks(), 2);
  EXPECT_EQ(s.waiting_count(), 2u);
  // Request 1 runs its 6 tokens (5 more steps), then frees its 2 blocks; request 2 gets 3, and
  // request 3's block is the last one.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(describe(plan_and_commit(s)), "1D" + std::to_string(10 + i) + "+1 ");
  EXPECT_EQ(s.reserved_blocks(), 0);
  EXPECT_EQ(describe(plan_and_commit(s)), "2P0+9! 3P0+1! ");
  EXPECT_EQ(s.reserved_blocks(), 3);  // request 3 finished at once (1 token); its block is free again
  EXPECT_TRUE(s.take_finished().size() == 2u);
}

TEST(Scheduler, SequenceSlotsBoundAdmission) {
  Scheduler s(limits(2, 64, 1024, 16));
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(s.add(request(id, 4, 2)).ok());
  EXPECT_EQ(describe(plan_and_commit(s)), "1P0+4! 2P0+4! ");
  EXPECT_EQ(s.waiting_count(), 1u);
  EXPECT_EQ(describe(plan_and_commit(s)), "1D4+1 2D4+1 ");
  // Both finished: request 3 gets a slot.
  EXPECT_EQ(describe(plan_and_commit(s)), "3P0+4! ");
}

TEST(Scheduler, StopTokenEndsARequestEarly) {
  Scheduler s(limits(2, 16, 1024, 16));
  ASSERT_TRUE(s.add(request(1, 3, 10, {1004})).ok());  // a stop token the fake never yields
  plan_and_commit(s);                                   // the prompt: yields 1013
  plan_and_commit(s);                                   // decode at 3: yields 1014
  EXPECT_TRUE(s.take_finished().empty());
  EXPECT_EQ(s.running_count(), 1u);

  Scheduler t(limits(2, 16, 1024, 16));
  ASSERT_TRUE(t.add(request(1, 3, 10, {1014})).ok());
  plan_and_commit(t);
  plan_and_commit(t);  // yields 1014, a stop token: finished after 2 of its 10 tokens
  std::vector<FinishedRequest> done = t.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].reason, FinishReason::StopToken);
  EXPECT_EQ(done[0].tokens, (std::vector<int32_t>{1013, 1014}));
  EXPECT_TRUE(t.idle());
}

TEST(Scheduler, CommitChecksItsPlan) {
  Scheduler s(limits(2, 16, 1024, 16));
  ASSERT_TRUE(s.add(request(1, 3, 4)).ok());
  StepPlan p = s.plan_step();
  // Planned while the first waits for its commit: the decode of the token that one will yield.
  StepPlan ahead = s.plan_step();
  ASSERT_EQ(ahead.chunks.size(), 1u);
  EXPECT_EQ(ahead.chunks[0].kind, ChunkKind::Decode);
  EXPECT_TRUE(ahead.chunks[0].input_pending);
  EXPECT_THROW(s.chunk_tokens(ahead.chunks[0]), Error);  // that token is not committed yet
  EXPECT_THROW(s.plan_step(), Error);  // a third outstanding plan
  EXPECT_THROW(s.commit(ahead, std::vector<int32_t>{1}), Error);  // not the oldest
  EXPECT_THROW(s.commit(p, std::vector<int32_t>{}), Error);
  StepPlan stale = p;
  stale.step = 5;
  EXPECT_THROW(s.commit(stale, std::vector<int32_t>{1}), Error);
  s.commit(p, std::vector<int32_t>{1});
  EXPECT_THROW(s.commit(p, std::vector<int32_t>{1}), Error);  // already committed
  s.commit(ahead, std::vector<int32_t>{2});
}

// A mixed workload (short and long prompts, stop tokens, more requests than slots or blocks), added
// in two waves between steps; returns every plan.
std::vector<std::string> run_workload() {
  Scheduler s(limits(3, 12, 96, 8));
  std::vector<std::string> plans;
  auto add_wave = [&](int first_id) {
    for (int i = 0; i < 6; ++i) {
      const int id = first_id + i;
      const int prompt = 1 + (id * 7) % 23, max_new = 1 + (id * 5) % 9;
      EXPECT_TRUE(s.add(request(id, prompt, max_new, id % 4 == 0 ? std::vector<int32_t>{1000 + id * 10 + prompt + 2}
                                                                 : std::vector<int32_t>{}))
                      .ok());
    }
  };
  add_wave(1);
  for (int step = 0;; ++step) {
    if (step == 4) add_wave(100);
    StepPlan p = plan_and_commit(s);
    if (p.empty()) break;
    plans.push_back(std::to_string(p.step) + ": " + describe(p));
    EXPECT_LE(p.tokens(), 12);
    EXPECT_LE(p.chunks.size(), 3u);
    EXPECT_LE(s.reserved_blocks(), s.total_blocks());
  }
  EXPECT_TRUE(s.idle());
  return plans;
}

// The same workload with every step planned while the one before it waits for its commit: every
// request finishes with the tokens and reason it had in lockstep (a token after a stop token is
// dropped), and no more than the cache is ever reserved.
TEST(Scheduler, PlanningAheadFinishesEveryRequestAsInLockstep) {
  auto run = [](bool ahead) {
    Scheduler s(limits(3, 12, 96, 8));
    for (int id = 1; id <= 12; ++id) {
      const int prompt = 1 + (id * 7) % 23, max_new = 1 + (id * 5) % 9;
      EXPECT_TRUE(s.add(request(id, prompt, max_new, id % 4 == 0 ? std::vector<int32_t>{1000 + id * 10 + prompt + 2}
                                                                 : std::vector<int32_t>{}))
                      .ok());
    }
    std::vector<StepPlan> outstanding;
    std::map<int64_t, FinishedRequest> finished;
    auto commit_oldest = [&] {
      const StepPlan p = outstanding.front();
      outstanding.erase(outstanding.begin());
      std::vector<int32_t> sampled;
      for (const PlannedChunk& c : p.chunks) sampled.push_back(fake_token(c));
      s.commit(p, sampled);
      for (FinishedRequest& f : s.take_finished()) finished[f.id] = f;
    };
    for (int guard = 0; guard < 1000; ++guard) {
      while (static_cast<int>(outstanding.size()) < (ahead ? 2 : 1)) {
        StepPlan p = s.plan_step();
        if (p.empty()) break;
        outstanding.push_back(p);
      }
      EXPECT_LE(s.reserved_blocks(), s.total_blocks());
      if (outstanding.empty()) break;
      commit_oldest();
    }
    EXPECT_TRUE(s.idle());
    EXPECT_EQ(s.reserved_blocks(), 0);
    return finished;
  };
  const auto lockstep = run(false), ahead = run(true);
  ASSERT_EQ(lockstep.size(), 12u);
  ASSERT_EQ(ahead.size(), 12u);
  int stopped = 0;
  for (const auto& [id, f] : lockstep) {
    SCOPED_TRACE("request " + std::to_string(id));
    EXPECT_EQ(ahead.at(id).tokens, f.tokens);
    EXPECT_EQ(ahead.at(id).reason, f.reason);
    stopped += f.reason == FinishReason::StopToken;
  }
  EXPECT_GT(stopped, 0);
}

TEST(Scheduler, SameRequestsGiveIdenticalPlans) {
  const std::vector<std::string> first = run_workload(), second = run_workload();
  ASSERT_GT(first.size(), 10u);
  EXPECT_EQ(first, second);
}

}  // namespace
}  // namespace fuselm
