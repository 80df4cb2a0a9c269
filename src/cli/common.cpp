#include "cli/common.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "core/error.h"
#include "model/loader.h"

namespace fuselm::cli {

void EngineFlags::add_to(CLI::App& sub) {
  sub.add_option("--device", device, "cpu or cuda")->capture_default_str();
  sub.add_option("--dtype", dtype, "GPU compute dtype: bf16 or fp16 (the CPU always computes in fp32)")
      ->capture_default_str();
  sub.add_option("--path", path, "GPU execution path: fused or baseline")->capture_default_str();
  sub.add_flag("--bf16-rope-freqs", bf16_rope_freqs,
               "round RoPE frequencies to bf16 as HF transformers does after model.to(bfloat16); reproduces "
               "references computed that way (the shared goldens)");
  sub.add_option("--plan", plan_file, "GPU: kernel plan file from `fuselm tune -o` (default: the built-in rules)");
  sub.add_flag("--sync-decode", sync_decode,
               "GPU fused path: finish each decode step before preparing the next (by default the next step is "
               "queued behind it and takes its sampled tokens on the device)");
}

EngineOptions EngineFlags::options() const {
  EngineOptions o;
  o.device = parse_device(device);
  o.dtype = parse_dtype(dtype);
  o.path = parse_execution_path(path);
  o.plan_file = plan_file;
  o.pipeline_decode = !sync_decode;
  return o;
}

std::unique_ptr<Model> EngineFlags::load(const std::string& spec) const {
  LoadOptions options;
  options.materialize_synthetic = parse_device(device) == DeviceKind::Cpu;
  std::unique_ptr<Model> model = load_model(spec, options);
  model->config.rope.bf16_inv_freq = bf16_rope_freqs;
  return model;
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    size_t a = start, b = end;
    while (a < b && std::isspace(static_cast<unsigned char>(text[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(text[b - 1]))) --b;
    const std::string piece = text.substr(a, b - a);
    FUSELM_CHECK(!piece.empty(), flag, ": expected a comma-separated list of token ids like 1,2,3, found an empty ",
                 "item at character ", start, " of '", text, "'");
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), value);
    FUSELM_CHECK(ec == std::errc() && ptr == piece.data() + piece.size() && value >= INT32_MIN && value <= INT32_MAX,
                 flag, ": '", piece, "' is not a token id (expected a comma-separated list of integers like 1,2,3)");
    ids.push_back(static_cast<int32_t>(value));
    start = end + 1;
  }
  return ids;
}

void check_prompt(std::span<const int32_t> ids, const ModelConfig& config, const std::string& what) {
  FUSELM_CHECK(!ids.empty(), what, " is empty: give at least one token (with -p, keep the BOS token by "
               "leaving out --no-bos)");
  for (size_t i = 0; i < ids.size(); ++i) {
    FUSELM_CHECK(ids[i] >= 0 && ids[i] < config.vocab_size, what, ": token id ", ids[i], " at index ", i,
                 " is outside the model's vocabulary [0, ", config.vocab_size, ")");
  }
  FUSELM_CHECK(config.max_position_embeddings <= 0 || static_cast<int64_t>(ids.size()) <= config.max_position_embeddings,
               what, " has ", ids.size(), " tokens, more than the model's context of ", config.max_position_embeddings,
               " tokens; shorten the prompt");
}

std::vector<std::span<const int32_t>> split_chunks(std::span<const int32_t> ids, int max_chunk) {
  const size_t step = max_chunk > 0 ? static_cast<size_t>(max_chunk) : ids.size();
  std::vector<std::span<const int32_t>> chunks;
  for (size_t start = 0; start < ids.size(); start += step)
    chunks.push_back(ids.subspan(start, std::min(step, ids.size() - start)));
  return chunks;
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace fuselm::cli
