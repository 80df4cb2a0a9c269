// Hugging Face model directories: config.json + model.safetensors (or shards named by
// model.safetensors.index.json), Llama and Mistral architectures.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "model/file_sniff.h"
#include "model/json_util.h"
#include "model/loaders.h"
#include "model/safetensors.h"

namespace fuselm::loaders {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSupportedArchitectures = "LlamaForCausalLM, MistralForCausalLM (model_type llama, mistral)";

// Reads config.json values with errors that name the key and the file.
class ConfigReader {
 public:
  ConfigReader(const json& root, std::string path) : root_(root), path_(std::move(path)) {}

  // Null and absent are the same: HF writes `null` for "not set".
  const json* find(const json& obj, const std::string& key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  const json* find(const std::string& key) const { return find(root_, key); }

  int integer(const json& v, const std::string& key) const {
    // Some exporters write integral values as floats ("4096.0").
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::fabs(v.get<double>()) < 2e9)
      return static_cast<int>(v.get<double>());
    return static_cast<int>(require_json_integer(v, INT32_MIN, INT32_MAX, str_cat(path_, ": '", key, "'")));
  }
  double number(const json& v, const std::string& key) const {
    FUSELM_CHECK(v.is_number(), path_, ": '", key, "' must be a number, found ", v.dump());
    return v.get<double>();
  }
  bool boolean(const json& v, const std::string& key) const {
    FUSELM_CHECK(v.is_boolean(), path_, ": '", key, "' must be true or false, found ", v.dump());
    return v.get<bool>();
  }

  int required_int(const std::string& key) const {
    const json* v = find(key);
    FUSELM_CHECK(v != nullptr, path_, ": required key '", key,
                 "' is missing; the config is incomplete (compare with the model's original config.json)");
    return integer(*v, key);
  }
  int optional_int(const std::string& key, int fallback) const {
    const json* v = find(key);
    return v ? integer(*v, key) : fallback;
  }
  double optional_number(const std::string& key, double fallback) const {
    const json* v = find(key);
    return v ? number(*v, key) : fallback;
  }
  bool optional_bool(const std::string& key, bool fallback) const {
    const json* v = find(key);
    return v ? boolean(*v, key) : fallback;
  }
  const std::string& path() const { return path_; }

 private:
  const json& root_;
  std::string path_;
};

std::string check_architecture(const ConfigReader& r) {
  static const std::set<std::string> kArchitectures = {"LlamaForCausalLM", "MistralForCausalLM"};
  static const std::set<std::string> kModelTypes = {"llama", "mistral"};
  std::string model_type;
  if (const json* mt = r.find("model_type")) {
    FUSELM_CHECK(mt->is_string(), r.path(), ": 'model_type' must be a string, found ", mt->dump());
    model_type = mt->get<std::string>();
  }
  if (const json* archs = r.find("architectures")) {
    FUSELM_CHECK(archs->is_array() && !archs->empty() && (*archs)[0].is_string(), r.path(),
                 ": 'architectures' must be a list of names, found ", archs->dump());
    const std::string arch = (*archs)[0].get<std::string>();
    FUSELM_CHECK(kArchitectures.count(arch), r.path(), ": unsupported architecture '", arch,
                 "'; fuselm runs ", kSupportedArchitectures);
  }
  if (!model_type.empty()) {
    FUSELM_CHECK(kModelTypes.count(model_type), r.path(), ": unsupported model_type '", model_type,
                 "'; fuselm runs ", kSupportedArchitectures);
  }
  FUSELM_CHECK(r.find("architectures") || !model_type.empty(), r.path(),
               ": neither 'architectures' nor 'model_type' is set, so the model family is unknown; fuselm runs ",
               kSupportedArchitectures);
  return model_type.empty() ? "llama" : model_type;
}

RopeConfig parse_rope(const ConfigReader& r) {
  RopeConfig rope;
  // transformers >= 5 writes `rope_parameters` (theta inside); older configs write a top-level
  // `rope_theta` and an optional `rope_scaling` object.
  const json* params = r.find("rope_parameters");
  std::string where = "rope_parameters";
  if (params == nullptr) {
    params = r.find("rope_scaling");
    where = "rope_scaling";
  }
  if (params != nullptr) {
    FUSELM_CHECK(params->is_object(), r.path(), ": '", where, "' must be an object, found ", params->dump());
  }
  auto param = [&](const std::string& key) { return params ? r.find(*params, key) : nullptr; };
  auto required_param = [&](const std::string& key, const std::string& type) {
    const json* v = param(key);
    FUSELM_CHECK(v != nullptr, r.path(), ": rope type '", type, "' needs '", where, ".", key, "', which is missing");
    return r.number(*v, where + "." + key);
  };

  if (const json* theta = param("rope_theta")) {
    rope.theta = static_cast<float>(r.number(*theta, where + ".rope_theta"));
  } else {
    rope.theta = static_cast<float>(r.optional_number("rope_theta", 10000.0));
  }

  std::string type = "default";
  if (const json* t = param("rope_type") ? param("rope_type") : param("type")) {
    FUSELM_CHECK(t->is_string(), r.path(), ": '", where, ".rope_type' must be a string, found ", t->dump());
    type = t->get<std::string>();
  } else if (params != nullptr && where == "rope_parameters" && !param("rope_theta")) {
    fail(r.path(), ": 'rope_parameters' has neither 'rope_type' nor 'rope_theta' (per-layer-type RoPE "
         "parameters are not supported): ", params->dump());
  }
  if (type == "default") {
    rope.scaling = RopeScaling::None;
  } else if (type == "linear") {
    rope.scaling = RopeScaling::Linear;
    rope.factor = static_cast<float>(required_param("factor", type));
  } else if (type == "llama3") {
    rope.scaling = RopeScaling::Llama3;
    rope.factor = static_cast<float>(required_param("factor", type));
    rope.low_freq_factor = static_cast<float>(required_param("low_freq_factor", type));
    rope.high_freq_factor = static_cast<float>(required_param("high_freq_factor", type));
    const double original = required_param("original_max_position_embeddings", type);
    // Checked before the conversion: a double outside int's range does not convert.
    FUSELM_CHECK(original >= 1 && original <= INT32_MAX, r.path(), ": '", where,
                 ".original_max_position_embeddings' = ", original, " is out of range");
    rope.original_max_position = static_cast<int>(original);
  } else {
    fail(r.path(), ": rope type '", type, "' is not supported (supported: default, linear, llama3)");
  }
  FUSELM_CHECK(rope.factor > 0 && rope.high_freq_factor != rope.low_freq_factor && rope.original_max_position > 0,
               r.path(), ": invalid RoPE scaling parameters in '", where, "': ", params ? params->dump() : "");
  return rope;
}

ModelConfig parse_config(const json& root, const std::string& path) {
  FUSELM_CHECK(root.is_object(), path, ": expected a JSON object, found ", root.type_name());
  ConfigReader r(root, path);
  ModelConfig c;
  const std::string model_type = check_architecture(r);

  c.hidden_size = r.required_int("hidden_size");
  c.num_layers = r.required_int("num_hidden_layers");
  c.num_heads = r.required_int("num_attention_heads");
  c.num_kv_heads = r.optional_int("num_key_value_heads", c.num_heads);
  c.intermediate_size = r.required_int("intermediate_size");
  c.vocab_size = r.required_int("vocab_size");
  FUSELM_CHECK(c.num_heads > 0, path, ": num_attention_heads must be positive, found ", c.num_heads);
  c.head_dim = r.optional_int("head_dim", c.hidden_size / c.num_heads);
  c.max_position_embeddings = r.optional_int("max_position_embeddings", 2048);
  c.rms_norm_eps = static_cast<float>(r.optional_number("rms_norm_eps", 1e-6));
  c.rope = parse_rope(r);
  c.tie_word_embeddings = r.optional_bool("tie_word_embeddings", false);
  c.bos_token_id = r.optional_int("bos_token_id", -1);
  if (const json* eos = r.find("eos_token_id")) {
    if (eos->is_array()) {
      for (const json& id : *eos) c.eos_token_ids.push_back(r.integer(id, "eos_token_id"));
    } else {
      c.eos_token_ids.push_back(r.integer(*eos, "eos_token_id"));
    }
  }

  if (const json* act = r.find("hidden_act")) {
    FUSELM_CHECK(act->is_string() && act->get<std::string>() == "silu", path, ": hidden_act ", act->dump(),
                 " is not supported (Llama-family models use \"silu\")");
  }
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    FUSELM_CHECK(!r.optional_bool(bias, false), path, ": '", bias,
                 "' is true; linear layers with biases are not supported");
  }
  if (model_type == "mistral") {
    if (const json* window = r.find("sliding_window")) {
      const int w = r.integer(*window, "sliding_window");
      FUSELM_CHECK(w >= c.max_position_embeddings, path, ": sliding_window = ", w,
                   " is smaller than max_position_embeddings = ", c.max_position_embeddings,
                   "; sliding-window attention is not implemented (supported: sliding_window null or >= "
                   "max_position_embeddings)");
    }
  }
  validate_config(c, path);
  return c;
}

// Where every tensor of the checkpoint lives: one file, or the shards named by the index.
struct Checkpoint {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile*> where;  // tensor name -> file
  std::string description;                              // for "looked in ..." messages
};

Checkpoint open_checkpoint(const fs::path& dir) {
  Checkpoint ck;
  const fs::path index_path = dir / "model.safetensors.index.json";
  const fs::path single_path = dir / "model.safetensors";
  if (fs::exists(index_path)) {
    auto index_file = MappedFile::open(index_path.string());
    reject_wrong_file(*index_file, "a safetensors index (JSON)", FileKind::Text);
    const json index = parse_json_text(
        std::string_view(reinterpret_cast<const char*>(index_file->data()), index_file->size()), index_path.string());
    FUSELM_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
                 index_path.string(), ": expected an object with a \"weight_map\" object");
    std::map<std::string, const SafetensorsFile*> by_file;
    for (const auto& [name, file] : index["weight_map"].items()) {
      FUSELM_CHECK(file.is_string(), index_path.string(), ": weight_map entry for '", name,
                   "' must be a file name, found ", file.dump());
      const std::string file_name = file.get<std::string>();
      FUSELM_CHECK(fs::path(file_name).filename() == fs::path(file_name) && file_name != ".." && file_name != ".",
                   index_path.string(), ": weight_map entry for '", name, "' names '", file_name,
                   "', expected a file name in the same directory");
      auto it = by_file.find(file_name);
      if (it == by_file.end()) {
        const fs::path shard = dir / file_name;
        FUSELM_CHECK(fs::exists(shard), index_path.string(), ": shard '", file_name, "' (holding '", name,
                     "') is missing from ", dir.string(), "; download all the model's *.safetensors files");
        ck.files.push_back(SafetensorsFile::open(shard.string()));
        it = by_file.emplace(file_name, ck.files.back().get()).first;
        ck.description += str_cat(ck.description.empty() ? "" : ", ", file_name);
      }
      ck.where[name] = it->second;
    }
  } else if (fs::exists(single_path)) {
    ck.files.push_back(SafetensorsFile::open(single_path.string()));
    for (const auto& [name, t] : ck.files.back()->tensors()) ck.where[name] = ck.files.back().get();
    ck.description = "model.safetensors";
  } else {
    std::string found;
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (entry.path().extension() == ".safetensors" || entry.path().extension() == ".bin" ||
          entry.path().extension() == ".gguf" || entry.path().extension() == ".pth")
        found += str_cat(found.empty() ? "" : ", ", name);
    }
    fail(dir.string(), ": no weights found: expected model.safetensors or model.safetensors.index.json",
         found.empty() ? std::string() : str_cat(" (found: ", found, "; PyTorch .bin/.pth weights are not supported, "
                                                 "pass a .gguf file directly)"));
  }
  return ck;
}

void set_tokenizer_hint(Model& model, const fs::path& dir) {
  if (fs::exists(dir / "tokenizer.json") || fs::exists(dir / "tokenizer.model")) {
    model.tokenizer_hint = dir.string();
    return;
  }
  // {"tokenizer": "NAME"}: a tokenizer folder shared by several models, relative to the folder
  // that holds the model directory. A bad or dangling pointer only means "no tokenizer here".
  const fs::path location = dir / "tokenizer-location.json";
  if (!fs::exists(location)) return;
  try {
    const json j = json::parse(read_text_file(location.string()));
    if (j.is_object() && j.contains("tokenizer") && j["tokenizer"].is_string()) {
      const fs::path models_dir = fs::absolute(dir).lexically_normal().parent_path();
      const fs::path target = (models_dir / j["tokenizer"].get<std::string>()).lexically_normal();
      if (fs::exists(target)) model.tokenizer_hint = target.string();
    }
  } catch (const std::exception&) {
  }
}

}  // namespace

std::unique_ptr<Model> load_hf_directory(const std::string& dir_arg) {
  // Normalised so that parent_path() is the folder holding the model even for "dir/".
  fs::path dir = fs::path(dir_arg).lexically_normal();
  if (!dir.has_filename() && dir.has_parent_path()) dir = dir.parent_path();
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) {
    std::string hint;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".gguf") hint = str_cat("; it holds a GGUF file, pass it directly: ", entry.path().string());
    }
    fail("'", dir_arg, "' is a directory without config.json, so it is not an HF model directory; expected "
         "config.json and *.safetensors files",
         hint);
  }
  auto config_file = MappedFile::open(config_path.string());
  reject_wrong_file(*config_file, "a config.json", FileKind::Text);
  const json root = parse_json_text(
      std::string_view(reinterpret_cast<const char*>(config_file->data()), config_file->size()), config_path.string());

  auto model = std::make_unique<Model>();
  model->format = ModelFormat::HfDirectory;
  model->source = dir_arg;
  model->config = parse_config(root, config_path.string());
  const ModelConfig& c = model->config;

  Checkpoint ck = open_checkpoint(dir);
  for (const auto& f : ck.files) model->mappings.push_back(f->mapping());

  const ExpectedShapes shapes = expected_shapes(c);
  auto fetch = [&](const std::string& name, const std::vector<int64_t>& shape) {
    auto it = ck.where.find(name);
    FUSELM_CHECK(it != ck.where.end(), dir.string(), ": tensor '", name, "' is missing (looked in ", ck.description,
                 "); the checkpoint is incomplete or is not a Llama-layout model");
    const SafetensorsFile& file = *it->second;
    const SafetensorsTensor* t = file.find(name);
    FUSELM_CHECK(t != nullptr, file.path(), ": the index places tensor '", name,
                 "' in this file, but the file does not contain it; the shards do not match the index");
    FUSELM_CHECK(t->dtype.has_value(), file.path(), ": tensor '", name, "' has dtype ", t->dtype_name,
                 ", which is not supported (supported: F32, F16, BF16); quantized safetensors checkpoints cannot "
                 "be read, use an unquantized checkpoint or a GGUF file");
    check_shape(file.path(), name, t->shape, shape);
    WeightTensor w;
    w.name = name;
    w.dtype = *t->dtype;
    w.shape = shape;
    w.data = in_place_or_copy(*model, t->data, t->nbytes, w.dtype);
    return w;
  };

  ModelWeights& w = model->weights;
  w.token_embedding = fetch("model.embed_tokens.weight", shapes.embedding);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = str_cat("model.layers.", i, ".");
    LayerWeights& l = w.layers.emplace_back();
    l.attn_norm = fetch(p + "input_layernorm.weight", shapes.norm);
    l.wq = fetch(p + "self_attn.q_proj.weight", shapes.wq);
    l.wk = fetch(p + "self_attn.k_proj.weight", shapes.wk);
    l.wv = fetch(p + "self_attn.v_proj.weight", shapes.wv);
    l.wo = fetch(p + "self_attn.o_proj.weight", shapes.wo);
    l.ffn_norm = fetch(p + "post_attention_layernorm.weight", shapes.norm);
    l.w_gate = fetch(p + "mlp.gate_proj.weight", shapes.w_gate);
    l.w_up = fetch(p + "mlp.up_proj.weight", shapes.w_up);
    l.w_down = fetch(p + "mlp.down_proj.weight", shapes.w_down);
  }
  w.final_norm = fetch("model.norm.weight", shapes.norm);
  if (c.tie_word_embeddings) {
    tie_lm_head(w);
  } else {
    FUSELM_CHECK(ck.where.count("lm_head.weight"), dir.string(),
                 ": tensor 'lm_head.weight' is missing (looked in ", ck.description,
                 ") and config.json has tie_word_embeddings false; the checkpoint is incomplete");
    w.lm_head = fetch("lm_head.weight", shapes.lm_head);
  }
  set_tokenizer_hint(*model, dir);
  return model;
}

}  // namespace fuselm::loaders
