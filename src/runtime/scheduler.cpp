#include "runtime/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace fuselm {

Status SchedulerLimits::validate() const {
  if (max_sequences < 1) return Status::error(str_cat("scheduler: max_sequences must be at least 1, got ", max_sequences));
  if (max_step_tokens < max_sequences)
    return Status::error(str_cat("scheduler: max_step_tokens (", max_step_tokens, ") must be at least max_sequences (",
                                 max_sequences, ") so that every running sequence can decode in one step"));
  if (kv_block_size < 1) return Status::error(str_cat("scheduler: kv_block_size must be at least 1, got ", kv_block_size));
  if (kv_capacity_tokens < kv_block_size)
    return Status::error(str_cat("scheduler: the KV capacity of ", kv_capacity_tokens,
                                 " tokens holds no whole block of ", kv_block_size, " tokens"));
  if (max_sequence_tokens < 0)
    return Status::error(str_cat("scheduler: max_sequence_tokens must be 0 (no limit) or positive, got ",
                                 max_sequence_tokens));
  return Status::ok_status();
}

int StepPlan::tokens() const {
  int n = 0;
  for (const PlannedChunk& c : chunks) n += c.count;
  return n;
}

Scheduler::Scheduler(const SchedulerLimits& limits) : limits_(limits) {
  const Status s = limits.validate();
  FUSELM_CHECK(s.ok(), s.message());
  total_blocks_ = limits.kv_capacity_tokens / limits.kv_block_size;
}

int64_t Scheduler::blocks_for(int64_t prompt_tokens, int64_t max_new_tokens) const {
  const int64_t b = limits_.kv_block_size;
  return (prompt_tokens + max_new_tokens + b - 1) / b;
}

Status Scheduler::add(Request r) {
  if (known_ids_.count(r.id)) return Status::error(str_cat("request ", r.id, ": the id is already in use"));
  if (r.prompt.empty()) return Status::error(str_cat("request ", r.id, ": the prompt is empty (it needs at least one token)"));
  if (r.max_new_tokens < 1)
    return Status::error(str_cat("request ", r.id, ": max_new_tokens must be at least 1, got ", r.max_new_tokens));
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0)
      return Status::error(str_cat("request ", r.id, ": prompt token ", i, " has the negative id ", r.prompt[i]));
  const int64_t length = static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens;
  if (limits_.max_sequence_tokens > 0 && length > limits_.max_sequence_tokens)
    return Status::error(str_cat("request ", r.id, ": ", r.prompt.size(), " prompt + ", r.max_new_tokens,
                                 " new tokens = ", length, ", over the longest sequence the engine takes (",
                                 limits_.max_sequence_tokens, " tokens)"));
  const int64_t blocks = blocks_for(static_cast<int64_t>(r.prompt.size()), r.max_new_tokens);
  if (blocks > total_blocks_)
    return Status::error(str_cat("request ", r.id, ": ", r.prompt.size(), " prompt + ", r.max_new_tokens,
                                 " new tokens need ", blocks, " KV blocks of ", limits_.kv_block_size,
                                 " tokens, more than the whole cache holds (", total_blocks_,
                                 " blocks); it could never run"));
  known_ids_.insert(r.id);
  waiting_.push_back(std::move(r));
  return Status::ok_status();
}

StepPlan Scheduler::plan_step() {
  FUSELM_CHECK(!plan_outstanding_, "scheduler: step ", next_step_ - 1,
               " was planned but not committed; commit it before planning the next");
  // 1. Admission, strictly in arrival order: the first request that does not fit stops it.
  size_t admitted = 0;
  while (admitted < waiting_.size() && running_.size() < static_cast<size_t>(limits_.max_sequences)) {
    Request& r = waiting_[admitted];
    const int64_t blocks = blocks_for(static_cast<int64_t>(r.prompt.size()), r.max_new_tokens);
    if (reserved_blocks_ + blocks > total_blocks_) break;
    reserved_blocks_ += blocks;
    running_.push_back(r.id);
    Active a;
    a.blocks = blocks;
    a.generated.reserve(static_cast<size_t>(r.max_new_tokens));
    a.request = std::move(r);
    active_.emplace(a.request.id, std::move(a));
    ++admitted;
  }
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(admitted));

  StepPlan plan;
  plan.step = next_step_;
  int budget = limits_.max_step_tokens;
  // 2. Decode first. running_ <= max_sequences <= max_step_tokens, so every decoder fits.
  for (int64_t id : running_) {
    const Active& a = active_.at(id);
    if (a.prefilled < static_cast<int>(a.request.prompt.size())) continue;
    const int length = static_cast<int>(a.request.prompt.size() + a.generated.size()) - 1;
    plan.chunks.push_back({id, ChunkKind::Decode, length, 1, false});
    --budget;
  }
  // 3. Prompt chunks with what is left.
  for (int64_t id : running_) {
    if (budget == 0) break;
    const Active& a = active_.at(id);
    const int remaining = static_cast<int>(a.request.prompt.size()) - a.prefilled;
    if (remaining == 0) continue;
    const int take = std::min(remaining, budget);
    plan.chunks.push_back({id, ChunkKind::Prefill, a.prefilled, take, take == remaining});
    budget -= take;
  }
  if (!plan.chunks.empty()) {
    ++next_step_;
    plan_outstanding_ = true;
  }
  return plan;
}

std::span<const int32_t> Scheduler::chunk_tokens(const PlannedChunk& chunk) const {
  auto it = active_.find(chunk.request_id);
  FUSELM_CHECK(it != active_.end(), "scheduler: request ", chunk.request_id, " is not running");
  const Active& a = it->second;
  if (chunk.kind == ChunkKind::Decode) {
    FUSELM_CHECK(!a.generated.empty(), "scheduler: request ", chunk.request_id, " has no token to decode from");
    return {&a.generated.back(), 1};
  }
  FUSELM_CHECK(chunk.start >= 0 && chunk.count >= 1 &&
                   static_cast<size_t>(chunk.start) + chunk.count <= a.request.prompt.size(),
               "scheduler: prefill chunk [", chunk.start, ", +", chunk.count, ") is outside the ",
               a.request.prompt.size(), "-token prompt of request ", chunk.request_id);
  return std::span<const int32_t>(a.request.prompt).subspan(static_cast<size_t>(chunk.start),
                                                            static_cast<size_t>(chunk.count));
}

void Scheduler::commit(const StepPlan& plan, std::span<const int32_t> sampled) {
  FUSELM_CHECK(plan_outstanding_ && plan.step == next_step_ - 1, "scheduler: commit of step ", plan.step,
               ", but the step awaiting its tokens is ",
               plan_outstanding_ ? std::to_string(next_step_ - 1) : std::string("none"));
  FUSELM_CHECK(sampled.size() == plan.chunks.size(), "scheduler: step ", plan.step, " has ", plan.chunks.size(),
               " chunks but ", sampled.size(), " sampled tokens were given");
  plan_outstanding_ = false;
  std::vector<int64_t> done;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const PlannedChunk& c = plan.chunks[i];
    Active& a = active_.at(c.request_id);
    if (c.kind == ChunkKind::Prefill) a.prefilled += c.count;
    if (!c.yields_token()) continue;
    a.generated.push_back(sampled[i]);
    const auto& stops = a.request.stop_tokens;
    const bool stop = std::find(stops.begin(), stops.end(), sampled[i]) != stops.end();
    if (stop || static_cast<int>(a.generated.size()) >= a.request.max_new_tokens) {
      finished_.push_back({c.request_id, std::move(a.generated), stop ? FinishReason::StopToken : FinishReason::Length});
      done.push_back(c.request_id);
    }
  }
  // Finished requests leave in the order above; the rest keep their arrival order.
  for (int64_t id : done) {
    reserved_blocks_ -= active_.at(id).blocks;
    active_.erase(id);
    running_.erase(std::find(running_.begin(), running_.end(), id));
  }
}

std::vector<FinishedRequest> Scheduler::take_finished() {
  std::vector<FinishedRequest> out;
  out.swap(finished_);
  return out;
}

}  // namespace fuselm
