#pragma once
// UTF-8 helpers shared by the tokenizers: well-formedness follows Unicode Table 3-7, and invalid
// input is replaced with U+FFFD per maximal subpart (the policy of Python's errors="replace" and
// Rust's from_utf8_lossy, which the reference decoders use).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fuselm::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the well-formed prefix of a sequence starting at s[i] (1..4), and whether it is a
// complete code point. A length of 1 with complete=false means s[i] itself is invalid.
struct Prefix {
  int length = 0;
  bool complete = false;
  bool truncated = false;  // the input ended before the code point did
};
Prefix well_formed_prefix(std::string_view s, size_t i);

// Byte length of the code point starting at s[i] when it is well formed, else 1 (invalid byte).
inline int char_length(std::string_view s, size_t i) {
  Prefix p = well_formed_prefix(s, i);
  return p.complete ? p.length : 1;
}

// Decodes the code point starting at s[i] (must be well formed; else returns the byte value).
uint32_t decode_at(std::string_view s, size_t i, int* length);

void append(std::string& out, uint32_t code_point);

// Replaces every ill-formed subsequence with U+FFFD.
std::string sanitize(std::string_view s);
bool is_valid(std::string_view s);

// Splits bytes into [complete text][incomplete tail]: the tail is a well-formed prefix of a code
// point that more bytes could still complete. Ill-formed bytes before the tail become U+FFFD.
// Returns the emitted text; `tail` receives the held-back bytes.
std::string take_complete(std::string_view s, std::string& tail);

}  // namespace fuselm::utf8
