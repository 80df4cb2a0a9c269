// fuselm forward: one teacher-forced pass over a prompt; per-position top-k logits and logsumexp,
// and the full logits at the last position (what the golden tests compare against).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "cli/command.h"
#include "cli/common.h"
#include "core/error.h"

namespace fuselm::cli {
namespace {

struct ForwardArgs {
  std::string model;
  std::string prompt_ids;
  int top_k = 5;
  EngineFlags engine;
  bool json = false;
};

double logsumexp(std::span<const float> row) {
  const float max = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - max);
  return max + std::log(sum);
}

// Ids of the k largest logits, largest first, ties to the lower id.
std::vector<int32_t> top_ids(std::span<const float> row, int k) {
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  ids.resize(static_cast<size_t>(k));
  return ids;
}

int run_forward(const ForwardArgs& args) {
  EngineOptions options = args.engine.options();
  const std::vector<int32_t> prompt = parse_id_list(args.prompt_ids, "--prompt-ids");
  std::unique_ptr<Model> model = args.engine.load(args.model);
  const ModelConfig& config = model->config;
  check_prompt(prompt, config, "--prompt-ids");
  FUSELM_CHECK(args.top_k >= 1 && args.top_k <= config.vocab_size, "--top-k must be in [1, ", config.vocab_size,
               "] (the vocabulary size), got ", args.top_k);

  options.max_batch = 1;
  options.max_seq_len = static_cast<int>(prompt.size());
  std::unique_ptr<Engine> engine = make_engine(*model, options);
  const int seq = engine->add_sequence();
  std::vector<float> logits, part;
  for (std::span<const int32_t> piece : split_chunks(prompt, options.max_prefill_tokens)) {
    SequenceChunk chunk{seq, piece, true};
    engine->forward({&chunk, 1}, part);
    logits.insert(logits.end(), part.begin(), part.end());
  }

  const size_t vocab = static_cast<size_t>(config.vocab_size);
  nlohmann::json positions = nlohmann::json::array();
  for (size_t t = 0; t < prompt.size(); ++t) {
    std::span<const float> row(logits.data() + t * vocab, vocab);
    const std::vector<int32_t> ids = top_ids(row, args.top_k);
    std::vector<float> values;
    for (int32_t id : ids) values.push_back(row[static_cast<size_t>(id)]);
    positions.push_back({{"top_ids", ids}, {"top_logits", values}, {"logsumexp", logsumexp(row)}});
  }
  if (args.json) {
    nlohmann::json out;
    out["positions"] = std::move(positions);
    out["last_logits"] = std::vector<float>(logits.end() - static_cast<std::ptrdiff_t>(vocab), logits.end());
    std::printf("%s\n", dump_json(out).c_str());
  } else {
    std::printf("%s, %zu positions\n", engine->description().c_str(), prompt.size());
    for (size_t t = 0; t < prompt.size(); ++t) {
      const auto& p = positions[t];
      std::printf("pos %zu  id %d  logsumexp %.5f  top:", t, prompt[t], p["logsumexp"].get<double>());
      for (size_t i = 0; i < p["top_ids"].size(); ++i)
        std::printf(" %d (%.5f)", p["top_ids"][i].get<int>(), p["top_logits"][i].get<double>());
      std::printf("\n");
    }
  }
  return 0;
}

std::function<int()> setup_forward(CLI::App& sub) {
  auto args = std::make_shared<ForwardArgs>();
  sub.add_option("-m,--model", args->model, "model: HF folder, .gguf, llama2.c .bin, or synthetic:PRESET")
      ->required();
  sub.add_option("--prompt-ids", args->prompt_ids, "token ids, e.g. 1,2,3")->required();
  sub.add_option("--top-k", args->top_k, "logits to report per position")->capture_default_str();
  args->engine.add_to(sub);
  sub.add_flag("--json", args->json, "print {positions: [{top_ids, top_logits, logsumexp}], last_logits}");
  return [args] { return run_forward(*args); };
}

FUSELM_COMMAND("forward", "one teacher-forced pass: logits at every prompt position", setup_forward);

}  // namespace
}  // namespace fuselm::cli
