#pragma once
// Helpers for model-loader tests: a temporary directory, writers for small crafted model files
// (safetensors, GGUF, llama2.c), and a plain fp32 forward pass built from the CPU reference ops
// that checks loaded weights end to end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "model/model.h"

namespace fuselm::test {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "fuselm-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <class T>
void append_pod(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// The shapes and settings of the shared tiny-llama2 model, whatever file format it was read from
// (its HF directory and the GGUF file llama.cpp's converter made of it).
inline void expect_tiny_llama2_config(const ModelConfig& c) {
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 384);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope.theta, 10000.0f);
  EXPECT_EQ(c.rope.scaling, RopeScaling::None);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{2}));
}

inline std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// Distinct, easily recognised values: tensor k, element i = k + i / 1024.
inline std::vector<float> pattern_values(int64_t n, float k) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = k + static_cast<float>(i) / 1024.0f;
  return v;
}

// ---------------------------------------------------------------- safetensors

struct StEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

inline std::string safetensors_bytes(const std::vector<StEntry>& entries) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const StEntry& e : entries) {
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {data.size(), data.size() + e.bytes.size()}}};
    data += e.bytes;
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h += ' ';
  std::string out;
  append_pod<uint64_t>(out, h.size());
  return out + h + data;
}

// A tiny Llama: hidden 8, 1 layer, 2 heads, 1 KV head (head_dim 4), ffn 16, vocab 10.
inline nlohmann::json tiny_config() {
  return nlohmann::json{{"architectures", {"LlamaForCausalLM"}},
                        {"model_type", "llama"},
                        {"hidden_size", 8},
                        {"num_hidden_layers", 1},
                        {"num_attention_heads", 2},
                        {"num_key_value_heads", 1},
                        {"intermediate_size", 16},
                        {"vocab_size", 10},
                        {"max_position_embeddings", 64},
                        {"rms_norm_eps", 1e-6},
                        {"rope_theta", 10000.0},
                        {"tie_word_embeddings", false},
                        {"bos_token_id", 1},
                        {"eos_token_id", 2}};
}

inline std::vector<StEntry> tiny_tensors() {
  std::vector<StEntry> t;
  float k = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    t.push_back({name, "F32", shape, f32_bytes(pattern_values(n, k++))});
  };
  add("model.embed_tokens.weight", {10, 8});
  add("model.layers.0.input_layernorm.weight", {8});
  add("model.layers.0.self_attn.q_proj.weight", {8, 8});
  add("model.layers.0.self_attn.k_proj.weight", {4, 8});
  add("model.layers.0.self_attn.v_proj.weight", {4, 8});
  add("model.layers.0.self_attn.o_proj.weight", {8, 8});
  add("model.layers.0.post_attention_layernorm.weight", {8});
  add("model.layers.0.mlp.gate_proj.weight", {16, 8});
  add("model.layers.0.mlp.up_proj.weight", {16, 8});
  add("model.layers.0.mlp.down_proj.weight", {8, 16});
  add("model.norm.weight", {8});
  add("lm_head.weight", {10, 8});
  return t;
}

inline void write_hf_model(const fs::path& dir, const nlohmann::json& config, const std::vector<StEntry>& tensors) {
  fs::create_directories(dir);
  write_bytes((dir / "config.json").string(), config.dump(2));
  write_bytes((dir / "model.safetensors").string(), safetensors_bytes(tensors));
}

// ---------------------------------------------------------------- GGUF

class GgufWriter {
 public:
  void add_u32(const std::string& key, uint32_t v) { kv(key, 4, [&](std::string& o) { append_pod(o, v); }); }
  void add_f32(const std::string& key, float v) { kv(key, 6, [&](std::string& o) { append_pod(o, v); }); }
  void add_string(const std::string& key, const std::string& v) {
    kv(key, 8, [&](std::string& o) { str(o, v); });
  }
  void add_string_array(const std::string& key, const std::vector<std::string>& v) {
    kv(key, 9, [&](std::string& o) {
      append_pod<uint32_t>(o, 8);
      append_pod<uint64_t>(o, v.size());
      for (const auto& s : v) str(o, s);
    });
  }
  // `ne` fastest-first, as GGML lists dimensions.
  void add_tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::string bytes) {
    tensors_.push_back({name, std::move(ne), type, std::move(bytes)});
  }
  std::string bytes(uint32_t version = 3) const {
    std::string out = "GGUF";
    append_pod<uint32_t>(out, version);
    append_pod<uint64_t>(out, tensors_.size());
    append_pod<uint64_t>(out, n_kv_);
    out += kv_bytes_;
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      str(out, t.name);
      append_pod<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) append_pod(out, d);
      append_pod(out, t.type);
      append_pod(out, offset);
      offset += (t.bytes.size() + 31) / 32 * 32;
    }
    out.resize((out.size() + 31) / 32 * 32, '\0');
    for (const auto& t : tensors_) {
      out += t.bytes;
      out.resize((out.size() + 31) / 32 * 32, '\0');
    }
    return out;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::string bytes;
  };
  static void str(std::string& o, const std::string& s) {
    append_pod<uint64_t>(o, s.size());
    o += s;
  }
  template <class F>
  void kv(const std::string& key, uint32_t type, F value) {
    str(kv_bytes_, key);
    append_pod(kv_bytes_, type);
    value(kv_bytes_);
    ++n_kv_;
  }
  std::string kv_bytes_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

// ---------------------------------------------------------------- reference forward

// Logits of every position for `ids` (full recompute, fp32), from the loaded weights alone.
// `bf16_inv_freq` rounds the RoPE frequencies to bf16 as HF transformers does for a model loaded in
// bf16 (its inv_freq buffer is cast with the weights); the shared goldens were made that way.
inline std::vector<float> reference_logits(const Model& model, const std::vector<int32_t>& ids,
                                           bool bf16_inv_freq = false) {
  const ModelConfig& c = model.config;
  const ModelWeights& w = model.weights;
  const int64_t T = static_cast<int64_t>(ids.size()), D = c.hidden_size, F = c.intermediate_size;
  auto ref = [](const WeightTensor& t) { return cpu::MatrixRef{t.data, t.dtype, t.rows(), t.cols()}; };
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(t);
  std::vector<float> inv_freq = rope_inv_freq(c.rope, c.head_dim);
  if (bf16_inv_freq) {
    for (float& f : inv_freq) f = round_to(DType::BF16, f);
  }

  std::vector<float> x(T * D), h(T * D), q(T * c.q_dim()), k(T * c.kv_dim()), v(T * c.kv_dim()),
      att(T * c.q_dim()), o(T * D), g(T * F), u(T * F);
  cpu::embedding(ref(w.token_embedding), ids.data(), T, x.data());
  for (const LayerWeights& l : w.layers) {
    cpu::rmsnorm(x.data(), ref(l.attn_norm), c.rms_norm_eps, T, D, h.data());
    cpu::matmul(h.data(), T, ref(l.wq), q.data());
    cpu::matmul(h.data(), T, ref(l.wk), k.data());
    cpu::matmul(h.data(), T, ref(l.wv), v.data());
    cpu::rope(q.data(), T, c.num_heads, c.head_dim, pos.data(), inv_freq.data());
    cpu::rope(k.data(), T, c.num_kv_heads, c.head_dim, pos.data(), inv_freq.data());
    cpu::attention(q.data(), k.data(), v.data(), pos.data(), T, T, c.num_heads, c.num_kv_heads, c.head_dim,
                   1.0f / std::sqrt(static_cast<float>(c.head_dim)), att.data());
    cpu::matmul(att.data(), T, ref(l.wo), o.data());
    cpu::add_inplace(x.data(), o.data(), T * D);
    cpu::rmsnorm(x.data(), ref(l.ffn_norm), c.rms_norm_eps, T, D, h.data());
    cpu::matmul(h.data(), T, ref(l.w_gate), g.data());
    cpu::matmul(h.data(), T, ref(l.w_up), u.data());
    cpu::swiglu(g.data(), u.data(), T * F, g.data());
    cpu::matmul(g.data(), T, ref(l.w_down), o.data());
    cpu::add_inplace(x.data(), o.data(), T * D);
  }
  cpu::rmsnorm(x.data(), ref(w.final_norm), c.rms_norm_eps, T, D, h.data());
  std::vector<float> logits(T * c.vocab_size);
  cpu::matmul(h.data(), T, ref(w.lm_head), logits.data());
  return logits;
}

inline int argmax(const float* v, int64_t n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// The loaded weights compute HF's logits: checks every tensor's placement and layout at once.
// The goldens come from HF with bf16-rounded RoPE frequencies (see reference_logits); with them
// the match is at fp32 rounding level, with exact frequencies it is ~3e-3.
inline void expect_matches_golden(const Model& m, const std::string& golden_path, double rel_tol,
                                  double min_top1_agreement = 1.0) {
  const nlohmann::json golden = nlohmann::json::parse(std::ifstream(golden_path));
  const auto& cs = golden["cases"][0];
  const std::vector<int32_t> ids = cs["ids"].get<std::vector<int32_t>>();
  const std::vector<float> expected = cs["last_logits"].get<std::vector<float>>();
  const std::vector<float> logits = reference_logits(m, ids, /*bf16_inv_freq=*/true);
  const int64_t V = m.config.vocab_size;
  ASSERT_EQ(static_cast<int64_t>(expected.size()), V);
  const float* last = logits.data() + (ids.size() - 1) * V;
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < V; ++i) {
    diff += std::pow(static_cast<double>(last[i]) - expected[i], 2);
    norm += std::pow(static_cast<double>(expected[i]), 2);
  }
  EXPECT_LT(std::sqrt(diff / norm), rel_tol) << "relative L2 error of the last position's logits vs " << golden_path;
  // Top-1 at (almost) every prompt position.
  const auto& top5 = cs["top5_ids"];
  size_t agree = 0;
  for (size_t t = 0; t < ids.size(); ++t) agree += argmax(logits.data() + t * V, V) == top5[t][0].get<int>();
  EXPECT_GE(static_cast<double>(agree), min_top1_agreement * static_cast<double>(ids.size()))
      << agree << " of " << ids.size() << " positions agree on the top token";
}

// Expects `f` to throw fuselm::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected fuselm::Error, nothing was thrown";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_THAT(e.what(), ::testing::HasSubstr(p));
  }
}

}  // namespace fuselm::test
