#pragma once
// Small random-weight models built in memory, and a plain double-precision Llama forward pass
// (no cache, full recompute) to check engines against.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"

namespace fuselm::test {

inline ModelConfig tiny_config() {
  ModelConfig c;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;  // GQA group of 2
  c.head_dim = 8;
  c.intermediate_size = 48;
  c.vocab_size = 97;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5f;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

// A model whose tensors are synthetic (counter-based random values); `materialize` generates their
// host data in `dtype`.
inline std::unique_ptr<Model> tiny_model(const ModelConfig& c = tiny_config(), DType dtype = DType::F32,
                                         bool materialize = true) {
  auto m = std::make_unique<Model>();
  m->config = c;
  m->source = "in-memory tiny model";
  uint64_t seed = 100;
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0.0f) {
    WeightTensor t;
    t.name = name;
    t.shape = std::move(shape);
    t.synthetic = {true, seed++, scale, offset};
    return t;
  };
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), f = c.intermediate_size;
  m->weights.token_embedding = tensor("embed", {c.vocab_size, h}, 1.0f);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    LayerWeights lw;
    lw.attn_norm = tensor(p + "attn_norm", {h}, 0.3f, 1.0f);
    lw.wq = tensor(p + "wq", {q, h}, 0.4f);
    lw.wk = tensor(p + "wk", {kv, h}, 0.4f);
    lw.wv = tensor(p + "wv", {kv, h}, 0.4f);
    lw.wo = tensor(p + "wo", {h, q}, 0.3f);
    lw.ffn_norm = tensor(p + "ffn_norm", {h}, 0.3f, 1.0f);
    lw.w_gate = tensor(p + "w_gate", {f, h}, 0.3f);
    lw.w_up = tensor(p + "w_up", {f, h}, 0.3f);
    lw.w_down = tensor(p + "w_down", {h, f}, 0.3f);
    m->weights.layers.push_back(std::move(lw));
  }
  m->weights.final_norm = tensor("final_norm", {h}, 0.3f, 1.0f);
  if (c.tie_word_embeddings) {
    m->weights.lm_head = m->weights.token_embedding;
  } else {
    m->weights.lm_head = tensor("lm_head", {c.vocab_size, h}, 0.3f);
  }
  if (materialize) m->materialize_synthetic(dtype);
  return m;
}

// Reads every element of a materialized F32/F16/BF16 tensor.
inline std::vector<double> tensor_values(const WeightTensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = load_as_f32(t.data, t.dtype, i);
  return out;
}

// Logits [tokens.size()][vocab] of a full causal forward over `tokens` from position 0, in double,
// written from the Llama definition (HF LlamaForCausalLM) without any of the engine's code.
// Honours config.rope.bf16_inv_freq (default RoPE scaling only).
inline std::vector<double> reference_logits(const Model& m, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = m.config;
  const size_t n = tokens.size(), h = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const size_t q_dim = nh * hd, kv_dim = nkv * hd, f = c.intermediate_size, vocab = c.vocab_size;
  auto matvec = [](const std::vector<double>& w, size_t rows, size_t cols, const double* x, double* y) {
    for (size_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (size_t i = 0; i < cols; ++i) acc += w[r * cols + i] * x[i];
      y[r] = acc;
    }
  };
  auto rmsnorm = [&](const double* x, const std::vector<double>& w, double* y) {
    double ss = 0;
    for (size_t i = 0; i < h; ++i) ss += x[i] * x[i];
    const double inv = 1.0 / std::sqrt(ss / h + c.rms_norm_eps);
    for (size_t i = 0; i < h; ++i) y[i] = x[i] * inv * w[i];
  };
  auto rope = [&](double* v, size_t pos) {  // rotate-half: pair (i, i + hd/2)
    for (size_t i = 0; i < hd / 2; ++i) {
      double inv_freq = std::pow(static_cast<double>(c.rope.theta), -2.0 * i / hd);
      if (c.rope.bf16_inv_freq) inv_freq = round_to(DType::BF16, static_cast<float>(inv_freq));
      const double a = v[i], b = v[i + hd / 2], angle = pos * inv_freq;
      v[i] = a * std::cos(angle) - b * std::sin(angle);
      v[i + hd / 2] = b * std::cos(angle) + a * std::sin(angle);
    }
  };

  const std::vector<double> embed = tensor_values(m.weights.token_embedding);
  std::vector<double> x(n * h);
  for (size_t t = 0; t < n; ++t)
    for (size_t i = 0; i < h; ++i) x[t * h + i] = embed[static_cast<size_t>(tokens[t]) * h + i];

  std::vector<double> normed(h), q(n * q_dim), k(n * kv_dim), v(n * kv_dim), attn(q_dim), proj(h), gate(f), up(f);
  for (const LayerWeights& lw : m.weights.layers) {
    const auto wq = tensor_values(lw.wq), wk = tensor_values(lw.wk), wv = tensor_values(lw.wv),
               wo = tensor_values(lw.wo), an = tensor_values(lw.attn_norm), fn = tensor_values(lw.ffn_norm),
               wg = tensor_values(lw.w_gate), wu = tensor_values(lw.w_up), wd = tensor_values(lw.w_down);
    for (size_t t = 0; t < n; ++t) {
      rmsnorm(&x[t * h], an, normed.data());
      matvec(wq, q_dim, h, normed.data(), &q[t * q_dim]);
      matvec(wk, kv_dim, h, normed.data(), &k[t * kv_dim]);
      matvec(wv, kv_dim, h, normed.data(), &v[t * kv_dim]);
      for (size_t head = 0; head < nh; ++head) rope(&q[t * q_dim + head * hd], t);
      for (size_t head = 0; head < nkv; ++head) rope(&k[t * kv_dim + head * hd], t);
    }
    std::vector<double> x_next = x;
    for (size_t t = 0; t < n; ++t) {
      for (size_t head = 0; head < nh; ++head) {
        const size_t kvh = head / (nh / nkv);
        std::vector<double> scores(t + 1);
        double max_s = -INFINITY;
        for (size_t p = 0; p <= t; ++p) {
          double s = 0;
          for (size_t d = 0; d < hd; ++d) s += q[t * q_dim + head * hd + d] * k[p * kv_dim + kvh * hd + d];
          scores[p] = s / std::sqrt(static_cast<double>(hd));
          max_s = std::max(max_s, scores[p]);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max_s));
        for (size_t d = 0; d < hd; ++d) {
          double o = 0;
          for (size_t p = 0; p <= t; ++p) o += scores[p] / sum * v[p * kv_dim + kvh * hd + d];
          attn[head * hd + d] = o;
        }
      }
      matvec(wo, h, q_dim, attn.data(), proj.data());
      for (size_t i = 0; i < h; ++i) x_next[t * h + i] += proj[i];
      rmsnorm(&x_next[t * h], fn, normed.data());
      matvec(wg, f, h, normed.data(), gate.data());
      matvec(wu, f, h, normed.data(), up.data());
      for (size_t i = 0; i < f; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      matvec(wd, h, f, gate.data(), proj.data());
      for (size_t i = 0; i < h; ++i) x_next[t * h + i] += proj[i];
    }
    x = std::move(x_next);
  }
  const auto final_norm = tensor_values(m.weights.final_norm), head = tensor_values(m.weights.lm_head);
  std::vector<double> logits(n * vocab);
  for (size_t t = 0; t < n; ++t) {
    rmsnorm(&x[t * h], final_norm, normed.data());
    matvec(head, vocab, h, normed.data(), &logits[t * vocab]);
  }
  return logits;
}

}  // namespace fuselm::test
