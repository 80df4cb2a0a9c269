#pragma once
// The CUDA backend: weights uploaded once, a memory plan made at load, a paged KV cache.
#include <memory>
#include <vector>

#include "kernels/cuda/kernel_trace.h"
#include "runtime/cuda/kv_cache.h"
#include "runtime/engine.h"

namespace fuselm {

// Settings of the CUDA backend that EngineOptions does not carry; the defaults are what
// make_cuda_engine(model, options) uses.
struct CudaEngineTuning {
  int kv_block_size = 16;          // tokens per KV block (a power of two)
  size_t memory_reserve_bytes = size_t{512} << 20;  // left free for the CUDA context, cuBLASLt, etc.
  int max_kv_blocks = 0;           // 0 = size the pool from memory; else at most this many blocks
  bool trace_decode = false;       // fused decode graphs record their kernels' timeline (a lab tool)
};

// What a CUDA engine offers beyond the Engine interface (tests and tools use it).
class CudaEngine : public Engine {
 public:
  virtual KvCacheStats kv_stats() const = 0;
  // Longest sequence the engine accepts (min of max_seq_len and what the pool can hold).
  virtual int max_sequence_length() const = 0;
  // The last fused decode step's kernel timeline (fused_decode_trace_slot() order), when the
  // engine was made with CudaEngineTuning::trace_decode; empty otherwise.
  virtual std::vector<KernelTrace> decode_trace() const = 0;
  // Lab: replays the last fused decode step's graph `reps` times back to back over the inputs it
  // had (rewriting the same KV entries) and returns the device time per replay in microseconds
  // (CUDA events). Waits for every submitted step first. With `steps_per_graph` above 1 the replays
  // are of one lab graph holding that many steps, and the time is per step.
  virtual double lab_replay_decode_us(int reps, int steps_per_graph = 1) = 0;
};

// Throws Error when no CUDA device is usable.
std::unique_ptr<CudaEngine> make_cuda_engine(const Model& model, const EngineOptions& options);
std::unique_ptr<CudaEngine> make_cuda_engine(const Model& model, const EngineOptions& options,
                                             const CudaEngineTuning& tuning);

}  // namespace fuselm
