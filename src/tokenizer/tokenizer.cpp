#include "tokenizer/tokenizer.h"

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

void check_token_id(int32_t id, int vocab_size, std::string_view kind) {
  FUSELM_CHECK(id >= 0 && id < vocab_size, "token id ", id, " is outside the ", kind, " vocabulary (0..",
               vocab_size - 1, "); the ids come from a different tokenizer or model");
}

}  // namespace tok
}  // namespace fuselm
