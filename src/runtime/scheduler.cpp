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
  FUSELM_CHECK(static_cast<int>(outstanding_.size()) < kMaxOutstanding, "scheduler: steps ", outstanding_.front(),
               " to ", outstanding_.back(), " were planned but not committed; commit the oldest before planning");
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
  // 2. Decode first. running_ <= max_sequences <= max_step_tokens, so every decoder fits. A request
  // decodes once its prompt is planned and it has a token, committed or outstanding, to decode from,
  // unless the outstanding tokens already make max_new_tokens.
  for (int64_t id : running_) {
    Active& a = active_.at(id);
    const int produced = static_cast<int>(a.generated.size()) + a.in_flight;
    if (a.prefilled < static_cast<int>(a.request.prompt.size()) || produced == 0 ||
        produced >= a.request.max_new_tokens)
      continue;
    const int length = static_cast<int>(a.request.prompt.size()) + produced - 1;
    PlannedChunk c{id, ChunkKind::Decode, length, 1, false};
    c.input_pending = a.in_flight > 0;
    plan.chunks.push_back(c);
    ++a.in_flight;
    --budget;
  }
  // 3. Prompt chunks with what is left.
  for (int64_t id : running_) {
    if (budget == 0) break;
    Active& a = active_.at(id);
    const int remaining = static_cast<int>(a.request.prompt.size()) - a.prefilled;
    if (remaining == 0) continue;
    const int take = std::min(remaining, budget);
    plan.chunks.push_back({id, ChunkKind::Prefill, a.prefilled, take, take == remaining});
    a.prefilled += take;
    if (take == remaining) ++a.in_flight;
    budget -= take;
  }
  if (!plan.chunks.empty()) outstanding_.push_back(next_step_++);
  return plan;
}

std::span<const int32_t> Scheduler::chunk_tokens(const PlannedChunk& chunk) const {
  auto it = active_.find(chunk.request_id);
  FUSELM_CHECK(it != active_.end(), "scheduler: request ", chunk.request_id, " is not running");
  const Active& a = it->second;
  if (chunk.kind == ChunkKind::Decode) {
    FUSELM_CHECK(!chunk.input_pending, "scheduler: the input of request ", chunk.request_id,
                 "'s decode chunk is the outstanding step's token, which is not committed yet");
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
  FUSELM_CHECK(!outstanding_.empty() && plan.step == outstanding_.front(), "scheduler: commit of step ", plan.step,
               ", but the oldest step awaiting its tokens is ",
               outstanding_.empty() ? std::string("none") : std::to_string(outstanding_.front()));
  FUSELM_CHECK(sampled.size() == plan.chunks.size(), "scheduler: step ", plan.step, " has ", plan.chunks.size(),
               " chunks but ", sampled.size(), " sampled tokens were given");
  outstanding_.erase(outstanding_.begin());
  std::vector<int64_t> released;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const PlannedChunk& c = plan.chunks[i];
    if (!c.yields_token()) continue;
    Active& a = active_.at(c.request_id);
    --a.in_flight;
    if (a.finished) {  // a token after the stop token that ended it: ignored
      if (a.in_flight == 0) released.push_back(c.request_id);
      continue;
    }
    a.generated.push_back(sampled[i]);
    const auto& stops = a.request.stop_tokens;
    const bool stop = std::find(stops.begin(), stops.end(), sampled[i]) != stops.end();
    if (stop || static_cast<int>(a.generated.size()) >= a.request.max_new_tokens) {
      finished_.push_back({c.request_id, std::move(a.generated), stop ? FinishReason::StopToken : FinishReason::Length});
      a.finished = true;
      running_.erase(std::find(running_.begin(), running_.end(), c.request_id));
      if (a.in_flight == 0) released.push_back(c.request_id);
    }
  }
  // A finished request keeps its reservation until no outstanding step feeds it: its sequence holds
  // the cache until then.
  for (int64_t id : released) {
    reserved_blocks_ -= active_.at(id).blocks;
    active_.erase(id);
  }
}

std::vector<FinishedRequest> Scheduler::take_finished() {
  std::vector<FinishedRequest> out;
  out.swap(finished_);
  return out;
}

}  // namespace fuselm
