// SentencePiece tokenizer.model through the sentencepiece library itself, so encode and decode
// are the reference by construction. Only streaming (stream_bytes) is done here, piece by piece,
// following the library's decoder rules.
#include <sentencepiece_processor.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/internal.h"
#include "tokenizer/utf8.h"

namespace fuselm::tok {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 ▁
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";  // " ⁇ ", sentencepiece's default

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& path, std::string_view serialized) {
    auto status = processor_.LoadFromSerializedProto({serialized.data(), serialized.size()});
    FUSELM_CHECK(status.ok(), "cannot load SentencePiece model '", path, "': ", status.ToString(),
                 "; the file is truncated or not a SentencePiece tokenizer.model");
    const int n = processor_.GetPieceSize();
    FUSELM_CHECK(n > 0, "SentencePiece model '", path, "' has no pieces");
    byte_of_.assign(n, -1);
    for (int id = 0; id < n; ++id) {
      const std::string& piece = processor_.IdToPiece(id);
      piece_ids_.emplace(piece, id);
      if (processor_.IsByte(id)) byte_of_[id] = static_cast<int16_t>(parse_byte_piece(piece));
      if (processor_.IsControl(id) || processor_.IsUnknown(id)) specials_.add(piece, {id});
    }
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    std::vector<int32_t> ids;
    if (add_bos && bos_id() >= 0) ids.push_back(bos_id());
    auto encode_plain = [&](std::string_view fragment) {
      std::vector<int> piece_ids;
      auto status = processor_.Encode({fragment.data(), fragment.size()}, &piece_ids);
      FUSELM_CHECK(status.ok(), "SentencePiece failed to encode text: ", status.ToString());
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    };
    if (!parse_special) {
      encode_plain(text);
    } else {
      // Like llama.cpp with parse_special: each fragment between special tokens is encoded on its own
      // (so it gets its own dummy-prefix space).
      specials_.split(text, encode_plain, [&](int32_t id) { ids.push_back(id); });
    }
    return ids;
  }

  std::string token_bytes(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    if (processor_.IsControl(id)) return {};
    if (processor_.IsUnknown(id)) return std::string(kUnknownSurface);
    if (byte_of_[id] >= 0) return std::string(1, static_cast<char>(byte_of_[id]));
    return replace_all(processor_.IdToPiece(id), kSpaceSymbol, " ");
  }

  std::string stream_bytes(int32_t id, bool& at_start) const override {
    std::string bytes = token_bytes(id);
    if (processor_.IsControl(id)) return bytes;  // invisible: the next token is still first
    // The dummy-prefix space of the first piece is removed, as DecodeIds does.
    if (at_start && byte_of_[id] < 0 && !processor_.IsUnknown(id) && bytes.starts_with(' ')) bytes.erase(0, 1);
    at_start = false;
    return bytes;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::vector<int> piece_ids(ids.begin(), ids.end());
    for (int id : piece_ids) check_token_id(id, vocab_size(), kind());
    std::string text;
    auto status = processor_.Decode(piece_ids, &text);
    FUSELM_CHECK(status.ok(), "SentencePiece failed to decode: ", status.ToString());
    return text;
  }

  int vocab_size() const override { return processor_.GetPieceSize(); }
  int32_t bos_id() const override { return processor_.bos_id(); }
  std::vector<int32_t> eos_ids() const override {
    if (processor_.eos_id() < 0) return {};
    return {processor_.eos_id()};
  }
  std::string kind() const override { return "sentencepiece"; }

  int32_t token_id(std::string_view piece) const override {
    auto it = piece_ids_.find(piece);
    return it == piece_ids_.end() ? -1 : it->second;
  }
  std::string token_text(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    return processor_.IdToPiece(id);
  }
  bool is_special(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    return processor_.IsControl(id) || processor_.IsUnknown(id);
  }

 private:
  sentencepiece::SentencePieceProcessor processor_;
  std::vector<int16_t> byte_of_;
  PieceMap piece_ids_;
  SpecialMatcher specials_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::string& path) {
  auto file = MappedFile::open(path);
  std::string_view bytes(reinterpret_cast<const char*>(file->data()), file->size());
  return std::make_unique<SentencePieceTokenizer>(path, bytes);
}

}  // namespace fuselm::tok
