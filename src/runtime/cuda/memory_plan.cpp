#include "runtime/cuda/memory_plan.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cuda/sampling.h"

namespace fuselm {

StepLimits make_step_limits(const ModelConfig& config, const EngineOptions& options, int block_size) {
  FUSELM_CHECK(options.dtype == DType::BF16 || options.dtype == DType::F16,
               "the CUDA backend computes in bf16 or fp16, not ", dtype_name(options.dtype),
               " (supported: bf16, fp16); pass --dtype bf16 or --dtype fp16");
  FUSELM_CHECK(options.max_batch >= 1, "max_batch must be at least 1, got ", options.max_batch);
  FUSELM_CHECK(options.max_prefill_tokens >= 1, "max_prefill_tokens must be at least 1, got ",
               options.max_prefill_tokens);
  FUSELM_CHECK(options.max_seq_len >= 0, "max_seq_len must be >= 0 (0 = the model's), got ", options.max_seq_len);
  FUSELM_CHECK(block_size >= 1 && block_size <= 1024 && (block_size & (block_size - 1)) == 0,
               "KV block size must be a power of two between 1 and 1024, got ", block_size);
  StepLimits l;
  l.max_batch = options.max_batch;
  l.max_tokens = std::max(options.max_prefill_tokens, options.max_batch);
  const int model_max = config.max_position_embeddings;
  if (options.max_seq_len > 0)
    l.max_seq_len = model_max > 0 ? std::min(model_max, options.max_seq_len) : options.max_seq_len;
  else
    l.max_seq_len = model_max > 0 ? std::min(model_max, kDefaultMaxSeqLenCap) : kDefaultMaxSeqLenCap;
  l.block_size = block_size;
  l.max_blocks_per_seq = (l.max_seq_len + block_size - 1) / block_size;
  l.logits_rows = options.max_batch;
  l.history_capacity = l.max_seq_len;
  // Grid sizes and int32 indices: keep every per-step count comfortably inside them.
  FUSELM_CHECK(l.max_tokens <= (1 << 20), "max_prefill_tokens ", options.max_prefill_tokens,
               " is over the CUDA backend's limit of ", 1 << 20, " tokens per step");
  FUSELM_CHECK(l.max_batch <= 65535, "max_batch ", l.max_batch, " is over the CUDA backend's limit of 65535");
  return l;
}

namespace {

// Slices are 256-byte aligned: what cuBLASLt's default heuristic assumes, and a whole number of
// 16-byte vectors for every kernel.
class ArenaBuilder {
 public:
  ArenaSlice add(size_t bytes) {
    ArenaSlice s{total_, bytes};
    total_ += (bytes + 255) / 256 * 256;
    return s;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

}  // namespace

MemoryPlan plan_memory(const ModelConfig& c, DType dtype, const StepLimits& l, size_t gemm_workspace_bytes,
                       size_t attention_workspace_bytes, bool gate_up_rows) {
  MemoryPlan plan;
  plan.limits = l;
  const size_t act = dtype_bytes(dtype, 1);
  const size_t t = static_cast<size_t>(l.max_tokens), rows = static_cast<size_t>(l.logits_rows);
  const size_t hidden = c.hidden_size, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ffn = c.intermediate_size;

  ArenaBuilder a;
  ActivationPlan& p = plan.activations;
  p.residual = a.add(t * hidden * sizeof(float));
  p.normed = a.add(t * hidden * act);
  p.qkv = a.add(t * (q_dim + 2 * kv_dim) * act);
  p.q = a.add(t * q_dim * act);
  p.attn_out = a.add(t * q_dim * act);
  p.proj = a.add(t * hidden * act);
  p.gate_up = a.add(gate_up_rows ? t * 2 * ffn * act : 0);
  p.ffn_act = a.add(t * ffn * act);
  p.head_rows = a.add(rows * hidden * sizeof(float));
  p.head_normed = a.add(rows * hidden * act);
  p.logits = a.add(rows * static_cast<size_t>(c.vocab_size) * sizeof(float));
  p.gemm_workspace = a.add(gemm_workspace_bytes);
  p.attention_workspace = a.add(attention_workspace_bytes);
  p.total = a.total();

  ArenaBuilder b;
  StepInputPlan& in = plan.inputs;
  const size_t batch = static_cast<size_t>(l.max_batch);
  in.tokens = b.add(t * sizeof(int32_t));
  in.positions = b.add(t * sizeof(int32_t));
  in.token_batch = b.add(t * sizeof(int32_t));
  in.logit_rows = b.add(t * sizeof(int32_t));
  in.q_starts = b.add((batch + 1) * sizeof(int32_t));
  in.kv_lens = b.add(batch * sizeof(int32_t));
  in.block_tables = b.add(batch * l.max_blocks_per_seq * sizeof(int32_t));
  in.sample_params = b.add(batch * sizeof(SampleParams));
  in.history = b.add(batch * l.history_capacity * sizeof(int32_t));
  in.sampled = b.add(batch * sizeof(int32_t));
  in.decode_params = b.add(batch * sizeof(SampleParams));
  in.decode_tokens = b.add(batch * sizeof(int32_t));
  in.decode_positions = b.add(batch * sizeof(int32_t));
  in.decode_kv_lens = b.add(batch * sizeof(int32_t));
  in.decode_block_tables = b.add(batch * l.max_blocks_per_seq * sizeof(int32_t));
  in.total = b.total();
  return plan;
}

size_t kv_block_bytes(const ModelConfig& c, DType dtype, int block_size) {
  return static_cast<size_t>(c.num_layers) * 2 * c.num_kv_heads * block_size * c.head_dim * dtype_bytes(dtype, 1);
}

}  // namespace fuselm
