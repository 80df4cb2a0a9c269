#include "runtime/batch_runner.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "core/error.h"

namespace fuselm {

SamplingParams BatchRunner::greedy_sampling() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

SchedulerLimits BatchRunner::limits_for(const Engine& engine, int max_sequences, int max_step_tokens) {
  const KvCapacity kv = engine.kv_capacity();
  SchedulerLimits l;
  l.max_sequences = max_sequences;
  l.max_step_tokens = max_step_tokens;
  l.kv_capacity_tokens = kv.tokens;
  l.kv_block_size = kv.block_size;
  l.max_sequence_tokens = kv.max_sequence_tokens;
  return l;
}

BatchRunner::BatchRunner(Engine& engine, const SchedulerLimits& limits)
    : engine_(engine), scheduler_(limits), discard_(greedy_sampling()) {}

BatchRunner::~BatchRunner() {
  // The engine holds the samplers of submitted steps until their waits.
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    try {
      std::vector<int32_t> unused;
      engine_.wait_sample(unused);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: waiting for a submitted step failed: %s\n", e.what());
      break;
    }
  }
  for (auto& [id, live] : live_) {
    if (live.seq_id < 0) continue;
    try {
      engine_.remove_sequence(live.seq_id);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: removing the sequence of request %lld failed: %s\n", static_cast<long long>(id),
                   e.what());
    }
  }
}

Status BatchRunner::submit(Request request, const SamplingParams& sampling) {
  const int vocab = engine_.config().vocab_size;
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] >= vocab)
      return Status::error(str_cat("request ", request.id, ": prompt token ", i, " is ", request.prompt[i],
                                   ", outside the model's vocabulary of ", vocab));
  const int64_t id = request.id;
  Status s = scheduler_.add(std::move(request));
  if (!s.ok()) return s;
  Live& live = live_.emplace(id, Live(sampling)).first->second;
  live.submitted = Clock::now();
  if (sampling.penalised()) ++penalised_;
  return s;
}

bool BatchRunner::submit_next() {
  const StepPlan plan = scheduler_.plan_step();
  if (plan.empty()) return false;
  static const int32_t pending = kPendingToken;
  Submitted step{plan, {}};
  chunks_.clear();
  for (const PlannedChunk& c : plan.chunks) {
    Live& live = live_.at(c.request_id);
    if (live.seq_id < 0) live.seq_id = engine_.add_sequence();
    const std::span<const int32_t> tokens =
        c.input_pending ? std::span<const int32_t>(&pending, 1) : scheduler_.chunk_tokens(c);
    chunks_.push_back(SequenceChunk{live.seq_id, tokens, false});
    step.samplers.push_back(c.yields_token() ? &live.sampler : &discard_);
  }
  engine_.submit_sample(chunks_, step.samplers);
  in_flight_.push_back(std::move(step));
  return true;
}

static_assert(Scheduler::kMaxOutstanding == Engine::kMaxStepsInFlight,
              "the runner keeps as many steps outstanding in the scheduler as in flight in the engine");

bool BatchRunner::can_look_ahead() const { return in_flight_.size() == 1 && penalised_ == 0; }

bool BatchRunner::step(const TokenCallback& on_token) {
  if (in_flight_.empty() && !submit_next()) return false;
  if (can_look_ahead()) submit_next();
  engine_.wait_sample(sampled_);
  const Clock::time_point now = Clock::now();
  const Submitted done_step = std::move(in_flight_.front());
  in_flight_.erase(in_flight_.begin());
  const StepPlan& plan = done_step.plan;
  ++steps_run_;
  FUSELM_CHECK(sampled_.size() == plan.chunks.size(), "engine returned ", sampled_.size(), " tokens for ",
               plan.chunks.size(), " chunks");
  discard_.history.clear();
  scheduler_.commit(plan, sampled_);
  std::vector<FinishedRequest> done = scheduler_.take_finished();

  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const PlannedChunk& c = plan.chunks[i];
    if (!c.yields_token()) continue;
    Live& live = live_.at(c.request_id);
    if (live.finished) continue;  // a step after its stop token: dropped
    live.token_times.push_back(now);
    if (on_token) {
      const bool finished = std::any_of(done.begin(), done.end(),
                                        [&](const FinishedRequest& f) { return f.id == c.request_id; });
      on_token({c.request_id, sampled_[i], static_cast<int>(live.token_times.size()) - 1, finished, now});
    }
  }
  for (FinishedRequest& f : done) {
    Live& live = live_.at(f.id);
    live.finished = true;
    retiring_.push_back(f.id);
    finished_.push_back(Result{f.id, std::move(f.tokens), f.reason, live.submitted, std::move(live.token_times)});
  }
  retire_finished();
  return true;
}

void BatchRunner::retire_finished() {
  for (size_t i = 0; i < retiring_.size();) {
    const int64_t id = retiring_[i];
    const bool fed = std::any_of(in_flight_.begin(), in_flight_.end(), [&](const Submitted& s) {
      return std::any_of(s.plan.chunks.begin(), s.plan.chunks.end(),
                         [&](const PlannedChunk& c) { return c.request_id == id; });
    });
    if (fed) {
      ++i;
      continue;
    }
    retiring_.erase(retiring_.begin() + static_cast<std::ptrdiff_t>(i));
    const auto it = live_.find(id);
    const int seq_id = it->second.seq_id;
    if (it->second.sampler.params.penalised()) --penalised_;
    live_.erase(it);
    engine_.remove_sequence(seq_id);
  }
}

void BatchRunner::run_until_idle(const TokenCallback& on_token) {
  while (step(on_token)) {
  }
}

std::vector<BatchRunner::Result> BatchRunner::take_finished() {
  std::vector<Result> out;
  out.swap(finished_);
  return out;
}

}  // namespace fuselm
