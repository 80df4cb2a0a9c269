// fuselm generate: prompt in, tokens out, streamed as they are sampled.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "cli/command.h"
#include "cli/common.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace fuselm::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt_text;
  std::string prompt_ids;
  bool has_prompt_text = false;  // -p "" is a prompt: just BOS
  int max_new_tokens = 128;
  SamplingParams sampling;
  EngineFlags engine;
  std::string tokenizer_path;
  bool no_bos = false;
  bool ignore_eos = false;
  bool json = false;
};

void check_sampling_flags(const SamplingParams& p, int max_new_tokens) {
  FUSELM_CHECK(max_new_tokens >= 0, "-n must be >= 0, got ", max_new_tokens);
  FUSELM_CHECK(p.temperature >= 0.0f, "--temperature must be >= 0 (0 = greedy), got ", p.temperature);
  FUSELM_CHECK(p.top_k >= 0, "--top-k must be >= 0 (0 = off), got ", p.top_k);
  FUSELM_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f, "--top-p must be in (0, 1] (1 = off), got ", p.top_p);
  FUSELM_CHECK(p.min_p >= 0.0f && p.min_p <= 1.0f, "--min-p must be in [0, 1] (0 = off), got ", p.min_p);
  FUSELM_CHECK(p.repetition_penalty > 0.0f, "--repetition-penalty must be > 0 (1 = off), got ",
               p.repetition_penalty);
}

// The tokenizer named by --tokenizer, else the one found next to the model. Only -p strictly
// needs one; otherwise a tokenizer that fails to load costs the text output, not the run.
std::unique_ptr<Tokenizer> find_tokenizer(const GenerateArgs& args, const Model& model) {
  if (!args.tokenizer_path.empty()) return load_tokenizer(args.tokenizer_path);
  if (model.tokenizer_hint.empty()) {
    FUSELM_CHECK(!args.has_prompt_text, "-p needs a tokenizer, and none was found next to the model '",
                 args.model, "'; pass --tokenizer PATH, or give token ids with --prompt-ids");
    return nullptr;
  }
  if (args.has_prompt_text) return load_tokenizer(model.tokenizer_hint);
  try {
    return load_tokenizer(model.tokenizer_hint);
  } catch (const Error& e) {
    std::fprintf(stderr, "warning: printing token ids only: the tokenizer at '%s' did not load: %s\n",
                 model.tokenizer_hint.c_str(), e.what());
    return nullptr;
  }
}

int run_generate(const GenerateArgs& args) {
  // Everything that can be checked without the model is checked before loading it.
  check_sampling_flags(args.sampling, args.max_new_tokens);
  EngineOptions options = args.engine.options();
  std::vector<int32_t> prompt;
  if (!args.has_prompt_text) prompt = parse_id_list(args.prompt_ids, "--prompt-ids");

  std::unique_ptr<Model> model = args.engine.load(args.model);
  const ModelConfig& config = model->config;
  std::unique_ptr<Tokenizer> tokenizer = find_tokenizer(args, *model);
  if (!args.has_prompt_text) {
    check_prompt(prompt, config, "--prompt-ids");
  } else {
    prompt = tokenizer->encode(args.prompt_text, !args.no_bos);
    check_prompt(prompt, config, "the encoded -p prompt");
  }

  std::vector<int32_t> eos_ids = config.eos_token_ids;
  if (tokenizer) {
    for (int32_t id : tokenizer->eos_ids()) eos_ids.push_back(id);
  }
  auto is_eos = [&](int32_t id) {
    return !args.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
  };

  // Prompt and generated tokens together stay within the model's context.
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  const int64_t context = config.max_position_embeddings > 0 ? config.max_position_embeddings
                                                             : prompt_len + args.max_new_tokens;
  const int max_new = static_cast<int>(std::min<int64_t>(args.max_new_tokens, context - prompt_len));
  if (max_new < args.max_new_tokens) {
    std::fprintf(stderr, "warning: generating %d tokens, not %d: the prompt's %lld tokens leave no more room in the "
                 "model's context of %lld tokens\n", max_new, args.max_new_tokens, static_cast<long long>(prompt_len),
                 static_cast<long long>(context));
  }
  // One sequence, sized for what this run can reach (the GPU backend plans memory from it).
  options.max_batch = 1;
  options.max_seq_len = static_cast<int>(std::max<int64_t>(prompt_len, prompt_len + max_new - 1));
  std::unique_ptr<Engine> engine = make_engine(*model, options);

  std::optional<StreamDecoder> stream;
  if (tokenizer) {
    stream.emplace(*tokenizer);
    for (int32_t id : prompt) stream->push(id);  // so the first new token decodes as a continuation
  }
  std::string text;
  auto emit = [&](int32_t id) {
    std::string piece;
    if (stream) {
      if (!is_eos(id)) piece = stream->push(id);
      text += piece;
    } else {
      piece = str_cat(id, " ");
    }
    if (!args.json && !piece.empty()) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
  };

  SamplerState sampler(args.sampling);
  sampler.history = prompt;
  SamplerState* samplers[] = {&sampler};
  std::vector<int32_t> generated, next(1);
  std::vector<float> unused_logits;
  const int seq = engine->add_sequence();
  const auto t0 = std::chrono::steady_clock::now();
  auto t_first = t0;
  if (max_new > 0) {
    const auto chunks = split_chunks(prompt, options.max_prefill_tokens);
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
      SequenceChunk chunk{seq, chunks[i], false};
      engine->forward({&chunk, 1}, unused_logits);
    }
    SequenceChunk last{seq, chunks.back(), false};
    engine->forward_sample({&last, 1}, samplers, next);
    t_first = std::chrono::steady_clock::now();
    // Each decode step is submitted before the host waits for the one before it, and takes that
    // step's token on the engine's side; a step submitted after an end-of-sequence token is dropped.
    // A repetition penalty needs every token in its window first: then one step at a time.
    const bool pipelined = !args.sampling.penalised();
    static const int32_t pending = kPendingToken;
    const int32_t first_token = next[0];
    SequenceChunk step{seq, std::span<const int32_t>(&first_token, 1), false};
    if (pipelined && max_new > 1) engine->submit_sample({&step, 1}, samplers);
    step.tokens = std::span<const int32_t>(&pending, 1);
    while (true) {
      generated.push_back(next[0]);
      emit(next[0]);
      const bool done = is_eos(next[0]) || static_cast<int>(generated.size()) == max_new;
      if (pipelined) {
        if (engine->steps_in_flight() == 0) break;
        if (!done && static_cast<int>(generated.size()) + 1 < max_new) engine->submit_sample({&step, 1}, samplers);
        engine->wait_sample(next);
        if (done) {
          while (engine->steps_in_flight() > 0) engine->wait_sample(next);
          break;
        }
      } else {
        if (done) break;
        step.tokens = std::span<const int32_t>(next.data(), 1);
        engine->forward_sample({&step, 1}, samplers, next);
      }
    }
  }
  if (stream) {
    const std::string tail = stream->flush();
    text += tail;
    if (!args.json) std::fwrite(tail.data(), 1, tail.size(), stdout);
  }
  const auto t1 = std::chrono::steady_clock::now();

  if (args.json) {
    nlohmann::json out;
    out["prompt_ids"] = prompt;
    out["ids"] = generated;
    out["text"] = text;
    std::printf("%s\n", dump_json(out).c_str());
  } else {
    std::printf("\n");
    std::fflush(stdout);  // the summary goes to stderr: keep it after the text on a terminal
    const double prefill_s = std::chrono::duration<double>(t_first - t0).count();
    const double decode_s = std::chrono::duration<double>(t1 - t_first).count();
    const size_t decoded = generated.empty() ? 0 : generated.size() - 1;
    std::fprintf(stderr, "[%s] prompt %zu tokens in %.3f s; %zu more tokens in %.3f s (%.1f tokens/s)\n",
                 engine->description().c_str(), prompt.size(), prefill_s, decoded, decode_s,
                 decode_s > 0 ? decoded / decode_s : 0.0);
  }
  std::fflush(stdout);
  return 0;
}

std::function<int()> setup_generate(CLI::App& sub) {
  auto args = std::make_shared<GenerateArgs>();
  sub.add_option("-m,--model", args->model, "model: HF folder, .gguf, llama2.c .bin, or synthetic:PRESET")
      ->required();
  auto* text = sub.add_option("-p,--prompt", args->prompt_text, "prompt text (needs a tokenizer)");
  auto* ids = sub.add_option("--prompt-ids", args->prompt_ids, "prompt as token ids, e.g. 1,2,3");
  text->excludes(ids);
  sub.add_option("-n,--max-new-tokens", args->max_new_tokens, "tokens to generate")->capture_default_str();
  sub.add_option("--temperature", args->sampling.temperature, "0 = greedy")->capture_default_str();
  sub.add_option("--top-k", args->sampling.top_k, "keep the k most likely tokens (0 = off)")->capture_default_str();
  sub.add_option("--top-p", args->sampling.top_p, "nucleus sampling mass (1 = off)")->capture_default_str();
  sub.add_option("--min-p", args->sampling.min_p, "drop tokens below min-p times the top probability (0 = off)")
      ->capture_default_str();
  sub.add_option("--repetition-penalty", args->sampling.repetition_penalty,
                 "penalise tokens of the last 64 (1 = off)")
      ->capture_default_str();
  sub.add_option("--seed", args->sampling.seed, "sampling seed: the same seed gives the same output")
      ->capture_default_str();
  args->engine.add_to(sub);
  sub.add_option("--tokenizer", args->tokenizer_path, "tokenizer file or folder (default: found next to the model)");
  sub.add_flag("--no-bos", args->no_bos, "do not prepend BOS to -p text");
  sub.add_flag("--ignore-eos", args->ignore_eos, "keep generating past end-of-sequence tokens");
  sub.add_flag("--json", args->json, "print one JSON object {prompt_ids, ids, text} at the end");
  return [args, text, ids] {
    FUSELM_CHECK(text->count() > 0 || ids->count() > 0, "give a prompt: -p TEXT or --prompt-ids 1,2,3");
    args->has_prompt_text = text->count() > 0;
    return run_generate(*args);
  };
}

FUSELM_COMMAND("generate", "generate text from a prompt", setup_generate);

}  // namespace
}  // namespace fuselm::cli
