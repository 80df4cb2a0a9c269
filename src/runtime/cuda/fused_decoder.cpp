#include "runtime/cuda/fused_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/mma_packing.h"

namespace fuselm {

std::string fused_decode_unsupported_reason(const ModelConfig& config, DType dtype) {
  if (dtype != DType::BF16 && dtype != DType::F16) return str_cat("dtype ", dtype_name(dtype), " (bf16 or fp16 only)");
  if (config.head_dim % 16 != 0) return str_cat("head_dim ", config.head_dim, " (a multiple of 16 only)");
  if (config.hidden_size % 2 != 0 || config.intermediate_size % 2 != 0 || config.q_dim() % 2 != 0)
    return "odd matrix widths";
  return "";
}

CudaGraph::~CudaGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
}

CudaGraph::CudaGraph(CudaGraph&& other) noexcept : exec_(other.exec_) { other.exec_ = nullptr; }

CudaGraph& CudaGraph::operator=(CudaGraph&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    exec_ = other.exec_;
    other.exec_ = nullptr;
  }
  return *this;
}

CudaGraph CudaGraph::capture(cudaStream_t stream, const std::function<Status()>& record) {
  FUSELM_CUDA_THROW(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status recorded = record();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!recorded.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    fail("capturing the decode graph: ", recorded.message());
  }
  FUSELM_CUDA_THROW(ended);
  CudaGraph g;
  const cudaError_t instantiated = cudaGraphInstantiate(&g.exec_, graph, 0);
  cudaGraphDestroy(graph);
  FUSELM_CUDA_THROW(instantiated);
  // Uploading now moves the graph's one-time setup out of the first step.
  FUSELM_CUDA_THROW(cudaGraphUpload(g.exec_, stream));
  return g;
}

void CudaGraph::launch(cudaStream_t stream) const { FUSELM_CUDA_THROW(cudaGraphLaunch(exec_, stream)); }

namespace {

// Carves 256-byte aligned slices out of one allocation, in two passes: sizes first, then pointers.
class Carver {
 public:
  size_t take(size_t bytes) {
    const size_t at = total_;
    total_ += (bytes + 255) / 256 * 256;
    return at;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

}  // namespace

FusedDecoder::FusedDecoder(const ModelConfig& config, DType dtype, const DeviceWeights& weights,
                           const DecodeAttentionPlan& attention_plan, const FusedDecodeVariants& variants,
                           std::vector<int> buckets, cudaStream_t stream)
    : attention_plan_(attention_plan), buckets_(std::move(buckets)) {
  FUSELM_CHECK(!buckets_.empty() && std::is_sorted(buckets_.begin(), buckets_.end()) && buckets_.front() >= 1,
               "fused decode: the batch buckets must be ascending and positive");
  const std::string unsupported = fused_decode_unsupported_reason(config, dtype);
  FUSELM_CHECK(unsupported.empty(), "the fused decode path does not support ", unsupported, "; use --path baseline");
  const int hidden = config.hidden_size, q_dim = config.q_dim(), kv_dim = config.kv_dim();
  const int ffn = config.intermediate_size, vocab = config.vocab_size;
  FusedDecodeModel& m = model_;
  m.dtype = dtype;
  m.hidden = hidden;
  m.n_heads = config.num_heads;
  m.n_kv_heads = config.num_kv_heads;
  m.head_dim = config.head_dim;
  m.ffn = ffn;
  m.vocab = vocab;
  m.eps = config.rms_norm_eps;
  m.embedding = weights.embedding;
  m.inv_freq = weights.rope_inv_freq;
  m.variants = variants;

  // Packed weights: per layer qkv, o, gate_up, down, then the LM head.
  const std::vector<int64_t> qkv_map = qkv_rope_row_map(config.num_heads, config.num_kv_heads, config.head_dim);
  const std::vector<int64_t> gate_up_map = gate_up_row_map(ffn);
  struct Matrix {
    const void* src;
    int64_t src_rows, cols;
    const std::vector<int64_t>* row_map;
    PackedWeight* dst;
    int tile_group = 1;  // as the op's variants read it (skinny_tile_group)
    size_t offset = 0;
  };
  const int qkv_group = skinny_tile_group(variants.qkv), o_group = skinny_tile_group(variants.o);
  const int gate_up_group = skinny_tile_group(variants.gate_up), down_group = skinny_tile_group(variants.down);
  m.layers.resize(config.num_layers);
  std::vector<Matrix> matrices;
  for (int l = 0; l < config.num_layers; ++l) {
    const DeviceLayerWeights& w = weights.layers[l];
    FusedDecodeLayer& fl = m.layers[l];
    matrices.push_back({w.qkv, q_dim + 2 * kv_dim, hidden, &qkv_map, &fl.qkv, qkv_group});
    matrices.push_back({w.wo, hidden, q_dim, nullptr, &fl.o, o_group});
    matrices.push_back({w.gate_up, 2 * static_cast<int64_t>(ffn), hidden, &gate_up_map, &fl.gate_up, gate_up_group});
    matrices.push_back({w.down, hidden, ffn, nullptr, &fl.down, down_group});
  }
  matrices.push_back({weights.lm_head, vocab, hidden, nullptr, &m.lm_head, skinny_tile_group(variants.lm_head)});
  Carver packed;
  for (Matrix& mat : matrices) {
    const int64_t rows = mat.row_map != nullptr ? static_cast<int64_t>(mat.row_map->size()) : mat.src_rows;
    *mat.dst = PackedWeight{nullptr, dtype, rows, mat.cols, mat.tile_group};
    mat.offset = packed.take(dtype_bytes(dtype, mma_packed_elems(rows, mat.cols, mat.tile_group)));
  }
  packed_ = DeviceBuffer::allocate(packed.total(), "the fused decode path's packed weights");
  {
    DeviceBuffer maps = DeviceBuffer::allocate((qkv_map.size() + gate_up_map.size()) * sizeof(int64_t),
                                               "row maps for packing");
    int64_t* qkv_map_dev = maps.at<int64_t>(0);
    int64_t* gate_up_map_dev = qkv_map_dev + qkv_map.size();
    FUSELM_CUDA_THROW(cudaMemcpyAsync(qkv_map_dev, qkv_map.data(), qkv_map.size() * sizeof(int64_t),
                                      cudaMemcpyHostToDevice, stream));
    FUSELM_CUDA_THROW(cudaMemcpyAsync(gate_up_map_dev, gate_up_map.data(), gate_up_map.size() * sizeof(int64_t),
                                      cudaMemcpyHostToDevice, stream));
    for (Matrix& mat : matrices) {
      mat.dst->data = packed_.at<void>(mat.offset);
      const int64_t* map = mat.row_map == &qkv_map ? qkv_map_dev : mat.row_map == &gate_up_map ? gate_up_map_dev : nullptr;
      FUSELM_THROW_IF_FAILED(pack_mma_tiles_device(mat.src, dtype, mat.src_rows, mat.cols, map, mat.dst->rows,
                                                   packed_.at<void>(mat.offset), stream, mat.tile_group));
    }
    FUSELM_CUDA_THROW(cudaStreamSynchronize(stream));  // before the row maps are freed
  }

  // Step buffers and logits. The norm weights stay the engine's fp32 copies.
  const FusedDecodeBufferSizes sizes = fused_decode_buffer_sizes(m, attention_plan_);
  Carver carve;
  const size_t residual = carve.take(sizes.residual), xg = carve.take(sizes.xg), partials = carve.take(sizes.partials);
  const size_t q = carve.take(sizes.q), attn = carve.take(sizes.attn), act = carve.take(sizes.act);
  const size_t workspace = carve.take(sizes.attention_workspace);
  const size_t logits = carve.take(static_cast<size_t>(buckets_.back()) * vocab * sizeof(float));
  const size_t pick_keys = carve.take(skinny_greedy_pick_key_bytes(kSkinnyGreedyPickMaxTokens, vocab));
  const size_t pick_count = carve.take(sizeof(int));
  // The O projection in attention's launch where the plan asks for it and the shapes allow.
  const AttentionShape attention_shape{m.n_heads, m.n_kv_heads, m.head_dim, 0.0f};
  m.variants.o_in_attention =
      variants.o_in_attention && decode_o_fold_fits(attention_shape, attention_plan_, m.layers[0].o);
  const size_t fold_ready = carve.take(kDecodeOFoldReadyInts * sizeof(int));
  // The one-launch FFN's schedule (the same for every layer) and its counters.
  FfnSchedule ffn_schedule;
  FfnScheduleShape ffn_shape;
  size_t ffn_offsets = 0, ffn_jobs = 0, ffn_counters = 0;
  if (variants.ffn_one_launch_tokens > 0) {
    int ctas = 0;
    FUSELM_THROW_IF_FAILED(skinny_ffn_ctas(&ctas));
    FUSELM_THROW_IF_FAILED(skinny_ffn_schedule_shape(m.layers[0].gate_up, m.layers[0].down, variants.gate_up.variant,
                                                     variants.down.variant, ctas, &ffn_shape));
    ffn_schedule = make_ffn_schedule(ffn_shape);
    ffn_offsets = carve.take(ffn_schedule.offsets.size() * sizeof(int32_t));
    ffn_jobs = carve.take(ffn_schedule.jobs.size() * sizeof(int32_t));
    ffn_counters = carve.take((ffn_shape.down_pieces + 1) * sizeof(int));
  }
  buffers_ = DeviceBuffer::allocate(carve.total(), "the fused decode path's buffers");
  for (int l = 0; l < config.num_layers; ++l) {
    m.layers[l].attn_norm = weights.layers[l].attn_norm;
    m.layers[l].ffn_norm = weights.layers[l].ffn_norm;
  }
  m.final_norm = weights.final_norm;
  step_buffers_.residual = buffers_.at<float>(residual);
  step_buffers_.xg = buffers_.at<void>(xg);
  step_buffers_.partials = buffers_.at<float>(partials);
  step_buffers_.q = buffers_.at<void>(q);
  step_buffers_.attn = buffers_.at<void>(attn);
  step_buffers_.act = buffers_.at<void>(act);
  step_buffers_.attention_workspace = buffers_.at<void>(workspace);
  FUSELM_THROW_IF_FAILED(decode_attention_init_workspace(step_buffers_.attention_workspace,
                                                         attention_shape, attention_plan_,
                                                         kSkinnyGemmMaxTokens, stream));
  logits_ = buffers_.at<float>(logits);
  step_buffers_.greedy_pick.tile_keys = buffers_.at<uint64_t>(pick_keys);
  step_buffers_.greedy_pick.ctas_done = buffers_.at<int>(pick_count);
  FUSELM_CUDA_THROW(cudaMemsetAsync(step_buffers_.greedy_pick.ctas_done, 0, sizeof(int), stream));
  if (m.variants.o_in_attention) {
    step_buffers_.o_fold_ready = buffers_.at<int>(fold_ready);
    FUSELM_CUDA_THROW(cudaMemsetAsync(step_buffers_.o_fold_ready, 0, kDecodeOFoldReadyInts * sizeof(int), stream));
  }
  if (variants.ffn_one_launch_tokens > 0) {
    SkinnyFfnPlan& p = m.ffn_plan;
    p = SkinnyFfnPlan{ffn_shape.gate_up_pieces, ffn_shape.down_pieces, ffn_shape.ctas, buffers_.at<int32_t>(ffn_offsets),
                      buffers_.at<int32_t>(ffn_jobs), buffers_.at<int>(ffn_counters)};
    FUSELM_CUDA_THROW(cudaMemcpyAsync(const_cast<int32_t*>(p.offsets), ffn_schedule.offsets.data(),
                                      ffn_schedule.offsets.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    FUSELM_CUDA_THROW(cudaMemcpyAsync(const_cast<int32_t*>(p.jobs), ffn_schedule.jobs.data(),
                                      ffn_schedule.jobs.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    FUSELM_CUDA_THROW(cudaMemsetAsync(p.counters, 0, (ffn_shape.down_pieces + 1) * sizeof(int), stream));
  }
  FUSELM_CUDA_THROW(cudaStreamSynchronize(stream));
}

void FusedDecoder::capture(KvCache& kv, const FusedDecodeStepInputs& inputs, cudaStream_t stream, bool trace) {
  FUSELM_CHECK(graphs_.empty(), "fused decode: the graphs are already captured");
  FUSELM_CHECK(inputs.tokens && inputs.positions && inputs.kv_lens && inputs.block_tables && inputs.params &&
                   inputs.history && inputs.sampled && inputs.max_blocks_per_seq > 0 &&
                   inputs.history_stride >= 0 && inputs.staged_inputs[0] && inputs.staged_inputs[1] &&
                   inputs.sampled_host[0] && inputs.sampled_host[1],
               "fused decode: incomplete step inputs");
  const auto at = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  FUSELM_CHECK(at(inputs.params) < at(inputs.tokens) && at(inputs.tokens) < at(inputs.positions) &&
                   at(inputs.positions) < at(inputs.kv_lens) && at(inputs.kv_lens) < at(inputs.block_tables),
               "fused decode: the step inputs must lie in the order params, tokens, positions, kv_lens, block_tables");
  inputs_ = inputs;
  model_.kv_layout = kv.layout();
  for (size_t l = 0; l < model_.layers.size(); ++l) {
    const PagedKvView view = kv.layer_view(static_cast<int>(l), nullptr);
    model_.layers[l].k_cache = view.k;
    model_.layers[l].v_cache = view.v;
  }
  scratch_block_ = kv.reserve_scratch_block();
  if (trace) {
    const int slots = fused_decode_trace_slots(static_cast<int>(model_.layers.size()));
    trace_ = DeviceBuffer::allocate(static_cast<size_t>(slots) * sizeof(KernelTrace), "the decode timeline");
    step_buffers_.trace = trace_.at<KernelTrace>(0);
  }
  for (int bucket : buckets_)
    for (int slot = 0; slot < 2; ++slot)
      graphs_.push_back(CudaGraph::capture(stream, [&] { return record_step(bucket, slot, stream); }));
}

size_t FusedDecoder::staged_bytes(int bucket) const {
  const auto* first = reinterpret_cast<const std::byte*>(inputs_.params);
  const auto* end = reinterpret_cast<const std::byte*>(inputs_.block_tables +
                                                       static_cast<size_t>(bucket) * inputs_.max_blocks_per_seq);
  return static_cast<size_t>(end - first);
}

int FusedDecoder::bucket_for(int batch) const {
  for (int b : buckets_)
    if (b >= batch) return b;
  fail("fused decode: a batch of ", batch, " is over the largest bucket, ", buckets_.back());
}

Status FusedDecoder::record_step(int bucket, int slot, cudaStream_t stream) const {
  const int64_t stride = inputs_.max_blocks_per_seq;
  // The inputs, copied by a kernel: a copy node costs the step more between its neighbours. (The
  // graph writes the device inputs it then reads as const.)
  Status copied = copy_step_inputs(inputs_.staged_inputs[slot], const_cast<SampleParams*>(inputs_.params),
                                   staged_bytes(bucket), stream);
  if (!copied.ok()) return copied;
  // Every timeline slot unset (all bytes 0xFF, kernel_trace.h) before the step's kernels stamp theirs.
  if (step_buffers_.trace != nullptr)
    FUSELM_CUDA_RETURN(cudaMemsetAsync(step_buffers_.trace, 0xFF, trace_.size(), stream));
  // Small buckets take their greedy rows' tokens from the LM head (skinny_gemm.h SkinnyGreedyPick): the
  // sampling kernel then leaves those rows without waiting, so it stands between no two steps.
  const bool pick = bucket <= kSkinnyGreedyPickMaxTokens;
  for (int first = 0; first < bucket; first += kSkinnyGemmMaxTokens) {
    FusedDecodeInputs in;
    in.tokens = inputs_.tokens + first;
    in.sampled = inputs_.sampled;  // rows of the whole bucket: the previous replay's ids
    in.positions = inputs_.positions + first;
    in.kv_lens = inputs_.kv_lens + first;
    in.block_tables = inputs_.block_tables + first * stride;
    in.max_blocks_per_seq = inputs_.max_blocks_per_seq;
    in.m = std::min(kSkinnyGemmMaxTokens, bucket - first);
    FusedDecodeBuffers buf = step_buffers_;
    buf.logits = logits_ + static_cast<size_t>(first) * model_.vocab;
    if (pick) {
      buf.greedy_pick.params = inputs_.params + first;
      buf.greedy_pick.tokens = inputs_.sampled + first;
      buf.greedy_pick.host_tokens = inputs_.sampled_host[slot] + first;
    } else {
      buf.greedy_pick = SkinnyGreedyPick{};
    }
    const Status s = fused_decode_step(model_, buf, in, attention_plan_, stream);
    if (!s.ok()) return s;
  }
  // Sampling inside the graph, writing the ids to the host itself: the host launches one replay,
  // not a replay, a sampling kernel and a copy.
  return sample_tokens(logits_, bucket, model_.vocab, inputs_.params, inputs_.history, inputs_.history_stride,
                       inputs_.sampled, stream, inputs_.sampled_host[slot], model_.pdl, pick);
}

std::vector<KernelTrace> FusedDecoder::trace(cudaStream_t stream) const {
  std::vector<KernelTrace> t(trace_.size() / sizeof(KernelTrace));
  if (t.empty()) return t;
  FUSELM_CUDA_THROW(cudaMemcpyAsync(t.data(), trace_.at<KernelTrace>(0), trace_.size(), cudaMemcpyDeviceToHost, stream));
  FUSELM_CUDA_THROW(cudaStreamSynchronize(stream));
  return t;
}

size_t FusedDecoder::bucket_index(int bucket) const {
  const auto it = std::find(buckets_.begin(), buckets_.end(), bucket);
  FUSELM_CHECK(it != buckets_.end(), "fused decode: ", bucket, " is not a batch bucket");
  return static_cast<size_t>(it - buckets_.begin());
}

void FusedDecoder::run(int bucket, int slot, cudaStream_t stream) const {
  const size_t index = bucket_index(bucket);
  FUSELM_CHECK(slot == 0 || slot == 1, "fused decode: replay slot ", slot, " (0 or 1)");
  graphs_[index * 2 + static_cast<size_t>(slot)].launch(stream);
}

CudaGraph FusedDecoder::lab_capture_steps(int bucket, int steps, cudaStream_t stream) const {
  bucket_index(bucket);  // checks that it is one
  FUSELM_CHECK(steps > 0, "fused decode: a lab graph needs at least one step");
  return CudaGraph::capture(stream, [&] {
    for (int s = 0; s < steps; ++s) {
      const Status st = record_step(bucket, s % 2, stream);
      if (!st.ok()) return st;
    }
    return Status();
  });
}

}  // namespace fuselm
