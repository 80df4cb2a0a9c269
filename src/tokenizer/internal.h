#pragma once
// Pieces shared by the tokenizer implementations (not part of the public interface).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

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

// Throws Error when `id` is outside [0, vocab_size).
void check_token_id(int32_t id, int vocab_size, std::string_view kind);

// The format loaders, each taking an already-read file; `path` is used in messages.
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path);

}  // namespace fuselm::tok
