#include "model/json_util.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "model/file_sniff.h"

namespace fuselm {

void check_json_depth(std::string_view text, const std::string& where) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      FUSELM_CHECK(++depth <= kMaxJsonDepth, where, ": JSON nested more than ", kMaxJsonDepth,
                   " levels deep at byte ", i, "; no real file nests this deep, the file is corrupt");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

nlohmann::json parse_json_text(std::string_view text, const std::string& where) {
  check_json_depth(text, where);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    const size_t at = std::min(e.byte == 0 ? 0 : e.byte - 1, text.size());
    const std::string_view before = text.substr(0, at);
    const size_t line = 1 + std::count(before.begin(), before.end(), '\n');
    const size_t line_start = before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
    const size_t column = at - line_start + 1;
    const size_t excerpt_start = at >= 20 ? at - 20 : 0;
    // nlohmann's text repeats the position after "column N: "; keep only what went wrong.
    std::string_view what = e.what();
    if (size_t col = what.find("column "); col != std::string_view::npos) {
      if (size_t sep = what.find(": ", col); sep != std::string_view::npos) what.remove_prefix(sep + 2);
    }
    fail(where, ": malformed JSON at line ", line, ", column ", column, " (byte ", at, "): ", what,
         "; near \"", printable_prefix(text.substr(excerpt_start, 40), 40), "\"; fix or re-download the file");
  }
}

std::optional<int64_t> json_integer(const nlohmann::json& v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else {
    return std::nullopt;
  }
  if (x < lo || x > hi) return std::nullopt;
  return x;
}

void fail_json_integer(const nlohmann::json& v, int64_t lo, int64_t hi, std::string_view what) {
  std::string found = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (found.size() > 40) found = found.substr(0, 37) + "...";
  fail(what, " must be an integer in ", lo, "..", hi, ", found ", found);
}

int64_t require_json_integer(const nlohmann::json& v, int64_t lo, int64_t hi, std::string_view what) {
  if (std::optional<int64_t> x = json_integer(v, lo, hi)) return *x;
  fail_json_integer(v, lo, hi, what);
}

}  // namespace fuselm
