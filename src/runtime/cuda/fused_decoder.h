#pragma once
// The CUDA engine's fused decode path: the weights repacked for the small-batch kernels
// (kernels/cuda/fused_decode.h), the step's buffers, and one CUDA graph per batch bucket, all made
// at load. A decode step pads its batch up to the next bucket and replays that bucket's graph; the
// host only writes the step inputs and launches the replay.
//
// Buckets above the skinny GEMM's token limit run the fused step once per group of that many
// rows inside the same graph. Every row's result is the same whatever the bucket: the kernels
// treat each token as its own column and never change their K split with the batch.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/fused_decode.h"
#include "kernels/cuda/sampling.h"
#include "model/config.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/device_weights.h"
#include "runtime/cuda/kv_cache.h"

namespace fuselm {

// The fixed arrays the graphs read and write, max_batch rows each (the engine's step inputs).
struct FusedDecodeStepInputs {
  const int32_t* tokens = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* kv_lens = nullptr;
  const int32_t* block_tables = nullptr;  // [max_batch][max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  // Sampling, the graph's last kernel: each row's parameters and penalty window (device), and
  // where the sampled ids go (device). A token < 0 in `tokens` is the id the previous replay
  // sampled for row -1 - token, read from `sampled` by the step's first kernel.
  const SampleParams* params = nullptr;
  const int32_t* history = nullptr;  // [max_batch][history_stride]
  int history_stride = 0;
  int32_t* sampled = nullptr;
  // Two replay slots, so that the host prepares a step while the other one runs. Per slot: the
  // step's inputs in pinned host memory, laid out as the device inputs from `params` to the end of
  // `block_tables` (which lie in that order, contiguous), which the graph copies to the device
  // first; and where its sampling writes the ids on the host.
  const void* staged_inputs[2] = {};
  int32_t* sampled_host[2] = {};
};

// Why the fused decode kernels cannot run this model in `dtype`, or "" when they can.
std::string fused_decode_unsupported_reason(const ModelConfig& config, DType dtype);

// Owns one instantiated CUDA graph.
class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(CudaGraph&& other) noexcept;
  CudaGraph& operator=(CudaGraph&& other) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Captures what `record` launches on `stream` (which must be idle) and instantiates it; throws
  // Error with record's message when it fails.
  static CudaGraph capture(cudaStream_t stream, const std::function<Status()>& record);
  void launch(cudaStream_t stream) const;

 private:
  cudaGraphExec_t exec_ = nullptr;
};

class FusedDecoder {
 public:
  // Packs the weights and allocates the step buffers: everything that takes memory, so that the KV
  // cache can be sized from what is left. `buckets`: ascending batch sizes, one graph each.
  FusedDecoder(const ModelConfig& config, DType dtype, const DeviceWeights& weights,
               const DecodeAttentionPlan& attention_plan, const FusedDecodeVariants& variants,
               std::vector<int> buckets, cudaStream_t stream);

  // Takes the cache's scratch block and captures every bucket's graph over `kv` (which must outlive
  // the decoder) and the fixed step inputs. Run once, before the first step. With `trace`, every
  // replay also records the timeline of its kernels (kernel_trace.h; a lab tool), which trace()
  // reads back.
  void capture(KvCache& kv, const FusedDecodeStepInputs& inputs, cudaStream_t stream, bool trace = false);

  // The smallest bucket holding `batch` rows.
  int bucket_for(int batch) const;
  const std::vector<int>& buckets() const { return buckets_; }
  // The block id that padding rows point at (their block-table entry 0).
  int scratch_block() const { return scratch_block_; }

  // Replays the bucket's graph of replay slot `slot` over that slot's staged inputs: logits()
  // rows 0..bucket-1 hold fp32 logits afterwards (unchanged by a greedy row's sampling), and
  // inputs.sampled and the slot's sampled_host rows 0..bucket-1 the sampled ids.
  void run(int bucket, int slot, cudaStream_t stream) const;
  // Lab: one graph of `steps` steps of the bucket back to back, slots alternating from 0, to
  // measure what the boundary between two graphs costs a step.
  CudaGraph lab_capture_steps(int bucket, int steps, cudaStream_t stream) const;
  // Bytes of a bucket's staged inputs (from params to its last block-table row).
  size_t staged_bytes(int bucket) const;
  float* logits() const { return logits_; }
  // The last replay's timeline, fused_decode_trace_slot() order; empty unless captured with trace.
  // Waits for the stream.
  std::vector<KernelTrace> trace(cudaStream_t stream) const;

  size_t packed_weight_bytes() const { return packed_.size(); }
  size_t buffer_bytes() const { return buffers_.size(); }
  const FusedDecodeVariants& variants() const { return model_.variants; }

 private:
  // Launches the copy of the slot's inputs, the fused step for rows [0, bucket) in groups of
  // kSkinnyGemmMaxTokens, then the sampling of every row.
  Status record_step(int bucket, int slot, cudaStream_t stream) const;
  // The bucket's place in buckets_; throws Error when `bucket` is not one.
  size_t bucket_index(int bucket) const;

  FusedDecodeModel model_;
  FusedDecodeBuffers step_buffers_;
  DecodeAttentionPlan attention_plan_;
  FusedDecodeStepInputs inputs_;
  int scratch_block_ = -1;
  float* logits_ = nullptr;  // [max bucket][vocab]
  std::vector<int> buckets_;
  std::vector<CudaGraph> graphs_;  // two per bucket (slots 0 and 1), in bucket order
  DeviceBuffer packed_;   // every packed weight matrix
  DeviceBuffer buffers_;  // step buffers, logits
  DeviceBuffer trace_;    // timeline slots, when captured with trace
};

}  // namespace fuselm
