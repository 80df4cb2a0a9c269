#include "model/synthetic.h"

#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/rng.h"
#include "model/loaders.h"

namespace fuselm {

namespace {

struct Preset {
  const char* name;
  const char* what;
  ModelConfig (*make)();
};

ModelConfig llama3_base() {
  ModelConfig c;
  c.vocab_size = 128256;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5f;
  c.rope = RopeConfig{.theta = 500000.0f,
                      .scaling = RopeScaling::Llama3,
                      .factor = 8.0f,
                      .low_freq_factor = 1.0f,
                      .high_freq_factor = 4.0f,
                      .original_max_position = 8192};
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001, 128009};
  return c;
}

ModelConfig llama31_8b() {
  ModelConfig c = llama3_base();
  c.hidden_size = 4096;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.intermediate_size = 14336;
  c.tie_word_embeddings = false;
  return c;
}

ModelConfig llama32_1b() {
  ModelConfig c = llama3_base();
  c.hidden_size = 2048;
  c.num_layers = 16;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.intermediate_size = 8192;
  c.rope.factor = 32.0f;
  c.tie_word_embeddings = true;
  return c;
}

ModelConfig llama2_7b() {
  ModelConfig c;
  c.hidden_size = 4096;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 32;
  c.intermediate_size = 11008;
  c.vocab_size = 32000;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5f;
  c.rope.theta = 10000.0f;
  c.tie_word_embeddings = false;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

// Free-form shape: hidden, layers, heads, ffn and vocab must be given.
ModelConfig llama_free_form() {
  ModelConfig c;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5f;
  c.rope.theta = 10000.0f;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

const Preset kPresets[] = {
    {"llama-3.1-8b", "Llama 3.1 8B", llama31_8b},
    {"llama-3.2-1b", "Llama 3.2 1B", llama32_1b},
    {"llama-2-7b", "Llama 2 7B", llama2_7b},
    {"llama", "any shape: give hidden, layers, heads, ffn, vocab", llama_free_form},
};

constexpr const char* kKeys =
    "hidden, layers, heads, kv_heads, head_dim, ffn, vocab, max_pos, theta, eps, tied, seed";

std::string preset_list() {
  std::string s;
  for (const Preset& p : kPresets) s += str_cat(s.empty() ? "" : ", ", p.name, " (", p.what, ")");
  return s;
}

template <class Int>
Int parse_int(const std::string& spec, const std::string& key, const std::string& value, Int min_value) {
  Int v{};
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  FUSELM_CHECK(ec == std::errc() && end == value.data() + value.size() && v >= min_value, "'", spec, "': key '",
               key, "' expects an integer >= ", min_value, ", found '", value, "'");
  return v;
}

float parse_positive_float(const std::string& spec, const std::string& key, const std::string& value) {
  double v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  FUSELM_CHECK(ec == std::errc() && end == value.data() + value.size() && std::isfinite(v) && v > 0, "'", spec,
               "': key '", key, "' expects a positive number, found '", value, "'");
  return static_cast<float>(v);
}

bool parse_bool(const std::string& spec, const std::string& key, const std::string& value) {
  if (value == "1" || value == "true" || value == "yes") return true;
  if (value == "0" || value == "false" || value == "no") return false;
  fail("'", spec, "': key '", key, "' expects true or false, found '", value, "'");
}

// FNV-1a: a stable per-tensor seed from the tensor's name.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::vector<std::string> synthetic_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

SyntheticSpec parse_synthetic_spec(const std::string& spec) {
  std::string body = spec.substr(spec.find(':') + 1);
  std::string name = body.substr(0, body.find('?'));
  std::string query = body.find('?') == std::string::npos ? "" : body.substr(body.find('?') + 1);

  const Preset* preset = nullptr;
  for (const Preset& p : kPresets) {
    if (name == p.name) preset = &p;
  }
  FUSELM_CHECK(preset != nullptr, "unknown synthetic preset '", name, "' in '", spec, "'; presets: ", preset_list());

  SyntheticSpec out;
  out.preset = name;
  out.config = preset->make();
  ModelConfig& c = out.config;

  std::map<std::string, std::string> values;
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    std::string item = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    pos = amp == std::string::npos ? query.size() : amp + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    FUSELM_CHECK(eq != std::string::npos && eq > 0, "'", spec, "': expected key=value, found '", item, "'");
    std::string key = item.substr(0, eq);
    FUSELM_CHECK(values.emplace(key, item.substr(eq + 1)).second, "'", spec, "': key '", key, "' given twice");
  }

  const std::map<std::string, std::function<void(const std::string&, const std::string&)>> setters = {
      {"hidden", [&](auto& k, auto& v) { c.hidden_size = parse_int(spec, k, v, 1); }},
      {"layers", [&](auto& k, auto& v) { c.num_layers = parse_int(spec, k, v, 1); }},
      {"heads", [&](auto& k, auto& v) { c.num_heads = parse_int(spec, k, v, 1); }},
      {"kv_heads", [&](auto& k, auto& v) { c.num_kv_heads = parse_int(spec, k, v, 1); }},
      {"head_dim", [&](auto& k, auto& v) { c.head_dim = parse_int(spec, k, v, 2); }},
      {"ffn", [&](auto& k, auto& v) { c.intermediate_size = parse_int(spec, k, v, 1); }},
      {"vocab", [&](auto& k, auto& v) { c.vocab_size = parse_int(spec, k, v, 1); }},
      {"max_pos", [&](auto& k, auto& v) { c.max_position_embeddings = parse_int(spec, k, v, 1); }},
      {"theta", [&](auto& k, auto& v) { c.rope.theta = parse_positive_float(spec, k, v); }},
      {"eps", [&](auto& k, auto& v) { c.rms_norm_eps = parse_positive_float(spec, k, v); }},
      {"tied", [&](auto& k, auto& v) { c.tie_word_embeddings = parse_bool(spec, k, v); }},
      {"seed", [&](auto& k, auto& v) { out.seed = parse_int<uint64_t>(spec, k, v, 0); }},
  };
  for (const auto& [key, value] : values) {
    auto it = setters.find(key);
    FUSELM_CHECK(it != setters.end(), "'", spec, "': unknown key '", key, "'; valid keys: ", kKeys);
    it->second(key, value);
  }

  if (name == "llama") {
    for (const char* key : {"hidden", "layers", "heads", "ffn", "vocab"}) {
      FUSELM_CHECK(values.count(key), "'", spec, "': synthetic:llama needs key '", key,
                   "' (give hidden, layers, heads, ffn and vocab; optional: kv_heads, head_dim, max_pos, theta, eps, "
                   "tied, seed)");
    }
  }
  if (!values.count("kv_heads") && name == "llama") c.num_kv_heads = c.num_heads;
  // Every preset has head_dim = hidden / heads; keep that relation when hidden or heads change.
  if (!values.count("head_dim")) {
    FUSELM_CHECK(c.hidden_size % c.num_heads == 0, "'", spec, "': hidden (", c.hidden_size,
                 ") is not a multiple of heads (", c.num_heads, "); give head_dim explicitly");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  // A smaller vocab override can leave the preset's special ids out of range: drop those.
  if (c.bos_token_id >= c.vocab_size) c.bos_token_id = -1;
  std::erase_if(c.eos_token_ids, [&](int id) { return id >= c.vocab_size; });
  loaders::validate_config(c, spec);
  return out;
}

namespace loaders {

std::unique_ptr<Model> load_synthetic(const std::string& spec, const LoadOptions& options) {
  SyntheticSpec parsed = parse_synthetic_spec(spec);
  auto model = std::make_unique<Model>();
  model->config = parsed.config;
  model->format = ModelFormat::Synthetic;
  model->source = spec;
  const ModelConfig& c = model->config;
  const ExpectedShapes shapes = expected_shapes(c);

  // Scales keep activations of order 1 through many layers: a linear layer with uniform weights of
  // scale 1/sqrt(in) maps unit-RMS inputs to outputs of RMS 1/sqrt(3).
  auto make = [&](const std::string& name, const std::vector<int64_t>& shape, float scale, float offset) {
    WeightTensor t;
    t.name = name;
    t.dtype = DType::BF16;
    t.shape = shape;
    t.synthetic = SyntheticInit{.active = true,
                                .seed = splitmix64(name_hash(name) ^ splitmix64(parsed.seed)),
                                .scale = scale,
                                .offset = offset};
    return t;
  };
  auto linear = [&](const std::string& name, const std::vector<int64_t>& shape) {
    return make(name, shape, 1.0f / std::sqrt(static_cast<float>(shape[1])), 0.0f);
  };
  auto norm = [&](const std::string& name) { return make(name, shapes.norm, 0.05f, 1.0f); };

  ModelWeights& w = model->weights;
  w.token_embedding = make("model.embed_tokens.weight", shapes.embedding, 1.0f, 0.0f);
  w.layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = str_cat("model.layers.", i, ".");
    LayerWeights& l = w.layers[i];
    l.attn_norm = norm(p + "input_layernorm.weight");
    l.wq = linear(p + "self_attn.q_proj.weight", shapes.wq);
    l.wk = linear(p + "self_attn.k_proj.weight", shapes.wk);
    l.wv = linear(p + "self_attn.v_proj.weight", shapes.wv);
    l.wo = linear(p + "self_attn.o_proj.weight", shapes.wo);
    l.ffn_norm = norm(p + "post_attention_layernorm.weight");
    l.w_gate = linear(p + "mlp.gate_proj.weight", shapes.w_gate);
    l.w_up = linear(p + "mlp.up_proj.weight", shapes.w_up);
    l.w_down = linear(p + "mlp.down_proj.weight", shapes.w_down);
  }
  w.final_norm = norm("model.norm.weight");
  if (c.tie_word_embeddings) {
    tie_lm_head(w);
  } else {
    w.lm_head = linear("lm_head.weight", shapes.lm_head);
  }
  if (options.materialize_synthetic) model->materialize_synthetic(DType::BF16);
  return model;
}

}  // namespace loaders
}  // namespace fuselm
