#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace fuselm::tok {

Regex::Regex(std::string pattern) : pattern_(std::move(pattern)) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UTF input is validated once by the caller (utf8::sanitize), so PCRE2 need not re-check it.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail("pre-tokenizer regex does not compile: ", reinterpret_cast<const char*>(message), " at offset ", offset,
         " in pattern ", pattern_);
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Regex::Matcher::Matcher(const Regex& regex, std::string_view text) : regex_(regex), text_(text) {
  match_data_ = pcre2_match_data_create_from_pattern(static_cast<pcre2_code*>(regex.code_), nullptr);
  FUSELM_CHECK(match_data_ != nullptr, "out of memory creating regex match data");
}

Regex::Matcher::~Matcher() { pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_)); }

bool Regex::Matcher::next(size_t& begin, size_t& end) {
  auto* code = static_cast<pcre2_code*>(regex_.code_);
  auto* data = static_cast<pcre2_match_data*>(match_data_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
  while (at_ < text_.size()) {
    int rc = regex_.jit_ ? pcre2_jit_match(code, subject, text_.size(), at_, 0, data, nullptr)
                         : PCRE2_ERROR_JIT_STACKLIMIT;
    // The interpreter keeps its backtracking state on the heap: the fallback for matches (a very
    // long whitespace run) that outgrow the JIT's machine stack.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(code, subject, text_.size(), at_, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail("pre-tokenizer regex failed at byte ", at_, ": ", reinterpret_cast<const char*>(message),
           " (pattern ", regex_.pattern_, ")");
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    begin = ovector[0];
    end = ovector[1];
    if (end == begin) {
      at_ = begin + utf8::char_length(text_, begin);  // skip an empty match
      continue;
    }
    at_ = end;
    return true;
  }
  return false;
}

}  // namespace fuselm::tok
