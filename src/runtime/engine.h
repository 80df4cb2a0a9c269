#pragma once
// The inference engine interface every backend implements. A front end creates sequences, feeds
// chunks of tokens (a prompt, a prefill chunk, or one decode token) and reads logits or samples.
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "model/model.h"
#include "runtime/sampler.h"

namespace fuselm {

enum class DeviceKind { Cpu, Cuda };
enum class ExecutionPath { Fused, Baseline };

DeviceKind parse_device(const std::string& name);          // "cpu" | "cuda"
ExecutionPath parse_execution_path(const std::string& name);  // "fused" | "baseline"
std::string device_name(DeviceKind d);
std::string execution_path_name(ExecutionPath p);

struct EngineOptions {
  DeviceKind device = DeviceKind::Cpu;
  DType dtype = DType::BF16;  // compute/storage dtype on the GPU (the CPU computes in fp32)
  ExecutionPath path = ExecutionPath::Fused;  // CUDA decode path (prefill is shared; the CPU ignores it)
  int max_batch = 256;        // most sequences in one step
  int max_seq_len = 0;        // longest sequence; 0 = the model's max_position_embeddings (capped)
  int max_prefill_tokens = 8192;  // most tokens in one forward call
  int kv_block_size = 16;     // tokens per paged KV block on the GPU (a power of two)
  double kv_memory_fraction = 0.9;  // share of the memory left after weights given to the KV cache
  bool verbose = false;       // print the memory budget at start
  // submit_sample on the CUDA fused path runs a decode step behind the one in flight, fed its
  // tokens on the device; false: each submitted step runs at its submit, as forward_sample does.
  bool pipeline_decode = true;
  // A plan file (plan/plan.h: `fuselm tune -o`, `fuselm plan --json`) whose kernel choices the CUDA
  // engine uses instead of the built-in rules; refused when made for another GPU, model or dtype.
  // Empty = the rules.
  std::string plan_file;
};

// How much KV cache an engine holds, for schedulers that reserve a request's worst case before
// admitting it (runtime/scheduler.h): a sequence of n tokens takes ceil(n / block_size) blocks, and
// the cache has tokens / block_size of them.
struct KvCapacity {
  int64_t tokens = 0;
  int block_size = 1;
  int max_sequence_tokens = 0;  // longest single sequence the engine takes
};

// A decode chunk's token that submit_sample takes from the sequence's previous submitted step: the
// id that step samples, which a device backend feeds to this step without a trip through the host.
inline constexpr int32_t kPendingToken = -1;

// One piece of work in a step: `tokens` appended to sequence `seq_id` at its current length.
struct SequenceChunk {
  int seq_id = -1;
  std::span<const int32_t> tokens;
  bool all_logits = false;  // logits for every token (teacher forcing) or only the last
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual const ModelConfig& config() const = 0;
  virtual std::string description() const = 0;  // backend, path, dtype

  // Creates an empty sequence; throws Error naming the numbers when no capacity is left.
  virtual int add_sequence() = 0;
  virtual void remove_sequence(int seq_id) = 0;
  virtual int sequence_length(int seq_id) const = 0;
  virtual KvCapacity kv_capacity() const = 0;

  // Runs the model over every chunk in one step. `logits` receives fp32 rows of vocab_size
  // values, chunk by chunk: every token's row for all_logits chunks, else the last token's row.
  virtual void forward(std::span<const SequenceChunk> chunks, std::vector<float>& logits) = 0;

  // Runs one step and samples one token per chunk from its last position. The default samples on
  // the host from forward()'s logits; GPU backends sample on the device.
  virtual void forward_sample(std::span<const SequenceChunk> chunks,
                              std::span<SamplerState* const> samplers, std::vector<int32_t>& tokens);

  // Pipelined sampling, for decode loops: submit_sample enqueues a step as forward_sample runs it
  // and may return before the device has finished it; wait_sample hands back the tokens of the
  // oldest step submitted and not yet waited for. Submitting step n + 1 before waiting for step n
  // keeps the device busy while the host reads step n's tokens and prepares what follows.
  //  - A single-token chunk may carry kPendingToken: the token its sequence's previous submitted
  //    step samples. Its sampler's repetition penalty must then be off (the history gets a token
  //    at the wait for the step that samples it).
  //  - A sequence's length grows at the submit, so a step submitted past where the caller stops
  //    (say, after an end-of-sequence token) still counts: remove or ignore the sequence after it.
  //  - At most kMaxStepsInFlight steps are submitted and not yet waited for at a time.
  // Samplers must outlive the wait for their step. The default runs each step at its submit.
  static constexpr int kMaxStepsInFlight = 2;
  virtual void submit_sample(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers);
  virtual void wait_sample(std::vector<int32_t>& tokens);
  virtual int steps_in_flight() const { return static_cast<int>(finished_steps_.size()); }

 protected:
  // Checks what submit_sample takes whatever the backend runs (chunk and sampler counts, where
  // kPendingToken may stand, the number of steps in flight); `in_flight`: steps submitted and not
  // yet waited for.
  void check_submit(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers,
                    int in_flight) const;

 private:
  // The default pipeline: every submitted step has run; its tokens wait here in submit order.
  std::deque<std::vector<int32_t>> finished_steps_;
  // seq_id -> (its length after its latest submitted step, the token that step sampled); stale
  // once the length has moved on (another call fed the sequence, or it was removed).
  std::unordered_map<int, std::pair<int, int32_t>> last_sampled_;
};

// Creates the backend the options ask for; throws Error when it is not available here.
std::unique_ptr<Engine> make_engine(const Model& model, const EngineOptions& options);

}  // namespace fuselm
