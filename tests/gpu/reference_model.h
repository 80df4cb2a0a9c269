#pragma once
// For engine tests: small synthetic Llama models built in memory, and a plain fp32 forward pass over
// a whole sequence made from the CPU reference ops (no cache, no batching: the simplest thing
// that is obviously the model).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "model/config.h"
#include "model/model.h"

namespace fuselm::test {

// A small GQA-4 model (head_dim 64, two layers) the fused decode path runs: the engine tests' default.
inline ModelConfig gqa4_config() {
  ModelConfig c;
  c.hidden_size = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 64;
  c.intermediate_size = 688;
  c.vocab_size = 1000;
  c.max_position_embeddings = 4096;
  c.tie_word_embeddings = true;
  return c;
}

// A synthetic model of `config`: every tensor has a SyntheticInit; host data only if `materialize`
// (then in f32, so that tests can round it to any dtype themselves).
inline std::unique_ptr<Model> make_synthetic_model(const ModelConfig& config, bool materialize, uint64_t seed = 1) {
  auto model = std::make_unique<Model>();
  model->config = config;
  model->source = "synthetic test model";
  uint64_t next_seed = seed * 1000;
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset) {
    WeightTensor t;
    t.name = name;
    t.dtype = DType::F32;
    t.shape = std::move(shape);
    t.synthetic = {true, next_seed++, scale, offset};
    return t;
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    // Uniform in [-s, s) has variance s^2/3: s = sqrt(3 / cols) keeps activations near unit scale.
    return tensor(name, {rows, cols}, std::sqrt(3.0f / static_cast<float>(cols)), 0.0f);
  };
  const int64_t h = config.hidden_size;
  ModelWeights& w = model->weights;
  w.token_embedding = tensor("token_embd", {config.vocab_size, h}, 1.0f, 0.0f);
  for (int l = 0; l < config.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights lw;
    lw.attn_norm = tensor(p + "attn_norm", {h}, 0.2f, 1.0f);
    lw.wq = matrix(p + "wq", config.q_dim(), h);
    lw.wk = matrix(p + "wk", config.kv_dim(), h);
    lw.wv = matrix(p + "wv", config.kv_dim(), h);
    lw.wo = matrix(p + "wo", h, config.q_dim());
    lw.ffn_norm = tensor(p + "ffn_norm", {h}, 0.2f, 1.0f);
    lw.w_gate = matrix(p + "w_gate", config.intermediate_size, h);
    lw.w_up = matrix(p + "w_up", config.intermediate_size, h);
    lw.w_down = matrix(p + "w_down", h, config.intermediate_size);
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = tensor("output_norm", {h}, 0.2f, 1.0f);
  if (config.tie_word_embeddings)
    w.lm_head = w.token_embedding;
  else
    w.lm_head = matrix("output", config.vocab_size, h);
  if (materialize) model->materialize_synthetic(DType::F32);
  return model;
}

// fp32 forward over whole sequences. Matrices and the embedding are first rounded to `dtype` (what
// the GPU engine stores); norm weights stay fp32 (as the GPU engine keeps them).
class ReferenceModel {
 public:
  ReferenceModel(const Model& model, DType dtype) : c_(model.config) {
    auto values = [&](const WeightTensor& t, bool round) {
      std::vector<float> v(static_cast<size_t>(t.numel()));
      if (t.has_data()) {
        convert_dtype(t.data, t.dtype, v.data(), DType::F32, t.numel());
      } else {
        fill_synthetic(t.synthetic, t.numel(), DType::F32, v.data());
      }
      if (round)
        for (float& x : v) x = round_to(dtype, x);
      return v;
    };
    const ModelWeights& w = model.weights;
    embedding_ = values(w.token_embedding, true);
    for (const LayerWeights& l : w.layers) {
      layers_.push_back({values(l.attn_norm, false), values(l.wq, true), values(l.wk, true), values(l.wv, true),
                         values(l.wo, true), values(l.ffn_norm, false), values(l.w_gate, true), values(l.w_up, true),
                         values(l.w_down, true)});
    }
    final_norm_ = values(w.final_norm, false);
    lm_head_ = values(w.lm_head, true);
    inv_freq_ = rope_inv_freq(c_.rope, c_.head_dim);
  }

  // Logits [tokens.size()][vocab], the sequence starting at position 0.
  std::vector<float> forward(const std::vector<int32_t>& tokens) const {
    const int64_t n = static_cast<int64_t>(tokens.size()), h = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim();
    const int64_t ffn = c_.intermediate_size;
    std::vector<int32_t> positions(tokens.size());
    for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int32_t>(i);
    std::vector<float> x(n * h), normed(n * h), q(n * qd), k(n * kvd), v(n * kvd), attn(n * qd), proj(n * h),
        gate(n * ffn), up(n * ffn), act(n * ffn);
    cpu::embedding(ref(embedding_, c_.vocab_size, h), tokens.data(), n, x.data());
    for (const Layer& l : layers_) {
      cpu::rmsnorm(x.data(), ref(l.attn_norm, 1, h), c_.rms_norm_eps, n, h, normed.data());
      cpu::matmul(normed.data(), n, ref(l.wq, qd, h), q.data());
      cpu::matmul(normed.data(), n, ref(l.wk, kvd, h), k.data());
      cpu::matmul(normed.data(), n, ref(l.wv, kvd, h), v.data());
      cpu::rope(q.data(), n, c_.num_heads, c_.head_dim, positions.data(), inv_freq_.data());
      cpu::rope(k.data(), n, c_.num_kv_heads, c_.head_dim, positions.data(), inv_freq_.data());
      cpu::attention(q.data(), k.data(), v.data(), positions.data(), n, n, c_.num_heads, c_.num_kv_heads,
                     c_.head_dim, 1.0f / std::sqrt(static_cast<float>(c_.head_dim)), attn.data());
      cpu::matmul(attn.data(), n, ref(l.wo, h, qd), proj.data());
      cpu::add_inplace(x.data(), proj.data(), n * h);
      cpu::rmsnorm(x.data(), ref(l.ffn_norm, 1, h), c_.rms_norm_eps, n, h, normed.data());
      cpu::matmul(normed.data(), n, ref(l.w_gate, ffn, h), gate.data());
      cpu::matmul(normed.data(), n, ref(l.w_up, ffn, h), up.data());
      cpu::swiglu(gate.data(), up.data(), n * ffn, act.data());
      cpu::matmul(act.data(), n, ref(l.w_down, h, ffn), proj.data());
      cpu::add_inplace(x.data(), proj.data(), n * h);
    }
    cpu::rmsnorm(x.data(), ref(final_norm_, 1, h), c_.rms_norm_eps, n, h, normed.data());
    std::vector<float> logits(n * c_.vocab_size);
    cpu::matmul(normed.data(), n, ref(lm_head_, c_.vocab_size, h), logits.data());
    return logits;
  }

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
  };
  static cpu::MatrixRef ref(const std::vector<float>& v, int64_t rows, int64_t cols) {
    return {v.data(), DType::F32, rows, cols};
  }

  ModelConfig c_;
  std::vector<float> embedding_;
  std::vector<Layer> layers_;
  std::vector<float> final_norm_, lm_head_;
  std::vector<float> inv_freq_;
};

// ||a - b|| / ||b|| over equal-length spans.
inline double relative_l2(const float* a, const float* b, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

inline int argmax(const float* v, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int>(best);
}

// The gap between the largest and second largest value.
inline float top2_gap(const float* v, size_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (size_t i = 0; i < n; ++i) {
    if (v[i] > a) {
      b = a;
      a = v[i];
    } else if (v[i] > b) {
      b = v[i];
    }
  }
  return a - b;
}

}  // namespace fuselm::test
