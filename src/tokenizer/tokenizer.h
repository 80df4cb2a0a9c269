#pragma once
// The tokenizer interface every format implements (HF tokenizer.json, SentencePiece
// tokenizer.model, tiktoken rank files, GGUF-embedded vocabularies, llama2.c tokenizer.bin).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fuselm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes text; `add_bos` prepends the BOS token where the format has one. Special-token text
  // inside `text` is encoded as plain text unless `parse_special`.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const = 0;
  // The bytes of one token as the reference decoder emits them in a stream (may be a partial
  // UTF-8 sequence; leading-space rules applied as the reference does for a non-first token).
  virtual std::string token_bytes(int32_t id) const = 0;
  // Decodes a whole sequence exactly as the reference decoder does.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;

  virtual int vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when none
  virtual std::vector<int32_t> eos_ids() const = 0;
  virtual std::string kind() const = 0;  // e.g. "llama2c", "sentencepiece", "hf-bpe", "tiktoken", "gguf-llama"
};

// Streaming detokenization: feed ids one by one, get text that never ends inside a UTF-8 sequence.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Returns the complete text that this token finishes (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is held back at the end of the stream (invalid bytes as U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;
  size_t emitted_ = 0;  // bytes of decode(ids_) already returned
};

// Loads a tokenizer from a file or a folder: tokenizer.json / tokenizer.model in an HF or Meta
// folder, a .gguf file's embedded vocabulary, a llama2.c tokenizer.bin (vocab size taken from the
// file). Throws Error naming what was looked for when nothing usable is found.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace fuselm
