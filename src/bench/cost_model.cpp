#include "bench/cost_model.h"

#include "core/error.h"

namespace fuselm::bench {

int64_t CostModel::matmul_params_per_layer() const {
  const int64_t h = hidden;
  return h * q_dim()          // wq
         + 2 * h * kv_dim()   // wk, wv
         + q_dim() * h        // wo
         + 3 * h * ffn;       // gate, up, down
}

int64_t CostModel::parameter_count() const {
  const int64_t per_layer = matmul_params_per_layer() + 2 * int64_t{hidden};
  const int64_t embeddings = lm_head_params() * (tied ? 1 : 2);
  return per_layer * layers + hidden + embeddings;
}

int64_t CostModel::layer_weight_bytes() const {
  const int64_t h = hidden;
  const int64_t matrices = static_cast<int64_t>(dtype_bytes(weight_dtype, h * q_dim())) +
                           2 * static_cast<int64_t>(dtype_bytes(weight_dtype, h * kv_dim())) +
                           static_cast<int64_t>(dtype_bytes(weight_dtype, q_dim() * h)) +
                           3 * static_cast<int64_t>(dtype_bytes(weight_dtype, h * ffn));
  return matrices + 2 * static_cast<int64_t>(dtype_bytes(norm_dtype, h));
}

int64_t CostModel::lm_head_bytes() const {
  return static_cast<int64_t>(dtype_bytes(weight_dtype, lm_head_params()));
}

int64_t CostModel::embedding_row_bytes() const {
  return static_cast<int64_t>(dtype_bytes(weight_dtype, hidden));
}

int64_t CostModel::weight_bytes() const {
  return layer_weight_bytes() * layers + static_cast<int64_t>(dtype_bytes(norm_dtype, hidden)) +
         lm_head_bytes() * (tied ? 1 : 2);
}

int64_t CostModel::kv_bytes_per_token() const {
  return 2 * int64_t{layers} * static_cast<int64_t>(dtype_bytes(kv_dtype, kv_dim()));
}

int64_t CostModel::activation_bytes_per_token() const {
  const int64_t h = hidden;
  // attn-norm out, q|k|v, attention out, residual, ffn-norm out, silu(gate)*up, residual.
  const int64_t per_layer_elems = h + (q_dim() + 2 * kv_dim()) + q_dim() + h + h + ffn + h;
  const int64_t written_and_read = 2;
  const int64_t layer_bytes = written_and_read * static_cast<int64_t>(dtype_bytes(act_dtype, per_layer_elems));
  const int64_t final_norm = written_and_read * static_cast<int64_t>(dtype_bytes(act_dtype, h));
  const int64_t logits = written_and_read * int64_t{vocab} * 4;  // fp32 logits for the sampler
  return layer_bytes * layers + final_norm + logits;
}

CostModel make_cost_model(const ModelConfig& config, DType weight_dtype, DType kv_dtype, DType act_dtype) {
  config.validate("cost model");
  CostModel m;
  m.layers = config.num_layers;
  m.hidden = config.hidden_size;
  m.heads = config.num_heads;
  m.kv_heads = config.num_kv_heads;
  m.head_dim = config.head_dim;
  m.ffn = config.intermediate_size;
  m.vocab = config.vocab_size;
  m.tied = config.tie_word_embeddings;
  m.weight_dtype = weight_dtype;
  m.norm_dtype = weight_dtype == DType::Q8_0 ? DType::F32 : weight_dtype;
  FUSELM_CHECK(kv_dtype != DType::Q8_0 && act_dtype != DType::Q8_0,
               "cost model: KV cache and activations are f32, f16 or bf16, not q8_0");
  m.kv_dtype = kv_dtype;
  m.act_dtype = act_dtype;
  return m;
}

StepBytes& StepBytes::operator+=(const StepBytes& o) {
  weights += o.weights;
  kv_read += o.kv_read;
  kv_write += o.kv_write;
  activations += o.activations;
  return *this;
}

namespace {
int64_t shared_weight_bytes(const CostModel& m, int batch) {
  int64_t bytes = m.layer_weight_bytes() * m.layers + static_cast<int64_t>(dtype_bytes(m.norm_dtype, m.hidden)) +
                  m.lm_head_bytes();
  if (!m.tied) bytes += m.embedding_row_bytes() * batch;
  return bytes;
}
}  // namespace

StepBytes decode_step_bytes(const CostModel& m, int batch, int64_t cached_len) {
  FUSELM_CHECK(batch > 0 && cached_len >= 0, "decode_step_bytes: batch must be positive and cached_len "
               "non-negative, got batch=", batch, " cached_len=", cached_len);
  StepBytes b;
  b.weights = shared_weight_bytes(m, batch);
  b.kv_read = m.kv_bytes_per_token() * cached_len * batch;
  b.kv_write = m.kv_bytes_per_token() * batch;
  b.activations = m.activation_bytes_per_token() * batch;
  return b;
}

StepBytes decode_step_bytes(const CostModel& m, std::span<const int64_t> cached_lens) {
  FUSELM_CHECK(!cached_lens.empty(), "decode_step_bytes: no sequences in the step");
  const int batch = static_cast<int>(cached_lens.size());
  int64_t cached = 0;
  for (int64_t len : cached_lens) {
    FUSELM_CHECK(len >= 0, "decode_step_bytes: negative cached length ", len);
    cached += len;
  }
  StepBytes b = decode_step_bytes(m, batch, 0);
  b.kv_read = m.kv_bytes_per_token() * cached;
  return b;
}

int64_t causal_context_sum(int64_t start, int64_t n) {
  // sum_{i=0}^{n-1} (start + 1 + i) = n * (start + 1) + n (n - 1) / 2
  return n * (start + 1) + n * (n - 1) / 2;
}

double attention_flops(const CostModel& m, int64_t start, int64_t tokens) {
  return 4.0 * m.layers * m.heads * m.head_dim * static_cast<double>(causal_context_sum(start, tokens));
}

double prefill_flops(const CostModel& m, int64_t start, int64_t tokens, int64_t logit_rows) {
  const double matmuls = 2.0 * static_cast<double>(m.matmul_params()) * static_cast<double>(tokens);
  const double lm_head = 2.0 * static_cast<double>(m.lm_head_params()) * static_cast<double>(logit_rows);
  return matmuls + lm_head + attention_flops(m, start, tokens);
}

double decode_step_flops(const CostModel& m, int batch, int64_t cached_len) {
  return prefill_flops(m, cached_len, 1, 1) * batch;
}

}  // namespace fuselm::bench
