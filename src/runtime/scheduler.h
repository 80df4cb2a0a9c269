#pragma once
// A continuous-batching scheduler: which requests run in each engine step, and how many tokens
// each gets. Pure host logic over request ids and token counts; it knows nothing of an Engine
// (runtime/batch_runner.h drives one with it).
//
// Policy, first come first served:
//   1. Admit waiting requests in arrival order while a sequence slot is free (at most
//      max_sequences admitted at once) and the KV cache can reserve the request's worst case,
//      ceil((prompt + max_new_tokens) / kv_block_size) blocks. A request that does not fit waits,
//      and so does every request behind it (no overtaking, so none starves). Because the worst
//      case is reserved up front, a running request never runs out of cache: no preemption.
//   2. Decode first: every admitted request whose prompt is done gets one token.
//   3. The rest of the step's token budget goes to prompt chunks of admitted requests in arrival
//      order (chunked prefill: a prompt longer than what is left spreads over several steps).
//      Only the chunk that ends a prompt yields a token (the request's first).
//
// Lookahead: a step may be planned while the one before it waits for its tokens (so that a runner
// keeps the engine busy while it reads them). That plan counts each token the outstanding step will
// yield: a request that will then have max_new_tokens gets no more; a decode chunk's input is then
// the outstanding step's token (input_pending). A stop token is only known at the commit: a
// request it ends may already have a chunk in the next plan, whose token the commit ignores; its
// KV reservation is released at that plan's commit, when its sequence is no longer in use.
//
// Determinism: the plan of a step is a pure function of the scheduler's state, which depends only
// on the requests added (in their order), the tokens committed for earlier steps and which steps
// were planned ahead of a commit. Nothing reads
// a clock, iterates a hash map, or compares pointers; with greedy sampling the same requests give
// the same plans, step for step.
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "core/status.h"

namespace fuselm {

struct SchedulerLimits {
  int max_sequences = 256;         // requests admitted at once = most chunks in a step (engine max_batch)
  int max_step_tokens = 8192;      // tokens in one step, decode and prefill together (max_prefill_tokens)
  int64_t kv_capacity_tokens = 0;  // the KV cache, in tokens (a whole number of blocks is used)
  int kv_block_size = 16;          // tokens per KV block
  int max_sequence_tokens = 0;     // longest sequence the engine takes; 0 = only the KV capacity bounds it

  // Error naming the bad limit, or ok.
  Status validate() const;
};

struct Request {
  int64_t id = 0;  // chosen by the caller, unique among the requests of one scheduler
  std::vector<int32_t> prompt;
  int max_new_tokens = 1;
  std::vector<int32_t> stop_tokens;  // generation also ends after any of these (e.g. EOS); empty = none
};

enum class ChunkKind { Prefill, Decode };

// One entry of a step plan.
struct PlannedChunk {
  int64_t request_id = 0;
  ChunkKind kind = ChunkKind::Prefill;
  int start = 0;  // tokens of the request already in its sequence (prompt offset for a prefill chunk)
  int count = 0;  // tokens fed this step (1 for decode)
  bool last_prefill_chunk = false;  // ends the prompt, so the step yields the request's first token
  bool input_pending = false;  // decode: the input is the token of the step still waiting for its commit

  bool yields_token() const { return kind == ChunkKind::Decode || last_prefill_chunk; }
};

struct StepPlan {
  int64_t step = 0;  // 0, 1, 2, ... in the order plans were made
  std::vector<PlannedChunk> chunks;  // decode chunks first, then prefill chunks, each in arrival order

  int tokens() const;
  bool empty() const { return chunks.empty(); }
};

enum class FinishReason { Length, StopToken };

struct FinishedRequest {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // generated tokens, the stop token included
  FinishReason reason = FinishReason::Length;
};

class Scheduler {
 public:
  // Throws Error when the limits are invalid.
  explicit Scheduler(const SchedulerLimits& limits);

  // Queues a request behind every earlier one. A request that can never run (empty prompt,
  // max_new_tokens < 1, a duplicate id, a token id below 0, a worst case over the KV capacity or the
  // longest sequence) is rejected with an error naming the numbers, and nothing is queued.
  Status add(Request request);

  // Admits what fits and plans the next step. An empty plan means nothing is waiting or running,
  // or nothing can run before the outstanding step's commit. At most kMaxOutstanding plans wait
  // for their commits at a time (planning one more throws).
  static constexpr int kMaxOutstanding = 2;
  StepPlan plan_step();

  // Records the step's outcome: `sampled` holds one token per chunk of `plan`, in order (tokens of
  // chunks that yield none, and of requests a stop token ended at an earlier commit, are ignored).
  // Requests that reached max_new_tokens or a stop token finish and free their reservation. Throws
  // Error for a plan that is not the oldest outstanding one or the wrong number of tokens.
  void commit(const StepPlan& plan, std::span<const int32_t> sampled);

  // The tokens a chunk of the newest plan feeds: a slice of the prompt, or the last generated token.
  // An input_pending chunk has none yet (the caller feeds the outstanding step's token itself).
  std::span<const int32_t> chunk_tokens(const PlannedChunk& chunk) const;
  int outstanding_steps() const { return static_cast<int>(outstanding_.size()); }

  // Requests finished since the last call: step by step, within a step in plan order.
  std::vector<FinishedRequest> take_finished();

  bool idle() const { return waiting_.empty() && running_.empty(); }
  size_t waiting_count() const { return waiting_.size(); }
  size_t running_count() const { return running_.size(); }
  int64_t total_blocks() const { return total_blocks_; }
  int64_t reserved_blocks() const { return reserved_blocks_; }
  const SchedulerLimits& limits() const { return limits_; }
  // Blocks a request of this size reserves while it runs.
  int64_t blocks_for(int64_t prompt_tokens, int64_t max_new_tokens) const;

 private:
  struct Active {
    Request request;
    int64_t blocks = 0;
    int prefilled = 0;  // prompt tokens already planned
    int in_flight = 0;  // tokens that outstanding plans will yield
    bool finished = false;  // ended; stays (reserved, not running) while outstanding plans feed it
    std::vector<int32_t> generated;
  };

  SchedulerLimits limits_;
  int64_t total_blocks_ = 0;
  int64_t reserved_blocks_ = 0;
  std::vector<Request> waiting_;                 // arrival order
  std::vector<int64_t> running_;                 // admitted ids, arrival order
  std::map<int64_t, Active> active_;             // by id (ordered: no hash iteration anywhere)
  std::set<int64_t> known_ids_;                  // every id ever added, for the duplicate check
  std::vector<FinishedRequest> finished_;
  int64_t next_step_ = 0;
  std::vector<int64_t> outstanding_;  // planned steps waiting for their commits, oldest first
};

}  // namespace fuselm
