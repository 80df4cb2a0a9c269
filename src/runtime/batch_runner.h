#pragma once
// Continuous batching over an Engine: a Scheduler (runtime/scheduler.h) plans each step; the runner
// creates a sequence when a request's prompt starts, turns the plan into SequenceChunks, submits
// the step (Engine::submit_sample), hands the sampled tokens back to the scheduler, and removes the
// sequences of finished requests. It notes when every token reached the host, for latency metrics.
//
// Steps overlap: before it waits for a step's tokens, the runner plans and submits the next one
// (the scheduler's lookahead), whose decode chunks take the tokens still on their way
// (kPendingToken), so the engine is not idle while the host commits a step. A request a stop token
// ends may then have run one step more, whose token is dropped; its sequence goes once that step is
// back. Not while any request has a repetition penalty (its window needs every token first).
//
// Only the chunk that ends a prompt yields a token: the tokens the engine samples after earlier
// chunks come from a throwaway greedy sampler, so a request's own sampler (its RNG and history)
// sees exactly the calls it would see if the request ran alone.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "core/status.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"

namespace fuselm {

class BatchRunner {
 public:
  using Clock = std::chrono::steady_clock;

  // One generated token, reported right after the step that produced it.
  struct TokenEvent {
    int64_t request_id = 0;
    int32_t token = 0;
    int index = 0;          // 0 = the request's first generated token
    bool finished = false;  // the request's last token
    Clock::time_point time;  // when the step that sampled it returned
  };
  using TokenCallback = std::function<void(const TokenEvent&)>;

  struct Result {
    int64_t id = 0;
    std::vector<int32_t> tokens;  // generated tokens, a stop token included
    FinishReason reason = FinishReason::Length;
    Clock::time_point submitted;
    std::vector<Clock::time_point> token_times;  // one per token: when it was on the host
  };

  // The scheduler limits an engine implies: its KV capacity and block size, its longest sequence,
  // and the given step limits (normally the EngineOptions the engine was made with).
  static SchedulerLimits limits_for(const Engine& engine, int max_sequences, int max_step_tokens);

  // Throws Error when the limits are invalid.
  BatchRunner(Engine& engine, const SchedulerLimits& limits);
  // Removes every sequence still in the engine (also after an engine error, after which the runner
  // cannot go on: the scheduler still waits for the failed step's tokens).
  ~BatchRunner();
  BatchRunner(const BatchRunner&) = delete;
  BatchRunner& operator=(const BatchRunner&) = delete;

  // Queues a request; `sampling` defaults to greedy. Rejects (error status, nothing queued) what the
  // scheduler rejects, and token ids outside the model's vocabulary.
  Status submit(Request request, const SamplingParams& sampling = greedy_sampling());
  // Completes one step (submitting it, and the next one, first as needed); false when nothing was
  // waiting or running. Engine errors propagate as Error.
  bool step(const TokenCallback& on_token = {});
  void run_until_idle(const TokenCallback& on_token = {});

  // Requests finished since the last call, in the order they finished.
  std::vector<Result> take_finished();
  const Scheduler& scheduler() const { return scheduler_; }
  int64_t steps_run() const { return steps_run_; }

  static SamplingParams greedy_sampling();

 private:
  struct Live {
    explicit Live(const SamplingParams& p) : sampler(p) {}
    int seq_id = -1;  // engine sequence, created when its first prompt chunk runs
    SamplerState sampler;
    Clock::time_point submitted;
    std::vector<Clock::time_point> token_times;
    bool finished = false;  // its result is out; it stays while a submitted step still feeds it
  };
  // A step submitted to the engine and not yet waited for.
  struct Submitted {
    StepPlan plan;
    std::vector<SamplerState*> samplers;  // the engine holds these until the wait
  };

  // Plans and submits the next step; false when the plan is empty.
  bool submit_next();
  // Whether the next step may be submitted before the one in flight is committed.
  bool can_look_ahead() const;
  // Removes the finished requests that no submitted step feeds any more.
  void retire_finished();

  Engine& engine_;
  Scheduler scheduler_;
  std::map<int64_t, Live> live_;
  SamplerState discard_;  // samples after prompt chunks that yield no token
  std::vector<Submitted> in_flight_;  // oldest first, at most two
  std::vector<int64_t> retiring_;     // finished requests whose Live entries and sequences remain
  std::vector<SequenceChunk> chunks_;
  std::vector<int32_t> sampled_;
  std::vector<Result> finished_;
  // Live requests with a repetition penalty: each needs every token of its own before its next
  // step is planned, so none is planned ahead while one lives (counted, not looked for per step).
  int penalised_ = 0;
  int64_t steps_run_ = 0;
};

}  // namespace fuselm
