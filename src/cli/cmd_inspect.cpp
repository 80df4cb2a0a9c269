// fuselm inspect: what a model is, without generating its weights (synthetic models stay lazy).
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "cli/command.h"
#include "cli/common.h"
#include "core/error.h"
#include "model/loader.h"
#include "tokenizer/tokenizer.h"

namespace fuselm::cli {
namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
};

// A float as the shortest decimal that reads back to it (1e-05, not 9.999999747378752e-06).
double shortest(float f) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  return ec == std::errc() ? std::strtod(std::string(buf, end).c_str(), nullptr) : f;
}

nlohmann::json describe(const Model& model) {
  const ModelConfig& c = model.config;
  nlohmann::json j;
  j["source"] = model.source;
  j["format"] = model_format_name(model.format);
  j["architecture"] = c.architecture;
  j["hidden_size"] = c.hidden_size;
  j["num_layers"] = c.num_layers;
  j["num_heads"] = c.num_heads;
  j["num_kv_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  nlohmann::json rope = {{"theta", shortest(c.rope.theta)}, {"scaling", rope_scaling_name(c.rope.scaling)}};
  if (c.rope.scaling != RopeScaling::None) rope["factor"] = shortest(c.rope.factor);
  if (c.rope.scaling == RopeScaling::Llama3) {
    rope["low_freq_factor"] = shortest(c.rope.low_freq_factor);
    rope["high_freq_factor"] = shortest(c.rope.high_freq_factor);
    rope["original_max_position"] = c.rope.original_max_position;
  }
  j["rope"] = rope;
  j["rms_norm_eps"] = shortest(c.rms_norm_eps);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_ids"] = c.eos_token_ids;
  j["parameter_count"] = model.parameter_count();
  j["weight_bytes"] = model.weight_bytes();
  std::map<std::string, int> dtypes;
  for (const WeightTensor* t : model.weights.all()) ++dtypes[std::string(dtype_name(t->dtype))];
  j["dtypes"] = dtypes;

  // A tokenizer that does not load is reported, not fatal: inspect is how one finds out why.
  nlohmann::json tok = {{"kind", "none"}};
  if (!model.tokenizer_hint.empty()) {
    tok["path"] = model.tokenizer_hint;
    try {
      std::unique_ptr<Tokenizer> t = load_tokenizer(model.tokenizer_hint);
      tok["kind"] = t->kind();
      tok["vocab_size"] = t->vocab_size();
    } catch (const std::exception& e) {
      tok["kind"] = "unavailable";
      tok["error"] = e.what();
    }
  }
  j["tokenizer"] = tok;
  return j;
}

// 8030261248 -> "8.03B" with base 1000 and units K, M, B, T; bytes use base 1024 and KiB, MiB, ...
std::string human(double n, double base, const std::vector<const char*>& units) {
  size_t u = 0;
  while (n >= base && u + 1 < units.size()) {
    n /= base;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", n, units[u]);
  return buf;
}

void print_text(const nlohmann::json& j) {
  auto line = [](const char* key, const std::string& value) { std::printf("%-24s %s\n", key, value.c_str()); };
  line("source", j["source"].get<std::string>());
  line("format", j["format"].get<std::string>());
  line("architecture", j["architecture"].get<std::string>());
  for (const char* key : {"hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "intermediate_size",
                          "vocab_size", "max_position_embeddings"})
    line(key, j[key].dump());
  std::string rope;
  for (auto& [k, v] : j["rope"].items()) rope += (rope.empty() ? "" : ", ") + k + " " + (v.is_string() ? v.get<std::string>() : v.dump());
  line("rope", rope);
  line("rms_norm_eps", j["rms_norm_eps"].dump());
  line("tie_word_embeddings", j["tie_word_embeddings"].dump());
  line("bos / eos", j["bos_token_id"].dump() + " / " + j["eos_token_ids"].dump());
  line("parameters", str_cat(j["parameter_count"].get<int64_t>(), " (",
                             human(j["parameter_count"].get<double>(), 1000, {"", "K", "M", "B", "T"}), ")"));
  line("weight bytes", str_cat(j["weight_bytes"].get<uint64_t>(), " (",
                               human(j["weight_bytes"].get<double>(), 1024, {"B", "KiB", "MiB", "GiB", "TiB"}), ")"));
  std::string dtypes;
  for (auto& [k, v] : j["dtypes"].items()) dtypes += (dtypes.empty() ? "" : ", ") + k + " x" + v.dump();
  line("tensor dtypes", dtypes);
  const auto& tok = j["tokenizer"];
  std::string tok_text = tok["kind"].get<std::string>();
  if (tok.contains("path")) tok_text += " (" + tok["path"].get<std::string>() + ")";
  if (tok.contains("error")) tok_text += ": " + tok["error"].get<std::string>();
  line("tokenizer", tok_text);
}

int run_inspect(const InspectArgs& args) {
  LoadOptions options;
  options.materialize_synthetic = false;  // shapes and dtypes are known without generating weights
  std::unique_ptr<Model> model = load_model(args.model, options);
  const nlohmann::json j = describe(*model);
  if (args.json) {
    std::printf("%s\n", dump_json(j).c_str());
  } else {
    print_text(j);
  }
  return 0;
}

std::function<int()> setup_inspect(CLI::App& sub) {
  auto args = std::make_shared<InspectArgs>();
  sub.add_option("-m,--model", args->model, "model: HF folder, .gguf, llama2.c .bin, or synthetic:PRESET")
      ->required();
  sub.add_flag("--json", args->json, "print one JSON object");
  return [args] { return run_inspect(*args); };
}

FUSELM_COMMAND("inspect", "show a model's architecture, sizes, dtypes and tokenizer", setup_inspect);

}  // namespace
}  // namespace fuselm::cli
