#pragma once
// The inference engine interface every backend implements. A front end creates sequences, feeds
// chunks of tokens (a prompt, a prefill chunk, or one decode token) and reads logits or samples.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
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
};

// Creates the backend the options ask for; throws Error when it is not available here.
std::unique_ptr<Engine> make_engine(const Model& model, const EngineOptions& options);

}  // namespace fuselm
