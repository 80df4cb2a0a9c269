#include "runtime/cpu_engine.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "kernels/cpu/ops.h"

namespace fuselm {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

cpu::MatrixRef matrix(const WeightTensor& t) { return {t.data, t.dtype, t.rows(), t.cols()}; }

// Checks a tensor is usable by the CPU kernels: host data present, the shape the config implies,
// and a dtype the kernels read (Q8_0 only for matrices whose rows are whole blocks).
void check_tensor(const Model& model, const WeightTensor& t, const std::vector<int64_t>& expected, bool is_matrix) {
  if (!t.has_data()) {
    FUSELM_CHECK(!t.synthetic.active, "model '", model.source, "': synthetic tensor '", t.name,
                 "' has no host data; the CPU backend computes on host weights, so load the model with "
                 "LoadOptions::materialize_synthetic = true (or call Model::materialize_synthetic())");
    fail("model '", model.source, "': tensor '", t.name, "' has no data (the loader left it empty)");
  }
  FUSELM_CHECK(t.shape == expected, "model '", model.source, "': tensor '", t.name, "' has shape ",
               shape_text(t.shape), " but the config implies ", shape_text(expected));
  if (t.dtype == DType::Q8_0) {
    FUSELM_CHECK(is_matrix && t.cols() % kQ8_0BlockSize == 0, "model '", model.source, "': tensor '", t.name,
                 "' is Q8_0, which the CPU backend reads only for matrices with a multiple of 32 columns; "
                 "found shape ", shape_text(t.shape));
  }
}

}  // namespace

class CpuEngine final : public Engine {
 public:
  CpuEngine(const Model& model, const EngineOptions& options);

  const ModelConfig& config() const override { return config_; }
  std::string description() const override { return "cpu reference (fp32 compute, contiguous fp32 KV cache)"; }

  int add_sequence() override;
  void remove_sequence(int seq_id) override;
  int sequence_length(int seq_id) const override;
  // The cache grows per sequence as tokens come, so it is bounded only by the stated limits:
  // max_batch sequences of the longest length (one-token blocks, nothing lost to rounding).
  KvCapacity kv_capacity() const override {
    const int64_t tokens = options_.max_batch > 0 ? int64_t{options_.max_batch} * max_seq_len_
                                                  : std::numeric_limits<int64_t>::max();
    return {tokens, 1, max_seq_len_};
  }
  void forward(std::span<const SequenceChunk> chunks, std::vector<float>& logits) override;

 private:
  // One sequence's cache: per layer, K and V as [length, n_kv_heads, head_dim], grown as tokens come.
  struct Sequence {
    int length = 0;
    std::vector<std::vector<float>> k, v;
  };

  void validate(std::span<const SequenceChunk> chunks) const;
  Sequence& sequence(int seq_id, const char* where);
  const Sequence& sequence(int seq_id, const char* where) const;

  const Model& model_;
  const ModelConfig& config_;
  EngineOptions options_;
  int max_seq_len_ = 0;
  std::vector<float> inv_freq_;
  std::unordered_map<int, Sequence> sequences_;
  int next_seq_id_ = 0;

  // Activations, reused between calls: [tokens, width].
  std::vector<float> x_, normed_, q_, k_, v_, attn_, proj_, gate_, up_;
};

CpuEngine::CpuEngine(const Model& model, const EngineOptions& options)
    : model_(model), config_(model.config), options_(options) {
  config_.validate(model.source);
  const ModelConfig& c = config_;
  const ModelWeights& w = model.weights;
  FUSELM_CHECK(static_cast<int>(w.layers.size()) == c.num_layers, "model '", model.source, "' has weights for ",
               w.layers.size(), " layers but its config says ", c.num_layers);
  const int64_t hidden = c.hidden_size, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ffn = c.intermediate_size;
  check_tensor(model, w.token_embedding, {c.vocab_size, hidden}, true);
  check_tensor(model, w.final_norm, {hidden}, false);
  check_tensor(model, w.lm_head, {c.vocab_size, hidden}, true);
  for (const LayerWeights& l : w.layers) {
    check_tensor(model, l.attn_norm, {hidden}, false);
    check_tensor(model, l.wq, {q_dim, hidden}, true);
    check_tensor(model, l.wk, {kv_dim, hidden}, true);
    check_tensor(model, l.wv, {kv_dim, hidden}, true);
    check_tensor(model, l.wo, {hidden, q_dim}, true);
    check_tensor(model, l.ffn_norm, {hidden}, false);
    check_tensor(model, l.w_gate, {ffn, hidden}, true);
    check_tensor(model, l.w_up, {ffn, hidden}, true);
    check_tensor(model, l.w_down, {hidden, ffn}, true);
  }

  // The cache grows lazily, so the only limit is the one the model or the caller states.
  max_seq_len_ = c.max_position_embeddings > 0 ? c.max_position_embeddings : INT_MAX;
  if (options.max_seq_len > 0) max_seq_len_ = std::min(max_seq_len_, options.max_seq_len);
  inv_freq_ = rope_inv_freq(c.rope, c.head_dim);
}

int CpuEngine::add_sequence() {
  const int id = next_seq_id_++;
  Sequence& s = sequences_[id];
  s.k.resize(static_cast<size_t>(config_.num_layers));
  s.v.resize(static_cast<size_t>(config_.num_layers));
  return id;
}

CpuEngine::Sequence& CpuEngine::sequence(int seq_id, const char* where) {
  auto it = sequences_.find(seq_id);
  FUSELM_CHECK(it != sequences_.end(), where, ": no sequence with id ", seq_id,
               " (create one with add_sequence; removed sequences cannot be reused)");
  return it->second;
}

const CpuEngine::Sequence& CpuEngine::sequence(int seq_id, const char* where) const {
  return const_cast<CpuEngine*>(this)->sequence(seq_id, where);
}

void CpuEngine::remove_sequence(int seq_id) {
  sequence(seq_id, "remove_sequence");
  sequences_.erase(seq_id);
}

int CpuEngine::sequence_length(int seq_id) const { return sequence(seq_id, "sequence_length").length; }

// Everything is checked before any cache is touched, so a rejected step leaves every sequence as it was.
void CpuEngine::validate(std::span<const SequenceChunk> chunks) const {
  FUSELM_CHECK(options_.max_batch <= 0 || static_cast<int>(chunks.size()) <= options_.max_batch, "forward: ",
               chunks.size(), " chunks in one step, more than the engine's max_batch of ", options_.max_batch);
  std::unordered_set<int> seen;
  int64_t total = 0;
  for (const SequenceChunk& chunk : chunks) {
    const Sequence& s = sequence(chunk.seq_id, "forward");
    FUSELM_CHECK(seen.insert(chunk.seq_id).second, "forward: sequence ", chunk.seq_id,
                 " appears in more than one chunk of the same step; put its tokens in one chunk");
    FUSELM_CHECK(!chunk.tokens.empty(), "forward: the chunk for sequence ", chunk.seq_id, " has no tokens");
    for (size_t i = 0; i < chunk.tokens.size(); ++i) {
      const int32_t id = chunk.tokens[i];
      FUSELM_CHECK(id >= 0 && id < config_.vocab_size, "forward: token id ", id, " at index ", i,
                   " of the chunk for sequence ", chunk.seq_id, " is outside the vocabulary [0, ",
                   config_.vocab_size, ")");
    }
    const int64_t new_length = static_cast<int64_t>(s.length) + static_cast<int64_t>(chunk.tokens.size());
    FUSELM_CHECK(new_length <= max_seq_len_, "forward: sequence ", chunk.seq_id, " would grow to ", new_length,
                 " tokens (", s.length, " cached + ", chunk.tokens.size(), " new), beyond the limit of ",
                 max_seq_len_, " (model max_position_embeddings ", config_.max_position_embeddings,
                 ", engine max_seq_len ", options_.max_seq_len, " where 0 = the model's)");
    total += static_cast<int64_t>(chunk.tokens.size());
  }
  FUSELM_CHECK(options_.max_prefill_tokens <= 0 || total <= options_.max_prefill_tokens, "forward: ", total,
               " tokens in one step, more than the engine's max_prefill_tokens of ", options_.max_prefill_tokens,
               "; feed long prompts in chunks");
}

void CpuEngine::forward(std::span<const SequenceChunk> chunks, std::vector<float>& logits) {
  validate(chunks);
  const ModelConfig& c = config_;
  const ModelWeights& w = model_.weights;
  const int64_t hidden = c.hidden_size, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ffn = c.intermediate_size;
  const int64_t vocab = c.vocab_size;

  // Flatten the ragged batch: token t of chunk b sits at row offsets[b] + t.
  std::vector<int32_t> tokens, positions;
  std::vector<int64_t> offsets;
  std::vector<int64_t> logit_rows;  // which activation rows produce logits, in output order
  for (const SequenceChunk& chunk : chunks) {
    const int start = sequence(chunk.seq_id, "forward").length;
    offsets.push_back(static_cast<int64_t>(tokens.size()));
    for (size_t i = 0; i < chunk.tokens.size(); ++i) {
      if (chunk.all_logits || i + 1 == chunk.tokens.size()) logit_rows.push_back(static_cast<int64_t>(tokens.size()));
      tokens.push_back(chunk.tokens[i]);
      positions.push_back(start + static_cast<int32_t>(i));
    }
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  logits.resize(static_cast<size_t>(logit_rows.size() * vocab));
  if (n == 0) return;

  auto sized = [](std::vector<float>& buf, int64_t count) -> float* {
    buf.resize(static_cast<size_t>(count));
    return buf.data();
  };
  float* x = sized(x_, n * hidden);
  float* normed = sized(normed_, n * hidden);
  float* q = sized(q_, n * q_dim);
  float* k = sized(k_, n * kv_dim);
  float* v = sized(v_, n * kv_dim);
  float* attn = sized(attn_, n * q_dim);
  float* proj = sized(proj_, n * hidden);
  float* gate = sized(gate_, n * ffn);
  float* up = sized(up_, n * ffn);

  // Grow every touched cache once, up front; lengths are committed after the last layer.
  for (const SequenceChunk& chunk : chunks) {
    Sequence& s = sequence(chunk.seq_id, "forward");
    const size_t new_size = static_cast<size_t>((s.length + static_cast<int64_t>(chunk.tokens.size())) * kv_dim);
    for (int l = 0; l < c.num_layers; ++l) {
      s.k[l].resize(new_size);
      s.v[l].resize(new_size);
    }
  }

  cpu::embedding(matrix(w.token_embedding), tokens.data(), n, x);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    cpu::rmsnorm(x, matrix(lw.attn_norm), c.rms_norm_eps, n, hidden, normed);
    cpu::matmul(normed, n, matrix(lw.wq), q);
    cpu::matmul(normed, n, matrix(lw.wk), k);
    cpu::matmul(normed, n, matrix(lw.wv), v);
    cpu::rope(q, n, c.num_heads, c.head_dim, positions.data(), inv_freq_.data());
    cpu::rope(k, n, c.num_kv_heads, c.head_dim, positions.data(), inv_freq_.data());
    for (size_t b = 0; b < chunks.size(); ++b) {
      Sequence& s = sequence(chunks[b].seq_id, "forward");
      const int64_t count = static_cast<int64_t>(chunks[b].tokens.size());
      const int64_t row = offsets[b];
      std::copy_n(k + row * kv_dim, count * kv_dim, s.k[l].begin() + s.length * kv_dim);
      std::copy_n(v + row * kv_dim, count * kv_dim, s.v[l].begin() + s.length * kv_dim);
      cpu::attention(q + row * q_dim, s.k[l].data(), s.v[l].data(), positions.data() + row, count,
                     s.length + count, c.num_heads, c.num_kv_heads, c.head_dim, scale, attn + row * q_dim);
    }
    cpu::matmul(attn, n, matrix(lw.wo), proj);
    cpu::add_inplace(x, proj, n * hidden);

    cpu::rmsnorm(x, matrix(lw.ffn_norm), c.rms_norm_eps, n, hidden, normed);
    cpu::matmul(normed, n, matrix(lw.w_gate), gate);
    cpu::matmul(normed, n, matrix(lw.w_up), up);
    cpu::swiglu(gate, up, n * ffn, gate);
    cpu::matmul(gate, n, matrix(lw.w_down), proj);
    cpu::add_inplace(x, proj, n * hidden);
  }
  for (const SequenceChunk& chunk : chunks) {
    sequence(chunk.seq_id, "forward").length += static_cast<int>(chunk.tokens.size());
  }

  // Only rows that produce logits go through the final norm and the (large) LM head.
  const int64_t rows = static_cast<int64_t>(logit_rows.size());
  for (int64_t r = 0; r < rows; ++r) std::copy_n(x + logit_rows[r] * hidden, hidden, normed + r * hidden);
  cpu::rmsnorm(normed, matrix(w.final_norm), c.rms_norm_eps, rows, hidden, normed);
  cpu::matmul(normed, rows, matrix(w.lm_head), logits.data());
}

std::unique_ptr<Engine> make_cpu_engine(const Model& model, const EngineOptions& options) {
  return std::make_unique<CpuEngine>(model, options);
}

}  // namespace fuselm
