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
  // Decodes a whole sequence exactly as the reference decoder does, invalid UTF-8 replaced by
  // U+FFFD: SentencePiece, GGUF "llama" and llama2.c hide control tokens (BOS/EOS); HF
  // tokenizer.json skips special tokens (the `tokenizers` library's default); tiktoken shows them.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;

  virtual int vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when none
  virtual std::vector<int32_t> eos_ids() const = 0;
  virtual std::string kind() const = 0;  // e.g. "llama2c", "sentencepiece", "hf-bpe", "tiktoken", "gguf-llama"

  // The raw bytes `id` adds to a decoded stream. `at_start` is true until the first visible token
  // of the stream; the tokenizer applies its leading-space rule for that token and updates the
  // flag. Concatenating these over a sequence gives decode() before invalid UTF-8 is replaced.
  // Default: token_bytes(id), and the stream is no longer at its start.
  virtual std::string stream_bytes(int32_t id, bool& at_start) const;
  // The id of a token given its exact vocabulary text (special tokens such as "<|eot_id|>" included),
  // or -1 when the vocabulary has no such token.
  virtual int32_t token_id(std::string_view /*piece*/) const { return -1; }
  // The vocabulary text of a token as stored (e.g. "▁Hello", "Ġworld", "<0x0A>", "<|eot_id|>").
  virtual std::string token_text(int32_t id) const { return token_bytes(id); }
  // True for special/control tokens (BOS, EOS, chat markers): not produced from plain text.
  virtual bool is_special(int32_t /*id*/) const { return false; }
  // The chat template shipped with the tokenizer (tokenizer_config.json, chat_template.jinja,
  // tokenizer.chat_template in GGUF); empty when none was found.
  const std::string& chat_template() const { return chat_template_; }
  void set_chat_template(std::string source) { chat_template_ = std::move(source); }

 private:
  std::string chat_template_;
};

// Streaming detokenization: feed ids one by one, get text that never ends inside a UTF-8 sequence.
// O(1) amortized per token: only an incomplete UTF-8 tail (at most 3 bytes) is held back.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Returns the complete text that this token finishes (possibly empty). Bytes that can never
  // become valid UTF-8 are emitted as U+FFFD.
  std::string push(int32_t id);
  // Returns whatever is held back at the end of the stream (invalid bytes as U+FFFD) and starts
  // a new stream.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // an incomplete UTF-8 sequence waiting for its continuation bytes
  bool at_start_ = true;
};

// Loads a tokenizer from a file or a folder: tokenizer.json / tokenizer.model in an HF or Meta
// folder, a .gguf file's embedded vocabulary, a llama2.c tokenizer.bin (vocab size taken from the
// file). Throws Error naming what was looked for when nothing usable is found.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace fuselm
