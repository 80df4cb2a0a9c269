#pragma once
// Unicode-correct pre-tokenizer regexes through PCRE2 (UTF + UCP, JIT-compiled when the platform
// supports it). std::regex knows nothing of \p{L} and is far too slow.
#include <cstddef>
#include <string>
#include <string_view>

namespace fuselm::tok {

class Regex {
 public:
  // Throws Error naming the pattern and PCRE2's message (with the offset) when it does not compile.
  explicit Regex(std::string pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // Calls on_match(begin, end) for each successive non-overlapping match in `text` (valid UTF-8),
  // byte offsets. An empty match advances by one code point and is not reported.
  template <class OnMatch>
  void for_each_match(std::string_view text, OnMatch on_match) const {
    Matcher m(*this, text);
    size_t begin, end;
    while (m.next(begin, end)) on_match(begin, end);
  }

 private:
  class Matcher {
   public:
    Matcher(const Regex& regex, std::string_view text);
    ~Matcher();
    bool next(size_t& begin, size_t& end);

   private:
    const Regex& regex_;
    std::string_view text_;
    size_t at_ = 0;
    void* match_data_ = nullptr;  // pcre2_match_data_8
  };

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

}  // namespace fuselm::tok
