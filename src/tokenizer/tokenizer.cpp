#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <functional>

#include "core/error.h"
#include "tokenizer/internal.h"
#include "tokenizer/utf8.h"

namespace fuselm {

std::string Tokenizer::stream_bytes(int32_t id, bool& at_start) const {
  at_start = false;
  return token_bytes(id);
}

std::string StreamDecoder::push(int32_t id) {
  std::string bytes = tokenizer_.stream_bytes(id, at_start_);
  if (pending_.empty() && utf8::is_valid(bytes)) return bytes;  // the common case
  pending_ += bytes;
  std::string tail;
  std::string text = utf8::take_complete(pending_, tail);
  pending_ = std::move(tail);
  return text;
}

std::string StreamDecoder::flush() {
  std::string text = utf8::sanitize(pending_);
  pending_.clear();
  at_start_ = true;
  return text;
}

namespace tok {

void SpecialMatcher::add(std::string text, Token token) {
  if (text.empty()) return;
  first_byte_[static_cast<uint8_t>(text[0])] = true;
  if (std::find(lengths_.begin(), lengths_.end(), text.size()) == lengths_.end()) {
    lengths_.push_back(text.size());
    std::sort(lengths_.begin(), lengths_.end(), std::greater<>());
  }
  tokens_[std::move(text)] = token;
}

SpecialMatcher::Match SpecialMatcher::match_at(std::string_view text, size_t at) const {
  if (!first_byte_[static_cast<uint8_t>(text[at])]) return {};
  auto is_word = [](char c) {
    auto b = static_cast<uint8_t>(c);
    return b >= 0x80 || std::isalnum(b) || c == '_';
  };
  for (size_t len : lengths_) {
    if (len > text.size() - at) continue;
    auto it = tokens_.find(text.substr(at, len));
    if (it == tokens_.end()) continue;
    if (it->second.single_word &&
        ((at > 0 && is_word(text[at - 1])) || (at + len < text.size() && is_word(text[at + len]))))
      continue;
    return {len, &it->second};
  }
  return {};
}

bool space_runs_are_word_starts(const std::vector<std::string>& pieces, std::string_view space) {
  for (const std::string& piece : pieces) {
    for (size_t at = piece.find(space); at != std::string::npos; at = piece.find(space, at + space.size())) {
      if (at == 0) continue;
      if (at < space.size() || piece.compare(at - space.size(), space.size(), space) != 0) return false;
    }
  }
  return true;
}

void check_token_id(int32_t id, int vocab_size, std::string_view kind) {
  FUSELM_CHECK(id >= 0 && id < vocab_size, "token id ", id, " is outside the ", kind, " vocabulary (0..",
               vocab_size - 1, "); the ids come from a different tokenizer or model");
}

}  // namespace tok
}  // namespace fuselm
