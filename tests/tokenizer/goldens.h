#pragma once
// Loads the shared tokenizer reference cases: tokenizer-goldens.json (25 texts with tiktoken /
// SentencePiece ids) and llama.cpp's llama-spm-golden.{inp,out}.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace fuselm::test {

struct TokenizerCase {
  std::string text;
  std::vector<int32_t> ids;
};

// `family` is "llama3" or "llama2".
inline std::vector<TokenizerCase> tokenizer_goldens(const std::string& family) {
  auto json = nlohmann::json::parse(read_text_file(model_path("tokenizer-goldens.json")));
  std::vector<TokenizerCase> cases;
  for (const auto& c : json.at(family)) cases.push_back({c.at("text"), c.at("ids").get<std::vector<int32_t>>()});
  return cases;
}

// llama.cpp's format: inputs separated by "\n__ggml_vocab_test__\n" (the file also ends with one),
// outputs one line of space-separated ids per input, no BOS.
inline std::vector<TokenizerCase> llama_spm_goldens() {
  std::string inputs = read_text_file(model_path("llama2-tokenizer/llama-spm-golden.inp"));
  std::string outputs = read_text_file(model_path("llama2-tokenizer/llama-spm-golden.out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<TokenizerCase> cases;
  size_t at = 0;
  while (at < inputs.size()) {
    size_t end = inputs.find(separator, at);
    if (end == std::string::npos) end = inputs.size();
    cases.push_back({inputs.substr(at, end - at), {}});
    at = end + separator.size();
  }
  std::istringstream lines(outputs);
  std::string line;
  for (auto& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

// Decodes `ids` one token at a time through a StreamDecoder, as a generation loop would.
inline std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamDecoder stream(tok);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  return out + stream.flush();
}

}  // namespace fuselm::test
