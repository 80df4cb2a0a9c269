// GGUF (llama.cpp) models of architecture "llama": F32/F16/BF16 used in place, Q8_0 dequantized
// to F32, and attn_q/attn_k rows put back into HF's rotate-half RoPE layout.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model/loaders.h"

namespace fuselm::loaders {

namespace {

class Metadata {
 public:
  explicit Metadata(const GgufFile& gguf) : gguf_(gguf) {}

  const GgufValue* find(const std::string& key) const { return gguf_.find(key); }

  int64_t integer(const std::string& key, const GgufValue& v) const {
    FUSELM_CHECK(std::holds_alternative<uint64_t>(v.value) || std::holds_alternative<int64_t>(v.value), gguf_.path(),
                 ": metadata '", key, "' must be an integer",
                 v.is_array() ? " (a per-layer array is not supported: every layer must have the same shape)" : "");
    return v.as_int();
  }
  int required_int(const std::string& key) const {
    const GgufValue* v = find(key);
    FUSELM_CHECK(v != nullptr, gguf_.path(), ": required metadata key '", key,
                 "' is missing; the file was not written by a llama.cpp converter for this architecture");
    const int64_t i = integer(key, *v);
    FUSELM_CHECK(i >= 0 && i <= INT32_MAX, gguf_.path(), ": metadata '", key, "' = ", i, " is out of range");
    return static_cast<int>(i);
  }
  int optional_int(const std::string& key, int fallback) const {
    return find(key) ? required_int(key) : fallback;
  }
  double optional_number(const std::string& key, double fallback) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return fallback;
    FUSELM_CHECK(!v->is_array() && !std::holds_alternative<std::string>(v->value) &&
                     !std::holds_alternative<bool>(v->value),
                 gguf_.path(), ": metadata '", key, "' must be a number");
    return v->as_double();
  }
  std::string optional_string(const std::string& key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return "";
    FUSELM_CHECK(std::holds_alternative<std::string>(v->value), gguf_.path(), ": metadata '", key,
                 "' must be a string");
    return v->string();
  }

 private:
  const GgufFile& gguf_;
};

// llama.cpp stores Llama 3 RoPE scaling as a `rope_freqs` tensor of per-frequency divisors rather
// than as metadata. Recover the RopeConfig by checking those divisors against the standard Llama 3
// parameters (low 1, high 4); anything else is refused rather than approximated.
RopeConfig rope_from_freq_factors(const GgufFile& gguf, const GgufTensorInfo& t, RopeConfig rope, int head_dim,
                                  int original_context) {
  const int half = head_dim / 2;
  FUSELM_CHECK(t.ggml_type == 0 && t.shape.size() == 1 && t.shape[0] == half, gguf.path(), ": tensor '", t.name,
               "' must be F32 of shape [", half, "], found ", ggml_type_name(t.ggml_type), " ", shape_string(t.shape));
  std::vector<float> factors(half);
  std::memcpy(factors.data(), t.data, half * sizeof(float));
  const float max_factor = *std::max_element(factors.begin(), factors.end());
  if (std::all_of(factors.begin(), factors.end(), [](float f) { return f == 1.0f; })) return rope;

  RopeConfig llama3 = rope;
  llama3.scaling = RopeScaling::Llama3;
  llama3.factor = max_factor;
  llama3.low_freq_factor = 1.0f;
  llama3.high_freq_factor = 4.0f;
  llama3.original_max_position = original_context;
  RopeConfig plain = rope;
  plain.scaling = RopeScaling::None;
  const std::vector<float> base = rope_inv_freq(plain, head_dim);
  const std::vector<float> scaled = rope_inv_freq(llama3, head_dim);
  for (int i = 0; i < half; ++i) {
    const double expected = static_cast<double>(base[i]) / scaled[i];
    FUSELM_CHECK(std::fabs(expected - factors[i]) <= 1e-3 * expected, gguf.path(), ": tensor '", t.name,
                 "' holds RoPE frequency factors that are not Llama 3 scaling with factor ", max_factor,
                 ", low_freq_factor 1, high_freq_factor 4, original context ", original_context, " (entry ", i, " is ",
                 factors[i], ", expected ", expected, "); this RoPE scaling is not supported");
  }
  return llama3;
}

ModelConfig parse_config(const GgufFile& gguf) {
  Metadata m(gguf);
  const std::string arch = m.optional_string("general.architecture");
  FUSELM_CHECK(!arch.empty(), gguf.path(), ": metadata 'general.architecture' is missing; this GGUF file does not "
               "describe a model (a vocabulary-only file?)");
  FUSELM_CHECK(arch == "llama", gguf.path(), ": unsupported GGUF architecture '", arch,
               "' (supported: llama, which also covers Mistral models converted by llama.cpp)");
  const std::string p = arch + ".";

  ModelConfig c;
  c.hidden_size = m.required_int(p + "embedding_length");
  c.num_layers = m.required_int(p + "block_count");
  c.num_heads = m.required_int(p + "attention.head_count");
  c.num_kv_heads = m.optional_int(p + "attention.head_count_kv", c.num_heads);
  c.intermediate_size = m.required_int(p + "feed_forward_length");
  FUSELM_CHECK(c.num_heads > 0, gguf.path(), ": ", p, "attention.head_count must be positive");
  c.head_dim = m.optional_int(p + "attention.key_length", c.hidden_size / c.num_heads);
  const int value_length = m.optional_int(p + "attention.value_length", c.head_dim);
  FUSELM_CHECK(value_length == c.head_dim, gguf.path(), ": ", p, "attention.value_length (", value_length,
               ") differs from key_length (", c.head_dim, "); this is not supported");
  const int rope_dims = m.optional_int(p + "rope.dimension_count", c.head_dim);
  FUSELM_CHECK(rope_dims == c.head_dim, gguf.path(), ": ", p, "rope.dimension_count = ", rope_dims,
               " but head_dim = ", c.head_dim, "; partial rotary embeddings are not supported");
  c.max_position_embeddings = m.optional_int(p + "context_length", 2048);
  c.rms_norm_eps = static_cast<float>(m.optional_number(p + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.theta = static_cast<float>(m.optional_number(p + "rope.freq_base", 10000.0));

  const std::string scaling = m.optional_string(p + "rope.scaling.type");
  if (scaling == "linear") {
    c.rope.scaling = RopeScaling::Linear;
    c.rope.factor = static_cast<float>(m.optional_number(p + "rope.scaling.factor", 1.0));
  } else if (scaling.empty() && m.find(p + "rope.scale_linear")) {
    c.rope.scaling = RopeScaling::Linear;
    c.rope.factor = static_cast<float>(m.optional_number(p + "rope.scale_linear", 1.0));
  } else if (!scaling.empty() && scaling != "none") {
    fail(gguf.path(), ": RoPE scaling type '", scaling, "' is not supported (supported: none, linear, and Llama 3 "
         "scaling stored as a rope_freqs tensor)");
  }
  if (const GgufTensorInfo* freqs = gguf.find_tensor("rope_freqs.weight")) {
    FUSELM_CHECK(c.rope.scaling == RopeScaling::None, gguf.path(),
                 ": both a rope_freqs tensor and linear RoPE scaling are given; this is not supported");
    FUSELM_CHECK(c.head_dim >= 2 && c.head_dim % 2 == 0, gguf.path(), ": head_dim ", c.head_dim, " must be even");
    c.rope = rope_from_freq_factors(gguf, *freqs, c.rope, c.head_dim,
                                    m.optional_int(p + "rope.scaling.original_context_length", 8192));
  }

  if (m.find(p + "vocab_size")) {
    c.vocab_size = m.required_int(p + "vocab_size");
  } else if (const GgufValue* tokens = m.find("tokenizer.ggml.tokens"); tokens && tokens->is_array()) {
    c.vocab_size = static_cast<int>(tokens->array().size());
  } else if (const GgufTensorInfo* embd = gguf.find_tensor("token_embd.weight"); embd && embd->shape.size() == 2) {
    c.vocab_size = static_cast<int>(embd->shape[0]);
  }
  c.tie_word_embeddings = gguf.find_tensor("output.weight") == nullptr;
  c.bos_token_id = m.optional_int("tokenizer.ggml.bos_token_id", -1);
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const int id = m.optional_int(key, -1);
    if (id >= 0 && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(id);
  }
  validate_config(c, gguf.path());
  return c;
}

}  // namespace

std::unique_ptr<Model> load_gguf(const std::string& path) {
  auto gguf = GgufFile::open(path);
  auto model = std::make_unique<Model>();
  model->format = ModelFormat::Gguf;
  model->source = path;
  model->config = parse_config(*gguf);
  model->mappings.push_back(gguf->mapping());
  const ModelConfig& c = model->config;
  const ExpectedShapes shapes = expected_shapes(c);

  // `rope_heads` > 0: the rows were permuted by llama.cpp's converter for its interleaved RoPE.
  auto fetch = [&](const std::string& name, const std::vector<int64_t>& shape, int rope_heads = 0) {
    const GgufTensorInfo* t = gguf->find_tensor(name);
    FUSELM_CHECK(t != nullptr, path, ": tensor '", name, "' is missing (the file has ", gguf->tensors().size(),
                 " tensors); it is incomplete or not a llama-architecture model");
    check_shape(path, name, t->shape, shape);
    WeightTensor w;
    w.name = name;
    w.shape = shape;
    const int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
    const int64_t numel = rows * cols;
    switch (t->ggml_type) {
      case 0: w.dtype = DType::F32; break;
      case 1: w.dtype = DType::F16; break;
      case 30: w.dtype = DType::BF16; break;
      case 8: w.dtype = DType::Q8_0; break;
      default:
        fail(path, ": tensor '", name, "' has GGML type ", ggml_type_name(t->ggml_type), " (id ", t->ggml_type,
             "), which is not supported (supported: F32, F16, BF16, Q8_0); convert the model with llama.cpp's "
             "convert_hf_to_gguf.py --outtype bf16 or q8_0, or use the HF checkpoint");
    }
    const size_t row_bytes = dtype_bytes(w.dtype, cols);
    const std::byte* src = t->data;
    std::vector<std::byte> permuted;
    if (rope_heads > 0) {
      permuted.resize(row_bytes * rows);
      interleaved_to_rotate_half(src, permuted.data(), rows, row_bytes, rope_heads);
      src = permuted.data();
    }
    if (w.dtype == DType::Q8_0) {
      auto* dst = reinterpret_cast<float*>(model->allocate(numel * sizeof(float)));
      // Row by row in parallel: an 8B model holds billions of values.
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) dequantize_q8_0(src + r * row_bytes, cols, dst + r * cols);
      w.dtype = DType::F32;
      w.data = dst;
    } else if (rope_heads > 0) {
      std::byte* dst = model->allocate(permuted.size());
      std::memcpy(dst, permuted.data(), permuted.size());
      w.data = dst;
    } else {
      w.data = in_place_or_copy(*model, src, t->nbytes, w.dtype);
    }
    return w;
  };

  ModelWeights& w = model->weights;
  w.token_embedding = fetch("token_embd.weight", shapes.embedding);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = str_cat("blk.", i, ".");
    LayerWeights& l = w.layers.emplace_back();
    l.attn_norm = fetch(p + "attn_norm.weight", shapes.norm);
    l.wq = fetch(p + "attn_q.weight", shapes.wq, c.num_heads);
    l.wk = fetch(p + "attn_k.weight", shapes.wk, c.num_kv_heads);
    l.wv = fetch(p + "attn_v.weight", shapes.wv);
    l.wo = fetch(p + "attn_output.weight", shapes.wo);
    l.ffn_norm = fetch(p + "ffn_norm.weight", shapes.norm);
    l.w_gate = fetch(p + "ffn_gate.weight", shapes.w_gate);
    l.w_up = fetch(p + "ffn_up.weight", shapes.w_up);
    l.w_down = fetch(p + "ffn_down.weight", shapes.w_down);
  }
  w.final_norm = fetch("output_norm.weight", shapes.norm);
  if (c.tie_word_embeddings) {
    tie_lm_head(w);
  } else {
    w.lm_head = fetch("output.weight", shapes.lm_head);
  }
  if (const GgufValue* tokens = gguf->find("tokenizer.ggml.tokens"); tokens && tokens->is_array())
    model->tokenizer_hint = path;
  return model;
}

}  // namespace fuselm::loaders
