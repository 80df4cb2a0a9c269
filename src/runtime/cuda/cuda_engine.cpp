#include "runtime/cuda/cuda_engine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_stream.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_sm90.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope_kv.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/swiglu.h"
#include "plan/cuda/plan_cuda.h"
#include "plan/plan.h"
#include "runtime/cuda/device_weights.h"
#include "runtime/cuda/fused_decoder.h"
#include "runtime/cuda/memory_plan.h"

namespace fuselm {

namespace {

void require_cuda_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    fail("no CUDA device is usable (",
         err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found none",
         "); run with --device cpu, or on a machine with an NVIDIA GPU and its driver");
  }
}


// Both paths share the weights, the paged KV cache, the memory plan and prefill, which runs one
// kernel per operation with intermediates in the arena. Decode steps (one token per sequence) run
// the same kernels launched one at a time on the baseline path, and replay a captured graph of
// fused kernels on the fused path.
class CudaEngineImpl final : public CudaEngine {
 public:
  CudaEngineImpl(const Model& model, const EngineOptions& options, const CudaEngineTuning& tuning);
  ~CudaEngineImpl() override { cudaStreamSynchronize(stream_); }

  const ModelConfig& config() const override { return config_; }
  std::string description() const override;
  int add_sequence() override { return kv_->add_sequence(); }
  void remove_sequence(int seq_id) override {
    kv_->remove_sequence(seq_id);  // a step still in flight writes its blocks before any later step does
    latest_sample_.erase(seq_id);
  }
  int sequence_length(int seq_id) const override { return kv_->length(seq_id); }
  void forward(std::span<const SequenceChunk> chunks, std::vector<float>& logits) override;
  void forward_sample(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers,
                      std::vector<int32_t>& tokens) override;
  void submit_sample(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers) override;
  void wait_sample(std::vector<int32_t>& tokens) override;
  int steps_in_flight() const override { return static_cast<int>(submitted_.size()); }
  KvCacheStats kv_stats() const override { return kv_->stats(); }
  int max_sequence_length() const override { return max_sequence_length_; }
  std::vector<KernelTrace> decode_trace() const override {
    return fused_ ? fused_->trace(stream_) : std::vector<KernelTrace>{};
  }
  double lab_replay_decode_us(int reps, int steps_per_graph) override;
  KvCapacity kv_capacity() const override {
    const KvCacheStats s = kv_->stats();
    return {static_cast<int64_t>(s.total_blocks) * s.block_size, s.block_size, max_sequence_length_};
  }

 private:
  // One validated step, its inputs in the pinned staging area and (but for a fused step, whose
  // inputs run_fused_decode sends in one copy) on their way to the device.
  struct Step {
    int batch = 0;
    int tokens = 0;
    int max_q_len = 0;
    bool decode_only = false;  // every chunk is one token: split-KV decode attention
    bool fused = false;        // decode_only on the fused path: a decode graph runs it
    int logit_rows = 0;
    std::vector<std::pair<int, int>> new_lengths;  // (seq_id, length after the step)
  };
  // `device_tokens`: a token < 0 may stand for the previous replay's sampled id of row -1 - token
  // (FusedDecodeInputs::tokens); only a fused step reads them.
  Step prepare_step(std::span<const SequenceChunk> chunks, bool last_rows_only, bool device_tokens = false);
  // Checks each row's sampling parameters; returns the longest penalty window, the row stride of
  // the windows on the unfused path.
  int check_samplers(std::span<SamplerState* const> samplers) const;
  // Writes the sampling parameters and penalty windows of a step's rows (on the fused path for
  // its graph, sent with its inputs).
  void write_sample_inputs(const Step& step, std::span<SamplerState* const> samplers, int history_stride);
  void run_layers(const Step& step);
  // Final norm and LM head for `n` rows (token indices at logit_rows + first) into the logits slab.
  void compute_logits(int first, int n, int step_tokens);
  void commit(const Step& step);
  // Fused path: pads the step's rows (staged in replay slot replay_slot_) up to its bucket and
  // replays the bucket's graph of that slot, which it returns; the logits of row b are then at
  // fused_->logits() + b * vocab and its sampled id, once replay_done_[slot] is reached, at
  // ids_host(slot)[b]. `rows_sampled`: the caller wrote rows 0..batch-1 of the slot's params;
  // otherwise they sample greedily (unused).
  int run_fused_decode(const Step& step, bool rows_sampled);
  // A fused step's inputs, staged on the host in a replay slot (the device inputs' layout from
  // decode_params on), and its sampled ids.
  template <class T>
  T* staged(const ArenaSlice& s, int slot) const {
    return decode_staging_.at<T>(static_cast<size_t>(slot) * staging_bytes_ + (s.offset - plan_.inputs.decode_params.offset));
  }
  int32_t* ids_host(int slot) const {
    return sampled_host_.at<int32_t>(static_cast<size_t>(slot) * plan_.limits.max_batch * sizeof(int32_t));
  }
  // Frees replay_slot_ for the next fused step: a submitted step still holding it finishes first.
  void claim_replay_slot();
  void upload_range(const ArenaSlice& s, size_t offset, size_t bytes);

  template <class T>
  T* act(const ArenaSlice& s) const {
    return arena_.at<T>(s.offset);
  }
  template <class T>
  T* input_device(const ArenaSlice& s) const {
    return inputs_device_.at<T>(s.offset);
  }
  template <class T>
  T* input_host(const ArenaSlice& s) const {
    return inputs_host_.at<T>(s.offset);
  }
  void upload(const ArenaSlice& s, size_t bytes);

  // Pipelined sampling (submit_sample): the steps submitted and not yet waited for, oldest first.
  // A fused decode step runs behind the one before it, in the other replay slot; any other step
  // runs at its submit.
  struct SubmittedStep {
    uint64_t serial = 0;
    int slot = -1;  // the replay slot that holds its ids while in flight
    std::vector<SamplerState*> samplers;
    std::vector<int> seq_ids;     // row by row
    std::vector<int32_t> tokens;  // once finished
    bool finished = false;
  };
  // Where a sequence's latest submitted step left its sampled id.
  struct LatestSample {
    int length = 0;       // the sequence's length after that step (stale once it differs)
    uint64_t serial = 0;  // that step
    int row = 0;          // the sequence's row in it
    int32_t token = -1;   // once the host has it
  };
  // Waits for a submitted step's ids and hands them to its samplers' histories.
  void finish(SubmittedStep& step);
  std::deque<SubmittedStep> submitted_;
  std::unordered_map<int, LatestSample> latest_sample_;
  uint64_t next_serial_ = 1;
  uint64_t device_ids_serial_ = 0;  // the submitted step whose ids the device's sampled buffer holds; 0: none
  // Two replay slots (FusedDecodeStepInputs): the host stages one step while the other runs.
  static_assert(kMaxStepsInFlight == 2, "one replay slot per step in flight");
  int replay_slot_ = 0;       // the slot the next fused step takes
  int last_fused_batch_ = 0;  // the last fused step's rows (lab_replay_decode_us)
  size_t staging_bytes_ = 0;  // one slot's staged inputs
  PinnedBuffer decode_staging_;  // [2][staging_bytes_]
  PinnedBuffer sampled_host_;    // int32 [2][max_batch]
  std::vector<std::unique_ptr<CudaEvent>> replay_done_;  // per slot: its last replay has ended
  // The staging area's penalty windows are rewritten only once their last copy to the device (a
  // fused step's, which nothing waits for) has left.
  std::unique_ptr<CudaEvent> inputs_sent_;
  bool inputs_sending_ = false;

  std::unique_ptr<CudaStream> stream_holder_;  // declared first among the members so that it goes last
  cudaStream_t stream_ = nullptr;
  ModelConfig config_;
  EngineOptions options_;
  CudaEngineTuning tuning_;
  DType dtype_;
  std::string device_name_;
  DeviceWeights weights_;
  MemoryPlan plan_;
  Plan kernel_plan_;
  DeviceBuffer arena_;
  DeviceBuffer inputs_device_;
  PinnedBuffer inputs_host_;
  GemmPlan gemm_;
  GemmShape qkv_shape_, wo_shape_, gate_up_shape_, down_shape_, lm_head_shape_;
  AttentionShape attention_shape_;
  DecodeAttentionPlan decode_plan_;
  RopeKvShape rope_shape_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<FusedDecoder> fused_;  // the fused path's decode graphs; null on the baseline path
  std::string fused_unsupported_;        // why the fused path was asked for but decode runs unfused
  // The fused path's prefill projections on the sm_90a GEMMs (the plan's prefill GEMM path for every
  // chunk; gate/up with SwiGLU in its output pass), else on cuBLASLt and swiglu. A chunk takes the
  // tile width of its plan bucket (sm90_w128 or sm90_w256: the same bits).
  bool prefill_sm90_ = false;
  std::string prefill_note_;  // why the plan's sm_90a GEMMs do not run here, if they do not
  int max_sequence_length_ = 0;
};

CudaEngineImpl::CudaEngineImpl(const Model& model, const EngineOptions& options,
                                       const CudaEngineTuning& tuning)
    : config_(model.config), options_(options), tuning_(tuning), dtype_(options.dtype) {
  require_cuda_device();
  const StepLimits limits = make_step_limits(config_, options, tuning.kv_block_size);
  FUSELM_CHECK(options.kv_memory_fraction > 0.0 && options.kv_memory_fraction <= 1.0,
               "kv_memory_fraction must be in (0, 1], got ", options.kv_memory_fraction);

  int device = 0;
  FUSELM_CUDA_THROW(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  FUSELM_CUDA_THROW(cudaGetDeviceProperties(&prop, device));
  FUSELM_CHECK(prop.major >= 8, "the CUDA backend needs a GPU of compute capability 8.0 or newer (bf16 tensor cores); ",
               prop.name, " is ", prop.major, ".", prop.minor, "; use --device cpu");
  device_name_ = prop.name;

  // The kernel plan: from the file the options name (made by `fuselm tune` for this GPU, model and
  // dtype) or from the rule table. Every kernel choice below comes from it, once.
  const GpuIdentity gpu = gpu_identity(prop);
  const PlanLimits plan_limits =
      make_plan_limits(config_, limits.max_batch, options.max_prefill_tokens, limits.max_seq_len);
  if (!options.plan_file.empty()) {
    kernel_plan_ = load_plan_file(options.plan_file);
    check_plan_matches(kernel_plan_, config_, dtype_, gpu, options.plan_file);
    check_plan_covers(kernel_plan_, plan_limits, options.plan_file);
    FUSELM_CHECK(kernel_plan_.kv_block_size == limits.block_size, options.plan_file, " was made for KV blocks of ",
                 kernel_plan_.kv_block_size, " tokens, the engine is set up for ", limits.block_size,
                 "; pass --kv-block-size ", kernel_plan_.kv_block_size, " or make the plan again");
  } else {
    kernel_plan_ = make_rule_plan(config_, dtype_, gpu, plan_limits);
  }
  stream_holder_ = std::make_unique<CudaStream>();
  stream_ = stream_holder_->get();

  weights_ = upload_weights(model, dtype_, stream_);

  const int hidden = config_.hidden_size, q_dim = config_.q_dim(), kv_dim = config_.kv_dim();
  const int ffn = config_.intermediate_size;
  attention_shape_ = {config_.num_heads, config_.num_kv_heads, config_.head_dim,
                      1.0f / std::sqrt(static_cast<float>(config_.head_dim))};
  rope_shape_ = {config_.num_heads, config_.num_kv_heads, config_.head_dim};
  decode_plan_ = plan_decode_attention(kernel_plan_, limits.max_seq_len);
  // The fused decode graphs run the plan's decode attention (in clusters where it says so); the
  // kernel-by-kernel path keeps one CTA per split, as it was built.
  const DecodeAttentionPlan fused_attention_plan = decode_plan_;
  decode_plan_.cluster_ranks = 1;
  FUSELM_CHECK(decode_plan_.split_tokens % limits.block_size == 0, "the plan's decode split of ",
               decode_plan_.split_tokens, " tokens is not a multiple of the KV block size ", limits.block_size);
  const size_t attention_workspace = decode_attention_workspace_bytes(attention_shape_, decode_plan_, limits.max_batch);

  qkv_shape_ = {q_dim + 2 * kv_dim, hidden, dtype_, dtype_};
  wo_shape_ = {hidden, q_dim, dtype_, dtype_};
  gate_up_shape_ = {2 * ffn, hidden, dtype_, dtype_};
  down_shape_ = {hidden, ffn, dtype_, dtype_};
  // Models the fused kernels do not cover decode on the baseline path; the choice is made here, once.
  fused_unsupported_ = options.path == ExecutionPath::Fused ? fused_decode_unsupported_reason(config_, dtype_) : "";
  const bool fused = options.path == ExecutionPath::Fused && fused_unsupported_.empty();
  if (fused) {
    // Prefill's projections as the plan says (validated: the sm_90a paths for every chunk or none).
    // The plan knows the GPU and the shapes, not this build's device code: without sm_90a code
    // prefill runs on cuBLASLt, and the engine's description says so.
    const std::vector<PrefillBucket>& chunks = kernel_plan_.prefill.buckets;
    if (!chunks.empty() && chunks.front().gemm.starts_with("sm90_")) {
      std::string why = gemm_swiglu_sm90_unsupported_reason(ffn, hidden, dtype_);
      for (const GemmShape& s : {qkv_shape_, wo_shape_, down_shape_})
        if (why.empty()) why = gemm_sm90_unsupported_reason(s.n, s.k, dtype_, 256);
      prefill_sm90_ = why.empty();
      if (!prefill_sm90_) prefill_note_ = str_cat("prefill GEMMs on cuBLASLt, not the plan's sm_90a GEMMs: ", why);
    }
  }

  // The sm_90a prefill GEMM applies SwiGLU in its output pass: no [tokens][2 ffn] buffer then.
  plan_ = plan_memory(config_, dtype_, limits, GemmPlan::kWorkspaceBytes, attention_workspace,
                      /*gate_up_rows=*/!prefill_sm90_);
  arena_ = DeviceBuffer::allocate(plan_.activations.total, "activations and workspaces");
  inputs_device_ = DeviceBuffer::allocate(plan_.inputs.total, "per-step inputs");
  inputs_host_ = PinnedBuffer::allocate(plan_.inputs.total, "per-step input staging");
  staging_bytes_ = plan_.inputs.decode_block_tables.offset + plan_.inputs.decode_block_tables.bytes -
                   plan_.inputs.decode_params.offset;
  decode_staging_ = PinnedBuffer::allocate(2 * staging_bytes_, "decode step input staging");
  sampled_host_ = PinnedBuffer::allocate(2 * static_cast<size_t>(limits.max_batch) * sizeof(int32_t),
                                         "sampled ids of the decode steps in flight");
  for (int i = 0; i < 2; ++i) replay_done_.push_back(std::make_unique<CudaEvent>());
  inputs_sent_ = std::make_unique<CudaEvent>();

  FUSELM_THROW_IF_FAILED(gemm_.init(act<void>(plan_.activations.gemm_workspace), GemmPlan::kWorkspaceBytes));
  FUSELM_THROW_IF_FAILED(decode_attention_init_workspace(act<void>(plan_.activations.attention_workspace),
                                                         attention_shape_, decode_plan_, limits.max_batch, stream_));
  lm_head_shape_ = {config_.vocab_size, hidden, dtype_, DType::F32};
  // The fused path keeps prefill batch-invariant too: a row's projections must not depend on how
  // many tokens share the step (prefill chunk size, other requests' prompts).
  const GemmPlan::Choice gemm_choice = options.path == ExecutionPath::Fused ? GemmPlan::Choice::BatchInvariant
                                                                           : GemmPlan::Choice::FastestPerBucket;
  // The layers' projections on cuBLASLt only where prefill does not run the sm_90a GEMMs.
  if (!prefill_sm90_)
    for (const GemmShape& s : {qkv_shape_, wo_shape_, gate_up_shape_, down_shape_})
      FUSELM_THROW_IF_FAILED(gemm_.add(s, limits.max_tokens, gemm_choice));
  FUSELM_THROW_IF_FAILED(gemm_.add(lm_head_shape_, limits.logits_rows, gemm_choice));

  if (fused) {
    FusedDecodeVariants variants;
    variants.qkv = plan_skinny_gemm_choice(kernel_plan_, PlanOp::Qkv);
    variants.o = plan_skinny_gemm_choice(kernel_plan_, PlanOp::O);
    variants.gate_up = plan_skinny_gemm_choice(kernel_plan_, PlanOp::GateUp);
    variants.down = plan_skinny_gemm_choice(kernel_plan_, PlanOp::Down);
    variants.lm_head = plan_skinny_gemm_choice(kernel_plan_, PlanOp::LmHead);
    variants.ffn_one_launch_tokens = kernel_plan_.decode.ffn_one_launch_tokens;
    variants.o_in_attention = kernel_plan_.decode.o_in_attention;
    // The plan's buckets up to this engine's batch limit, which closes the list.
    std::vector<int> buckets;
    for (const DecodeBucket& b : kernel_plan_.decode.buckets)
      if (b.batch < limits.max_batch) buckets.push_back(b.batch);
    buckets.push_back(limits.max_batch);
    fused_ = std::make_unique<FusedDecoder>(config_, dtype_, weights_, fused_attention_plan, variants, buckets, stream_);
  }

  // The KV pool takes its share of what is left, never more than max_batch full-length sequences.
  size_t free_bytes = 0, total_bytes = 0;
  FUSELM_CUDA_THROW(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t block_bytes = kv_block_bytes(config_, dtype_, limits.block_size);
  const size_t budget = free_bytes > tuning.memory_reserve_bytes
                            ? static_cast<size_t>(static_cast<double>(free_bytes - tuning.memory_reserve_bytes) *
                                                  options.kv_memory_fraction)
                            : 0;
  const int64_t fit = static_cast<int64_t>(budget / block_bytes);
  int64_t blocks = std::min<int64_t>(fit, static_cast<int64_t>(limits.max_batch) * limits.max_blocks_per_seq);
  if (tuning.max_kv_blocks > 0) blocks = std::min<int64_t>(blocks, tuning.max_kv_blocks);
  // The fused path's padding rows write into a scratch block that sequences never get.
  const int scratch_blocks = fused_ ? 1 : 0;
  blocks = std::min<int64_t>({blocks + scratch_blocks, fit, 0x7fffffff}) - scratch_blocks;
  FUSELM_CHECK(blocks >= 1, "no GPU memory left for the KV cache: ", format_bytes(free_bytes), " free after weights (",
               format_bytes(weights_.storage.size()), ") and workspaces (", format_bytes(plan_.activations.total),
               "), of which ", format_bytes(tuning.memory_reserve_bytes), " stay in reserve and one block needs ",
               format_bytes(block_bytes), "; lower --max-batch or --max-prefill-tokens, or use a smaller model");
  kv_ = std::make_unique<KvCache>(config_, dtype_, limits.block_size, static_cast<int>(blocks + scratch_blocks),
                                  limits.max_blocks_per_seq);
  if (fused_) {
    const StepInputPlan& in = plan_.inputs;
    FusedDecodeStepInputs inputs;
    inputs.tokens = input_device<int32_t>(in.decode_tokens);
    inputs.positions = input_device<int32_t>(in.decode_positions);
    inputs.kv_lens = input_device<int32_t>(in.decode_kv_lens);
    inputs.block_tables = input_device<int32_t>(in.decode_block_tables);
    inputs.max_blocks_per_seq = limits.max_blocks_per_seq;
    inputs.params = input_device<SampleParams>(in.decode_params);
    inputs.history = input_device<int32_t>(in.history);
    inputs.history_stride = limits.history_capacity;
    inputs.sampled = input_device<int32_t>(in.sampled);
    for (int slot = 0; slot < 2; ++slot) {
      inputs.staged_inputs[slot] = staged<void>(in.decode_params, slot);
      inputs.sampled_host[slot] = ids_host(slot);
    }
    fused_->capture(*kv_, inputs, stream_, tuning.trace_decode);
  }
  const int64_t pool_tokens = blocks * limits.block_size;
  max_sequence_length_ = static_cast<int>(std::min<int64_t>(limits.max_seq_len, pool_tokens));

  if (options.verbose) {
    std::fprintf(stderr,
                 "fuselm cuda: %s (sm_%d%d, %s); weights %s (%s); activations and workspaces %s; step inputs %s\n",
                 device_name_.c_str(), prop.major, prop.minor, format_bytes(total_bytes).c_str(),
                 format_bytes(weights_.storage.size()).c_str(), std::string(dtype_name(dtype_)).c_str(),
                 format_bytes(plan_.activations.total).c_str(), format_bytes(plan_.inputs.total).c_str());
    if (fused_)
      std::fprintf(stderr, "fused decode: packed weights %s, buffers %s, %zu graphs (batch buckets up to %d)\n",
                   format_bytes(fused_->packed_weight_bytes()).c_str(), format_bytes(fused_->buffer_bytes()).c_str(),
                   fused_->buckets().size(), fused_->buckets().back());
    std::fprintf(stderr, "KV cache: %lld blocks × %d tokens = %lld tokens; longest sequence that fits: %d\n",
                 static_cast<long long>(blocks), limits.block_size, static_cast<long long>(pool_tokens),
                 max_sequence_length_);
  }
}

std::string CudaEngineImpl::description() const {
  if (!fused_unsupported_.empty())
    return str_cat("cuda baseline ", dtype_name(dtype_), " on ", device_name_, " (fused decode does not support ",
                   fused_unsupported_, ")");
  return str_cat("cuda ", fused_ ? "fused" : "baseline", " ", dtype_name(dtype_), " on ", device_name_,
                 fused_ && !options_.pipeline_decode ? ", decode steps one at a time" : "",
                 prefill_note_.empty() ? "" : str_cat(" (", prefill_note_, ")"));
}

void CudaEngineImpl::upload_range(const ArenaSlice& s, size_t offset, size_t bytes) {
  if (bytes == 0) return;
  FUSELM_CUDA_THROW(cudaMemcpyAsync(input_device<std::byte>(s) + offset, input_host<std::byte>(s) + offset, bytes,
                                    cudaMemcpyHostToDevice, stream_));
}

int CudaEngineImpl::run_fused_decode(const Step& step, bool rows_sampled) {
  const int bucket = fused_->bucket_for(step.batch);
  const int slot = replay_slot_;
  last_fused_batch_ = step.batch;
  const StepInputPlan& in = plan_.inputs;
  const int stride = plan_.limits.max_blocks_per_seq;
  SampleParams* params = staged<SampleParams>(in.decode_params, slot);
  for (int r = rows_sampled ? step.batch : 0; r < bucket; ++r) params[r] = SampleParams{};  // greedy
  // Padding rows: token 0 at position 0 of a sequence whose only block is the scratch block.
  int32_t* tokens = staged<int32_t>(in.decode_tokens, slot);
  int32_t* positions = staged<int32_t>(in.decode_positions, slot);
  int32_t* kv_lens = staged<int32_t>(in.decode_kv_lens, slot);
  int32_t* block_tables = staged<int32_t>(in.decode_block_tables, slot);
  for (int r = step.batch; r < bucket; ++r) {
    tokens[r] = 0;
    positions[r] = 0;
    kv_lens[r] = 1;
    std::fill(block_tables + static_cast<size_t>(r) * stride, block_tables + static_cast<size_t>(r + 1) * stride,
              fused_->scratch_block());
  }
  // The graph copies the slot's inputs itself (a kernel, cheaper than a copy before the replay)
  // and its sampling writes the ids to ids_host(slot).
  fused_->run(bucket, slot, stream_);
  replay_done_[static_cast<size_t>(slot)]->record(stream_);
  replay_slot_ ^= 1;
  return slot;
}

void CudaEngineImpl::claim_replay_slot() {
  for (SubmittedStep& s : submitted_)
    if (!s.finished && s.slot == replay_slot_) finish(s);
}

double CudaEngineImpl::lab_replay_decode_us(int reps, int steps_per_graph) {
  FUSELM_CHECK(fused_ && last_fused_batch_ > 0, "lab_replay_decode_us: no fused decode step has run");
  FUSELM_CHECK(reps > 0 && steps_per_graph > 0, "lab_replay_decode_us: reps and steps must be positive");
  for (SubmittedStep& s : submitted_) finish(s);
  FUSELM_CUDA_THROW(cudaStreamSynchronize(stream_));
  // Both slots hold the last step's inputs.
  const int last = replay_slot_ ^ 1;
  std::copy_n(staged<std::byte>(plan_.inputs.decode_params, last), staging_bytes_,
              staged<std::byte>(plan_.inputs.decode_params, replay_slot_));
  const int bucket = fused_->bucket_for(last_fused_batch_);
  // Both slots hold the same inputs, so the lab graph's own slot order needs no bookkeeping.
  CudaGraph steps;
  if (steps_per_graph > 1) steps = fused_->lab_capture_steps(bucket, steps_per_graph, stream_);
  cudaEvent_t start = nullptr, stop = nullptr;
  FUSELM_CUDA_THROW(cudaEventCreate(&start));
  FUSELM_CUDA_THROW(cudaEventCreate(&stop));
  FUSELM_CUDA_THROW(cudaEventRecord(start, stream_));
  for (int r = 0; r < reps; ++r) {
    if (steps_per_graph > 1) {
      steps.launch(stream_);
    } else {
      fused_->run(bucket, replay_slot_, stream_);
      replay_slot_ ^= 1;
    }
  }
  FUSELM_CUDA_THROW(cudaEventRecord(stop, stream_));
  FUSELM_CUDA_THROW(cudaEventSynchronize(stop));
  float ms = 0;
  FUSELM_CUDA_THROW(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / (static_cast<double>(reps) * steps_per_graph);
}

void CudaEngineImpl::upload(const ArenaSlice& s, size_t bytes) {
  if (bytes == 0) return;
  FUSELM_CUDA_THROW(cudaMemcpyAsync(input_device<void>(s), input_host<void>(s), bytes, cudaMemcpyHostToDevice, stream_));
}

CudaEngineImpl::Step CudaEngineImpl::prepare_step(std::span<const SequenceChunk> chunks, bool last_rows_only,
                                                  bool device_tokens) {
  const StepLimits& lim = plan_.limits;
  if (inputs_sending_) {
    inputs_sent_->wait();
    inputs_sending_ = false;
  }
  FUSELM_CHECK(!chunks.empty(), "forward: the step has no chunks");
  FUSELM_CHECK(static_cast<int>(chunks.size()) <= lim.max_batch, "forward: the step has ", chunks.size(),
               " chunks, over max_batch ", lim.max_batch, "; split it or raise --max-batch");
  Step step;
  step.batch = static_cast<int>(chunks.size());
  std::unordered_set<int> seen;
  int64_t total = 0;
  for (const SequenceChunk& c : chunks) {
    FUSELM_CHECK(!c.tokens.empty(), "forward: the chunk for sequence ", c.seq_id, " has no tokens");
    FUSELM_CHECK(seen.insert(c.seq_id).second, "forward: sequence ", c.seq_id,
                 " appears twice in one step; give each sequence one chunk per step");
    const int64_t length = kv_->length(c.seq_id);
    const int64_t new_length = length + static_cast<int64_t>(c.tokens.size());
    FUSELM_CHECK(new_length <= max_sequence_length_, "forward: sequence ", c.seq_id, " would grow to ", new_length,
                 " tokens, over the longest this engine holds (", max_sequence_length_, ": max_seq_len ",
                 lim.max_seq_len, ", model max_position_embeddings ", config_.max_position_embeddings,
                 ", KV cache ", kv_->stats().total_blocks * lim.block_size, " tokens)");
    for (int32_t t : c.tokens)
      FUSELM_CHECK(t >= 0 ? t < config_.vocab_size : device_tokens && -1 - t < lim.max_batch, "forward: token id ", t,
                   " in sequence ", c.seq_id, " is outside the vocabulary (0..", config_.vocab_size - 1, ")");
    total += static_cast<int64_t>(c.tokens.size());
    step.max_q_len = std::max(step.max_q_len, static_cast<int>(c.tokens.size()));
    step.new_lengths.emplace_back(c.seq_id, static_cast<int>(new_length));
  }
  FUSELM_CHECK(total <= lim.max_tokens, "forward: the step has ", total, " tokens, over the ", lim.max_tokens,
               " planned per step; split it or raise --max-prefill-tokens");
  step.tokens = static_cast<int>(total);
  step.decode_only = step.max_q_len == 1;
  step.fused = fused_ && step.decode_only;
  kv_->reserve(step.new_lengths);  // the last check: throws, changing nothing, when blocks run out
  if (step.fused) claim_replay_slot();

  const StepInputPlan& in = plan_.inputs;
  // A fused step stages the decode graphs' own inputs in its replay slot (the graph copies them).
  const int slot = replay_slot_;
  int32_t* tokens = step.fused ? staged<int32_t>(in.decode_tokens, slot) : input_host<int32_t>(in.tokens);
  int32_t* positions = step.fused ? staged<int32_t>(in.decode_positions, slot) : input_host<int32_t>(in.positions);
  int32_t* token_batch = input_host<int32_t>(in.token_batch);
  int32_t* logit_rows = input_host<int32_t>(in.logit_rows);
  int32_t* q_starts = input_host<int32_t>(in.q_starts);
  int32_t* kv_lens = step.fused ? staged<int32_t>(in.decode_kv_lens, slot) : input_host<int32_t>(in.kv_lens);
  int32_t* block_tables =
      step.fused ? staged<int32_t>(in.decode_block_tables, slot) : input_host<int32_t>(in.block_tables);
  int t = 0;
  for (int b = 0; b < step.batch; ++b) {
    const SequenceChunk& c = chunks[b];
    const int start = kv_->length(c.seq_id);
    q_starts[b] = t;
    kv_lens[b] = step.new_lengths[b].second;
    kv_->write_block_table(c.seq_id, block_tables + static_cast<size_t>(b) * lim.max_blocks_per_seq);
    const int first_row = t;
    for (size_t i = 0; i < c.tokens.size(); ++i, ++t) {
      tokens[t] = c.tokens[i];
      positions[t] = start + static_cast<int>(i);
      token_batch[t] = b;
    }
    if (c.all_logits && !last_rows_only) {
      for (int r = first_row; r < t; ++r) logit_rows[step.logit_rows++] = r;
    } else {
      logit_rows[step.logit_rows++] = t - 1;
    }
  }
  q_starts[step.batch] = t;

  if (step.fused) return step;
  const size_t n_tok = static_cast<size_t>(step.tokens) * sizeof(int32_t);
  upload(in.tokens, n_tok);
  upload(in.positions, n_tok);
  upload(in.token_batch, n_tok);
  upload(in.logit_rows, static_cast<size_t>(step.logit_rows) * sizeof(int32_t));
  upload(in.q_starts, static_cast<size_t>(step.batch + 1) * sizeof(int32_t));
  upload(in.kv_lens, static_cast<size_t>(step.batch) * sizeof(int32_t));
  upload(in.block_tables, static_cast<size_t>(step.batch) * lim.max_blocks_per_seq * sizeof(int32_t));
  return step;
}

void CudaEngineImpl::run_layers(const Step& step) {
  const ActivationPlan& a = plan_.activations;
  const StepInputPlan& in = plan_.inputs;
  const int64_t n = step.tokens;
  const int64_t hidden = config_.hidden_size;
  const float eps = config_.rms_norm_eps;
  float* residual = act<float>(a.residual);
  void* normed = act<void>(a.normed);
  void* qkv = act<void>(a.qkv);
  void* q = act<void>(a.q);
  void* attn_out = act<void>(a.attn_out);
  void* proj = act<void>(a.proj);
  void* gate_up = act<void>(a.gate_up);
  void* ffn_act = act<void>(a.ffn_act);
  const int32_t* block_tables = input_device<int32_t>(in.block_tables);
  const int32_t* kv_lens = input_device<int32_t>(in.kv_lens);

  FUSELM_THROW_IF_FAILED(embedding(weights_.embedding, dtype_, config_.vocab_size, hidden,
                                   input_device<int32_t>(in.tokens), n, residual, DType::F32, stream_));
  // The fused path folds each residual add into the norm that follows it (one pass, bitwise equal).
  const bool fuse_norms = fused_ != nullptr;
  // A projection on the sm_90a GEMM, else on cuBLASLt. Its two tile widths give the same bits
  // (CudaGemmSm90.TileWidthsGiveTheSameBits), so the width follows the step's token count as the
  // plan's chunk buckets say: 128 features per CTA fill the GPU at short prompts, 256 reuse each
  // activation tile twice as much at long ones.
  // (A step of more tokens than the largest chunk, decode rows of a big batch, takes the largest's.)
  int sm90_tile = 256;
  if (prefill_sm90_) {
    const int chunk = static_cast<int>(std::clamp<int64_t>(n, 1, kernel_plan_.prefill.buckets.back().tokens));
    sm90_tile = kernel_plan_.prefill_bucket(chunk).gemm == "sm90_w128" ? 128 : 256;
  }
  const auto project = [&](const GemmShape& shape, const void* in, const void* weight, void* out) {
    return prefill_sm90_ ? gemm_sm90(in, weight, out, dtype_, n, shape.n, shape.k, sm90_tile, stream_)
                         : gemm_.run(shape, in, weight, out, n, stream_);
  };
  for (int l = 0; l < config_.num_layers; ++l) {
    const DeviceLayerWeights& w = weights_.layers[l];
    const PagedKvView kv = kv_->layer_view(l, block_tables);
    // Attention block.
    if (!fuse_norms || l == 0)
      FUSELM_THROW_IF_FAILED(rmsnorm(residual, w.attn_norm, eps, n, hidden, normed, dtype_, stream_));
    FUSELM_THROW_IF_FAILED(project(qkv_shape_, normed, w.qkv, qkv));
    FUSELM_THROW_IF_FAILED(rope_kv(qkv, q, dtype_, rope_shape_, n, input_device<int32_t>(in.positions),
                                   input_device<int32_t>(in.token_batch), weights_.rope_inv_freq, kv, stream_));
    if (step.decode_only) {
      FUSELM_THROW_IF_FAILED(decode_attention(q, attn_out, dtype_, attention_shape_, kv, kv_lens, step.batch,
                                              decode_plan_, act<void>(a.attention_workspace), stream_));
    } else {
      FUSELM_THROW_IF_FAILED(prefill_attention(q, attn_out, dtype_, attention_shape_, kv,
                                               input_device<int32_t>(in.q_starts), kv_lens, step.batch,
                                               step.max_q_len, stream_));
    }
    FUSELM_THROW_IF_FAILED(project(wo_shape_, attn_out, w.wo, proj));
    // MLP block.
    if (fuse_norms) {
      FUSELM_THROW_IF_FAILED(add_rmsnorm(residual, proj, dtype_, w.ffn_norm, eps, n, hidden, normed, dtype_, stream_));
    } else {
      FUSELM_THROW_IF_FAILED(residual_add(residual, proj, dtype_, n * hidden, stream_));
      FUSELM_THROW_IF_FAILED(rmsnorm(residual, w.ffn_norm, eps, n, hidden, normed, dtype_, stream_));
    }
    if (prefill_sm90_) {
      FUSELM_THROW_IF_FAILED(
          gemm_swiglu_sm90(normed, w.gate_up, ffn_act, dtype_, n, config_.intermediate_size, hidden, stream_));
    } else {
      FUSELM_THROW_IF_FAILED(gemm_.run(gate_up_shape_, normed, w.gate_up, gate_up, n, stream_));
      FUSELM_THROW_IF_FAILED(swiglu(gate_up, ffn_act, dtype_, n, config_.intermediate_size, stream_));
    }
    FUSELM_THROW_IF_FAILED(project(down_shape_, ffn_act, w.down, proj));
    if (fuse_norms && l + 1 < config_.num_layers) {
      FUSELM_THROW_IF_FAILED(add_rmsnorm(residual, proj, dtype_, weights_.layers[l + 1].attn_norm, eps, n, hidden,
                                         normed, dtype_, stream_));
    } else {
      FUSELM_THROW_IF_FAILED(residual_add(residual, proj, dtype_, n * hidden, stream_));
    }
  }
}

void CudaEngineImpl::compute_logits(int first, int n, int step_tokens) {
  const ActivationPlan& a = plan_.activations;
  const int64_t hidden = config_.hidden_size;
  // Only the rows that need logits go through the final norm and the LM head.
  FUSELM_THROW_IF_FAILED(embedding(act<float>(a.residual), DType::F32, step_tokens, hidden,
                                   input_device<int32_t>(plan_.inputs.logit_rows) + first, n, act<float>(a.head_rows),
                                   DType::F32, stream_));
  FUSELM_THROW_IF_FAILED(rmsnorm(act<float>(a.head_rows), weights_.final_norm, config_.rms_norm_eps, n, hidden,
                                 act<void>(a.head_normed), dtype_, stream_));
  FUSELM_THROW_IF_FAILED(
      gemm_.run(lm_head_shape_, act<void>(a.head_normed), weights_.lm_head, act<float>(a.logits), n, stream_));
}

void CudaEngineImpl::commit(const Step& step) {
  for (const auto& [seq_id, length] : step.new_lengths) kv_->set_length(seq_id, length);
}

namespace {

// A mixed step on the fused path runs as two: the single-token chunks (decode) through the fused
// graphs, the rest through prefill, so that a decode token's result never depends on what is
// scheduled beside it. Returns false when the step is not mixed.
bool split_mixed_step(std::span<const SequenceChunk> chunks, std::vector<SequenceChunk>& singles,
                      std::vector<SequenceChunk>& multis, std::vector<bool>& is_single) {
  is_single.clear();
  for (const SequenceChunk& c : chunks) is_single.push_back(c.tokens.size() == 1);
  const auto n_single = std::count(is_single.begin(), is_single.end(), true);
  if (n_single == 0 || n_single == static_cast<std::ptrdiff_t>(chunks.size())) return false;
  std::unordered_set<int> seen;
  for (const SequenceChunk& c : chunks) {
    FUSELM_CHECK(seen.insert(c.seq_id).second, "forward: sequence ", c.seq_id,
                 " appears twice in one step; give each sequence one chunk per step");
    (c.tokens.size() == 1 ? singles : multis).push_back(c);
  }
  return true;
}

}  // namespace

void CudaEngineImpl::forward(std::span<const SequenceChunk> chunks, std::vector<float>& logits) {
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  std::vector<SequenceChunk> singles, multis;
  std::vector<bool> is_single;
  if (fused_ && split_mixed_step(chunks, singles, multis, is_single)) {
    std::vector<float> single_logits, multi_logits;
    forward(multis, multi_logits);
    forward(singles, single_logits);
    logits.clear();
    size_t next_single = 0, next_multi = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const size_t rows = is_single[i] || !chunks[i].all_logits ? 1 : chunks[i].tokens.size();
      const std::vector<float>& src = is_single[i] ? single_logits : multi_logits;
      size_t& next = is_single[i] ? next_single : next_multi;
      logits.insert(logits.end(), src.begin() + static_cast<std::ptrdiff_t>(next * vocab),
                    src.begin() + static_cast<std::ptrdiff_t>((next + rows) * vocab));
      next += rows;
    }
    return;
  }

  device_ids_serial_ = 0;  // a replay overwrites the device's sampled ids
  const Step step = prepare_step(chunks, /*last_rows_only=*/false);
  if (step.fused) {
    run_fused_decode(step, /*rows_sampled=*/false);
    logits.resize(static_cast<size_t>(step.batch) * vocab);
    FUSELM_CUDA_THROW(cudaMemcpyAsync(logits.data(), fused_->logits(), logits.size() * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream_));
    FUSELM_CUDA_THROW(cudaStreamSynchronize(stream_));
    commit(step);
    return;
  }
  run_layers(step);
  logits.resize(static_cast<size_t>(step.logit_rows) * vocab);
  // all_logits chunks can want more rows than the logits buffer holds: slabs of logits_rows.
  for (int first = 0; first < step.logit_rows; first += plan_.limits.logits_rows) {
    const int n = std::min(plan_.limits.logits_rows, step.logit_rows - first);
    compute_logits(first, n, step.tokens);
    FUSELM_CUDA_THROW(cudaMemcpyAsync(logits.data() + static_cast<size_t>(first) * vocab,
                                      act<float>(plan_.activations.logits), static_cast<size_t>(n) * vocab * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream_));
    // The next slab overwrites the logits buffer.
    FUSELM_CUDA_THROW(cudaStreamSynchronize(stream_));
  }
  commit(step);
}

void CudaEngineImpl::forward_sample(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers,
                                        std::vector<int32_t>& tokens) {
  FUSELM_CHECK(samplers.size() == chunks.size(), "forward_sample: one sampler per chunk expected, got ",
               samplers.size(), " for ", chunks.size(), " chunks");
  std::vector<SequenceChunk> singles, multis;
  std::vector<bool> is_single;
  if (fused_ && split_mixed_step(chunks, singles, multis, is_single)) {
    std::vector<SamplerState*> single_samplers, multi_samplers;
    for (size_t i = 0; i < chunks.size(); ++i) (is_single[i] ? single_samplers : multi_samplers).push_back(samplers[i]);
    std::vector<int32_t> single_tokens, multi_tokens;
    forward_sample(multis, multi_samplers, multi_tokens);
    forward_sample(singles, single_samplers, single_tokens);
    tokens.clear();
    size_t next_single = 0, next_multi = 0;
    for (size_t i = 0; i < chunks.size(); ++i)
      tokens.push_back(is_single[i] ? single_tokens[next_single++] : multi_tokens[next_multi++]);
    return;
  }
  device_ids_serial_ = 0;  // this step's sampling overwrites the device's sampled ids
  const int history_stride = check_samplers(samplers);
  const Step step = prepare_step(chunks, /*last_rows_only=*/true);
  const StepInputPlan& in = plan_.inputs;
  write_sample_inputs(step, samplers, history_stride);
  const int32_t* sampled = input_host<int32_t>(in.sampled);
  if (step.fused) {
    sampled = ids_host(run_fused_decode(step, /*rows_sampled=*/true));
  } else {
    upload(in.sample_params, static_cast<size_t>(step.batch) * sizeof(SampleParams));
    upload(in.history, static_cast<size_t>(step.batch) * history_stride * sizeof(int32_t));
    run_layers(step);
    compute_logits(0, step.logit_rows, step.tokens);
    FUSELM_THROW_IF_FAILED(sample_tokens(act<float>(plan_.activations.logits), step.batch, config_.vocab_size,
                                         input_device<SampleParams>(in.sample_params),
                                         input_device<int32_t>(in.history), history_stride,
                                         input_device<int32_t>(in.sampled), stream_));
    FUSELM_CUDA_THROW(cudaMemcpyAsync(input_host<int32_t>(in.sampled), input_device<int32_t>(in.sampled),
                                      static_cast<size_t>(step.batch) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                      stream_));
  }
  FUSELM_CUDA_THROW(cudaStreamSynchronize(stream_));
  commit(step);

  tokens.resize(chunks.size());
  for (int b = 0; b < step.batch; ++b) {
    SamplerState& s = *samplers[b];
    FUSELM_CHECK(sampled[b] >= 0 && sampled[b] < config_.vocab_size, "forward_sample: nothing could be drawn for ",
                 "sequence ", chunks[b].seq_id, " (every logit NaN?)");
    if (!s.params.greedy()) s.rng.next_u64();  // the draw the device made from this state
    s.history.push_back(sampled[b]);
    tokens[b] = sampled[b];
  }
}

int CudaEngineImpl::check_samplers(std::span<SamplerState* const> samplers) const {
  int history_stride = 0;
  for (SamplerState* s : samplers) {
    FUSELM_CHECK(s != nullptr, "forward_sample: null sampler");
    check_sampling_params(s->params);
    if (!s->params.penalised()) continue;
    const size_t window = s->params.penalty_window > 0 ? static_cast<size_t>(s->params.penalty_window)
                                                       : s->history.size();
    history_stride = std::max(history_stride, static_cast<int>(std::min(window, s->history.size())));
  }
  FUSELM_CHECK(history_stride <= plan_.limits.history_capacity, "forward_sample: a repetition-penalty window of ",
               history_stride, " tokens is over the ", plan_.limits.history_capacity,
               " the CUDA sampler holds; use a shorter --penalty-window");
  return history_stride;
}

void CudaEngineImpl::write_sample_inputs(const Step& step, std::span<SamplerState* const> samplers,
                                         int history_stride) {
  // The penalty windows: at the fixed row stride the fused graphs read, else packed with the
  // step's longest as the row stride.
  const StepInputPlan& in = plan_.inputs;
  const int64_t window_stride = step.fused ? plan_.limits.history_capacity : history_stride;
  SampleParams* params =
      step.fused ? staged<SampleParams>(in.decode_params, replay_slot_) : input_host<SampleParams>(in.sample_params);
  bool sent = false;
  int32_t* history = input_host<int32_t>(in.history);
  for (int b = 0; b < step.batch; ++b) {
    const SamplerState& s = *samplers[b];
    SampleParams& p = params[b];
    p.temperature = s.params.temperature;
    p.top_k = s.params.top_k;
    p.top_p = s.params.top_p;
    p.min_p = s.params.min_p;
    p.repetition_penalty = s.params.repetition_penalty;
    p.rng_state = s.rng.state();
    p.history_len = 0;
    if (s.params.penalised()) {
      const size_t window = s.params.penalty_window > 0 ? static_cast<size_t>(s.params.penalty_window)
                                                        : s.history.size();
      const size_t count = std::min(window, s.history.size());
      std::copy(s.history.end() - static_cast<std::ptrdiff_t>(count), s.history.end(),
                history + static_cast<size_t>(b) * window_stride);
      p.history_len = static_cast<int32_t>(count);
      if (step.fused) {
        upload_range(in.history, static_cast<size_t>(b) * window_stride * sizeof(int32_t), count * sizeof(int32_t));
        sent = true;
      }
    }
  }
  if (sent) {
    inputs_sent_->record(stream_);
    inputs_sending_ = true;
  }
}

void CudaEngineImpl::submit_sample(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers) {
  check_submit(chunks, samplers, steps_in_flight());
  SubmittedStep entry;
  entry.serial = next_serial_++;
  entry.samplers.assign(samplers.begin(), samplers.end());
  for (const SequenceChunk& c : chunks) entry.seq_ids.push_back(c.seq_id);
  // A step of single-token chunks on the fused path runs behind the step in flight; a pending
  // token is then read on the device where the previous replay sampled it.
  bool pipelined = options_.pipeline_decode && fused_ != nullptr && !chunks.empty();
  for (const SequenceChunk& c : chunks) pipelined = pipelined && c.tokens.size() == 1;
  std::vector<int32_t> resolved(chunks.size());
  std::vector<SequenceChunk> run(chunks.begin(), chunks.end());
  for (size_t i = 0; i < run.size(); ++i) {
    if (run[i].tokens.size() != 1 || run[i].tokens[0] != kPendingToken) continue;
    const auto it = latest_sample_.find(run[i].seq_id);
    FUSELM_CHECK(it != latest_sample_.end() && it->second.length == kv_->length(run[i].seq_id),
                 "submit_sample: sequence ", run[i].seq_id,
                 " takes kPendingToken but its latest step was not a submitted one that sampled a token");
    if (pipelined && it->second.serial == device_ids_serial_) {
      resolved[i] = -1 - it->second.row;
    } else {
      for (SubmittedStep& s : submitted_)
        if (s.serial == it->second.serial) finish(s);
      resolved[i] = it->second.token;
      FUSELM_CHECK(resolved[i] >= 0, "submit_sample: sequence ", run[i].seq_id,
                   " takes kPendingToken but its previous step drew no token (every logit NaN?)");
    }
    run[i].tokens = std::span<const int32_t>(&resolved[i], 1);
  }

  if (!pipelined) {
    forward_sample(run, samplers, entry.tokens);
    entry.finished = true;
    for (size_t i = 0; i < run.size(); ++i)
      latest_sample_[run[i].seq_id] = {kv_->length(run[i].seq_id), entry.serial, static_cast<int>(i), entry.tokens[i]};
    submitted_.push_back(std::move(entry));
    return;
  }
  const int history_stride = check_samplers(samplers);  // (forward_sample checks its own)
  const Step step = prepare_step(run, /*last_rows_only=*/true, /*device_tokens=*/true);
  write_sample_inputs(step, samplers, history_stride);
  entry.slot = run_fused_decode(step, /*rows_sampled=*/true);
  commit(step);
  device_ids_serial_ = entry.serial;
  for (SamplerState* s : samplers)
    if (!s->params.greedy()) s->rng.next_u64();  // the draw the device makes from this state
  for (size_t i = 0; i < run.size(); ++i)
    latest_sample_[run[i].seq_id] = {kv_->length(run[i].seq_id), entry.serial, static_cast<int>(i), -1};
  submitted_.push_back(std::move(entry));
}

void CudaEngineImpl::finish(SubmittedStep& step) {
  if (step.finished) return;
  replay_done_[static_cast<size_t>(step.slot)]->wait();
  const int32_t* ids = ids_host(step.slot);
  step.tokens.assign(ids, ids + step.samplers.size());
  step.finished = true;
  for (size_t b = 0; b < step.tokens.size(); ++b)
    if (step.tokens[b] >= 0) step.samplers[b]->history.push_back(step.tokens[b]);
  // Only the step's own sequences can point at it (not every live one: a server holds many).
  for (size_t row = 0; row < step.seq_ids.size(); ++row) {
    const auto it = latest_sample_.find(step.seq_ids[row]);
    if (it != latest_sample_.end() && it->second.serial == step.serial) it->second.token = step.tokens[row];
  }
}

void CudaEngineImpl::wait_sample(std::vector<int32_t>& tokens) {
  FUSELM_CHECK(!submitted_.empty(), "wait_sample: no step was submitted and not yet waited for");
  finish(submitted_.front());
  tokens = std::move(submitted_.front().tokens);
  submitted_.pop_front();
  for (size_t b = 0; b < tokens.size(); ++b)
    FUSELM_CHECK(tokens[b] >= 0 && tokens[b] < config_.vocab_size, "wait_sample: nothing could be drawn for row ", b,
                 " of the step (every logit NaN?)");
}

}  // namespace

std::unique_ptr<CudaEngine> make_cuda_engine(const Model& model, const EngineOptions& options) {
  CudaEngineTuning tuning;
  tuning.kv_block_size = options.kv_block_size;
  return make_cuda_engine(model, options, tuning);
}

std::unique_ptr<CudaEngine> make_cuda_engine(const Model& model, const EngineOptions& options,
                                             const CudaEngineTuning& tuning) {
  return std::make_unique<CudaEngineImpl>(model, options, tuning);
}

}  // namespace fuselm
