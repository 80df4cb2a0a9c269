#include "runtime/batch_runner.h"

#include <algorithm>
#include <cstdio>

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
  return s;
}

bool BatchRunner::step(const TokenCallback& on_token) {
  const StepPlan plan = scheduler_.plan_step();
  if (plan.empty()) return false;
  chunks_.clear();
  samplers_.clear();
  for (const PlannedChunk& c : plan.chunks) {
    Live& live = live_.at(c.request_id);
    if (live.seq_id < 0) live.seq_id = engine_.add_sequence();
    chunks_.push_back(SequenceChunk{live.seq_id, scheduler_.chunk_tokens(c), false});
    samplers_.push_back(c.yields_token() ? &live.sampler : &discard_);
  }
  discard_.history.clear();
  engine_.forward_sample(chunks_, samplers_, sampled_);
  const Clock::time_point now = Clock::now();
  ++steps_run_;
  FUSELM_CHECK(sampled_.size() == chunks_.size(), "engine returned ", sampled_.size(), " tokens for ", chunks_.size(),
               " chunks");
  scheduler_.commit(plan, sampled_);
  std::vector<FinishedRequest> done = scheduler_.take_finished();

  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const PlannedChunk& c = plan.chunks[i];
    if (!c.yields_token()) continue;
    Live& live = live_.at(c.request_id);
    live.token_times.push_back(now);
    if (on_token) {
      const bool finished = std::any_of(done.begin(), done.end(),
                                        [&](const FinishedRequest& f) { return f.id == c.request_id; });
      on_token({c.request_id, sampled_[i], static_cast<int>(live.token_times.size()) - 1, finished, now});
    }
  }
  for (FinishedRequest& f : done) {
    auto it = live_.find(f.id);
    const int seq_id = it->second.seq_id;
    Result r{f.id, std::move(f.tokens), f.reason, it->second.submitted, std::move(it->second.token_times)};
    live_.erase(it);
    engine_.remove_sequence(seq_id);
    finished_.push_back(std::move(r));
  }
  return true;
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
