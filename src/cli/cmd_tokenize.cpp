// fuselm tokenize: text -> ids, ids -> text, and a single-core tokenizer speed benchmark.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/rng.h"
#include "tokenizer/tokenizer.h"

namespace fuselm::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool has_text = false;
  std::string decode;
  std::string benchmark;
  bool no_bos = false;
  bool parse_special = false;
  bool json = false;
};

std::vector<int32_t> parse_ids(const std::string& list) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    std::string piece = list.substr(at, comma - at);
    piece.erase(0, piece.find_first_not_of(" \t"));
    piece.erase(piece.find_last_not_of(" \t") + 1);
    if (!piece.empty() || comma < list.size()) {
      int32_t id = 0;
      auto [end, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), id);
      FUSELM_CHECK(ec == std::errc() && end == piece.data() + piece.size(), "--decode expects comma-separated token ids ",
                   "like 1,2,3; \"", piece, "\" is not an integer");
      ids.push_back(id);
    }
    at = comma + 1;
  }
  return ids;
}

// Deterministic English-like prose (common words, punctuation, numbers, paragraphs), so the
// benchmark needs no data files.
std::string generate_text(size_t bytes) {
  static const char* const kWords[] = {
      "the", "of", "and", "to", "a", "in", "that", "is", "was", "he", "for", "it", "with", "as", "his", "on", "be",
      "at", "by", "I", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they", "which", "one", "you",
      "were", "her", "all", "she", "there", "would", "their", "we", "him", "been", "has", "when", "who", "will",
      "more", "no", "if", "out", "so", "said", "what", "up", "its", "about", "into", "than", "them", "can", "only",
      "other", "new", "some", "could", "time", "these", "two", "may", "then", "do", "first", "any", "my", "now",
      "such", "like", "our", "over", "man", "me", "even", "most", "made", "after", "also", "did", "many", "before",
      "must", "through", "back", "years", "where", "much", "your", "way", "well", "down", "should", "because",
      "each", "just", "those", "people", "Mr.", "how", "too", "little", "state", "good", "very", "make", "world",
      "still", "own", "see", "men", "work", "long", "get", "here", "between", "both", "life", "being", "under",
      "never", "day", "same", "another", "know", "while", "last", "might", "us", "great", "old", "year", "off",
      "come", "since", "against", "go", "came", "right", "used", "take", "three", "government", "engine",
      "tokenizer", "inference", "kernel", "memory", "bandwidth", "attention", "remarkable", "understanding",
      "nevertheless", "government's", "didn't", "they're", "we'll", "it's", "London", "Paris", "September"};
  constexpr size_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);
  Rng rng(20240601);
  std::string out;
  out.reserve(bytes + 64);
  bool sentence_start = true;
  while (out.size() < bytes) {
    std::string word = kWords[rng.next_u64() % kWordCount];
    if (sentence_start) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
    uint64_t r = rng.next_u64() % 100;
    if (r < 2) word = std::to_string(rng.next_u64() % 100000);
    out += word;
    sentence_start = false;
    r = rng.next_u64() % 100;
    if (r < 6) {
      out += ". ";
      sentence_start = true;
      if (rng.next_u64() % 8 == 0) out += "\n\n";
    } else if (r < 11) {
      out += ", ";
    } else if (r < 12) {
      out += "; ";
    } else {
      out += ' ';
    }
  }
  out.resize(bytes);
  return out;
}

size_t parse_size(const std::string& spec) {
  size_t value = 0;
  auto [end, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), value);
  std::string unit(end, spec.data() + spec.size());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  FUSELM_CHECK(ec == std::errc() && value > 0, "--benchmark expects a file or a size like 1MB, 500KB, 100000; got \"",
               spec, "\"");
  if (unit.empty() || unit == "b") return value;
  if (unit == "k" || unit == "kb") return value * 1000;
  if (unit == "m" || unit == "mb") return value * 1000 * 1000;
  if (unit == "kib") return value * 1024;
  if (unit == "mib") return value * 1024 * 1024;
  fail("--benchmark size unit \"", unit, "\" is not one of B, KB, MB, KiB, MiB");
}

int run_benchmark(const TokenizeArgs& args) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  std::string text;
  std::string source;
  if (std::filesystem::is_regular_file(args.benchmark)) {
    text = read_text_file(args.benchmark);
    source = args.benchmark;
  } else {
    text = generate_text(parse_size(args.benchmark));
    source = "generated English-like text";
  }
  auto t0 = Clock::now();
  auto tok = load_tokenizer(args.model);
  const double load_s = seconds(Clock::now() - t0);
  std::vector<double> runs;
  size_t n_tokens = 0;
  for (int run = 0; run < 3; ++run) {
    // A fresh tokenizer each time would measure the load; the word cache is part of the design,
    // so the first run shows the cold-cache number and the later ones the warm one.
    auto start = Clock::now();
    auto ids = tok->encode(text, false, args.parse_special);
    runs.push_back(seconds(Clock::now() - start));
    n_tokens = ids.size();
  }
  const double cold = runs[0];
  const double warm = *std::min_element(runs.begin() + 1, runs.end());
  const double mb = static_cast<double>(text.size()) / 1e6;
  if (args.json) {
    nlohmann::ordered_json j = {{"tokenizer", tok->kind()}, {"source", source}, {"bytes", text.size()},
                                {"tokens", n_tokens}, {"load_s", load_s}, {"encode_cold_s", cold},
                                {"encode_warm_s", warm}, {"mb_per_s_cold", mb / cold}, {"tokens_per_s_cold", n_tokens / cold}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("tokenizer %s (%s), one thread\n", tok->kind().c_str(), args.model.c_str());
    std::printf("input     %zu bytes of %s -> %zu tokens\n", text.size(), source.c_str(), n_tokens);
    std::printf("load      %.3f s\n", load_s);
    std::printf("encode    %.3f s cold cache (%.2f MB/s, %.0f tokens/s), %.3f s warm cache\n", cold, mb / cold,
                n_tokens / cold, warm);
  }
  return 0;
}

int run_tokenize(const TokenizeArgs& args) {
  if (!args.benchmark.empty()) return run_benchmark(args);
  const int modes = (args.has_text ? 1 : 0) + (args.decode.empty() ? 0 : 1);
  FUSELM_CHECK(modes == 1, "give exactly one of --text TEXT, --decode IDS or --benchmark FILE_OR_SIZE");
  auto tok = load_tokenizer(args.model);
  if (!args.decode.empty()) {
    std::string text = tok->decode(parse_ids(args.decode));
    if (args.json) {
      std::printf("%s\n", nlohmann::json({{"text", text}}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::printf("\n");
    }
    return 0;
  }
  auto ids = tok->encode(args.text, !args.no_bos, args.parse_special);
  if (args.json) {
    std::printf("%s\n", nlohmann::json({{"ids", ids}}).dump().c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

FUSELM_COMMAND("tokenize", "Encode text to token ids, decode ids to text, or benchmark a tokenizer",
               [](CLI::App& sub) -> std::function<int()> {
                 auto args = std::make_shared<TokenizeArgs>();
                 sub.add_option("-m,--model", args->model,
                                "model folder, tokenizer.json, tokenizer.model, .gguf or llama2.c tokenizer.bin")
                     ->required();
                 sub.add_option("--text", args->text, "text to encode")
                     ->each([args](const std::string&) { args->has_text = true; });
                 sub.add_option("--decode", args->decode, "comma-separated token ids to decode, e.g. 1,2,3");
                 sub.add_option("--benchmark", args->benchmark,
                                "time encoding a text file, or generated text of a size like 1MB");
                 sub.add_flag("--no-bos", args->no_bos, "do not add the BOS token");
                 sub.add_flag("--parse-special", args->parse_special,
                              "encode special-token text such as <|eot_id|> as the special token (default: plain text)");
                 sub.add_flag("--json", args->json, "JSON output");
                 return [args] { return run_tokenize(*args); };
               });

}  // namespace
}  // namespace fuselm::cli
