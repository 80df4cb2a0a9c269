#pragma once
// Pieces shared by the tokenizer implementations (not part of the public interface).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/tokenizer.h"

namespace fuselm::tok {

// Lets a std::string-keyed map be queried with a string_view without building a string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// "<0x0A>" -> 10; -1 for anything else. SentencePiece-style byte-fallback pieces.
inline int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// `s` with every occurrence of `from` (not empty: an empty `from` returns `s`) replaced by `to`.
inline std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string_view::npos; at = hit + from.size()) {
    out.append(s.substr(at, hit - at));
    out.append(to);
  }
  out.append(s.substr(at));
  return out;
}

// SentencePiece-style BPE runs over a whole text, not per word. When no vocabulary piece holds a
// `space` right after another character, no merge can join a character to a following space, so
// cutting the text before each run of spaces and merging the pieces separately gives exactly the
// same tokens (and lets long texts merge in small, cacheable pieces).
bool space_runs_are_word_starts(const std::vector<std::string>& pieces, std::string_view space);

// Calls on_segment(string_view) for consecutive pieces of `text` cut before every run of `space`
// that follows other text.
template <class OnSegment>
void for_each_space_segment(std::string_view text, std::string_view space, OnSegment on_segment) {
  size_t begin = 0, at = 0;
  bool previous_is_space = true;  // no cut at the very start
  while (at < text.size()) {
    const bool is_space = text.compare(at, space.size(), space) == 0;
    if (is_space && !previous_is_space && at > begin) {
      on_segment(text.substr(begin, at - begin));
      begin = at;
    }
    previous_is_space = is_space;
    at += is_space ? space.size() : 1;
  }
  if (begin < text.size()) on_segment(text.substr(begin));
}

// Finds special/added token text inside user text: leftmost match, the longest one at a position
// (HF's added-vocabulary matching; llama.cpp's special-token partition gives the same split).
class SpecialMatcher {
 public:
  struct Token {
    int32_t id = -1;
    bool lstrip = false;  // the match also takes the whitespace before it (HF AddedToken)
    bool rstrip = false;  // ... and after it
    bool single_word = false;  // only between non-word characters
  };
  void add(std::string text, Token token);
  bool empty() const { return tokens_.empty(); }
  // Calls on_text(string_view) for each plain fragment (possibly empty ones skipped) and
  // on_special(int32_t id) for each match, in order.
  template <class OnText, class OnSpecial>
  void split(std::string_view text, OnText on_text, OnSpecial on_special) const {
    size_t fragment_start = 0, at = 0;
    while (at < text.size()) {
      Match m = match_at(text, at);
      if (m.length == 0) {
        ++at;
        continue;
      }
      size_t begin = at, end = at + m.length;
      if (m.token->lstrip)
        while (begin > fragment_start && is_space(text[begin - 1])) --begin;
      if (m.token->rstrip)
        while (end < text.size() && is_space(text[end])) ++end;
      if (begin > fragment_start) on_text(text.substr(fragment_start, begin - fragment_start));
      on_special(m.token->id);
      fragment_start = at = end;
    }
    if (fragment_start < text.size()) on_text(text.substr(fragment_start));
  }

 private:
  struct Match {
    size_t length = 0;
    const Token* token = nullptr;
  };
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
  Match match_at(std::string_view text, size_t at) const;

  std::unordered_map<std::string, Token, StringHash, std::equal_to<>> tokens_;
  std::vector<size_t> lengths_;  // distinct token lengths, longest first
  bool first_byte_[256] = {};
};

// Throws Error when `id` is outside [0, vocab_size).
void check_token_id(int32_t id, int vocab_size, std::string_view kind);

// The format loaders, each taking an already-read file; `path` is used in messages.
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path);
std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::string& path);
std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const std::string& path);
// `config_path`: tokenizer_config.json beside it (bos/eos names), or empty.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path, const std::string& config_path);
// Builds the HF tokenizer from an already-parsed tokenizer.json document (also used for GGUF
// "gpt2" vocabularies, which are translated into one); `path` is used in messages; `config` is
// what tokenizer_config.json would hold (bos_token, eos_token), or null.
std::unique_ptr<Tokenizer> make_hf_tokenizer(const nlohmann::json& root, const std::string& path,
                                             const nlohmann::json& config);
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path);
// Split regexes of the BPE families (meta-llama/llama-models tokenizer.py, Qwen2, GPT-2).
extern const char* const kLlama3Pattern;
extern const char* const kQwen2Pattern;
extern const char* const kGpt2Pattern;
// True when the first line reads "<base64> <rank>".
bool looks_like_tiktoken(std::string_view head);

}  // namespace fuselm::tok
