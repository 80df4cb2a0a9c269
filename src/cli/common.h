#pragma once
// Helpers shared by the commands that load a model and run it: engine flags, token-id lists,
// prompt prefill in engine-sized chunks, JSON output.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/engine.h"

namespace fuselm::cli {

// --device, --dtype, --path, --bf16-rope-freqs, --plan, --sync-decode: which engine runs the model, and how.
struct EngineFlags {
  std::string device = "cpu";
  std::string dtype = "bf16";
  std::string path = "fused";
  bool bf16_rope_freqs = false;
  std::string plan_file;
  bool sync_decode = false;

  void add_to(CLI::App& sub);
  EngineOptions options() const;  // throws Error on an unknown device, dtype or path
  // Loads `spec` for the chosen device (the CPU backend needs synthetic weights in host memory,
  // CUDA does not) and applies the numeric flags to its config.
  std::unique_ptr<Model> load(const std::string& spec) const;
};

// Parses "1,2,3" (spaces around ids allowed); throws Error naming `flag` and the bad piece.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag);

// Throws Error when `ids` is empty, an id is outside [0, vocab), or the prompt does not leave
// room in the model's context; `what` names where the ids came from.
void check_prompt(std::span<const int32_t> ids, const ModelConfig& config, const std::string& what);

// Cuts a prompt into consecutive pieces of at most `max_chunk` ids (one forward step each).
std::vector<std::span<const int32_t>> split_chunks(std::span<const int32_t> ids, int max_chunk);

// Serialises JSON; invalid UTF-8 (a token split mid-character) becomes U+FFFD instead of an error.
std::string dump_json(const nlohmann::json& j);

}  // namespace fuselm::cli
