#pragma once
// JSON parsing for model files, with errors that give the file, line and column.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fuselm {

// Deepest nesting of arrays and objects accepted in a JSON file. Real files nest a few levels;
// parsing is iterative, but copying, printing and comparing a parsed value recurse once per level,
// so a small file of "[[[[..." would otherwise overflow the stack.
constexpr int kMaxJsonDepth = 512;

// Throws Error naming `where` and the byte offset when `text` nests arrays/objects deeper than
// kMaxJsonDepth. Only brackets outside strings count; the text need not be valid JSON.
void check_json_depth(std::string_view text, const std::string& where);

// Parses `text` (the contents of `where`); throws Error with the line, column and byte offset of
// the first syntax error, or when it nests deeper than kMaxJsonDepth.
nlohmann::json parse_json_text(std::string_view text, const std::string& where);

// Integers of untrusted JSON. nlohmann's get<int>() is undefined for a float outside int's range
// (1e30) and wraps an integer outside it, so every integer field of a file is read through these.
// json_integer gives the value when `v` is an integer (not a float, a string, ...) in [lo, hi],
// else std::nullopt; it builds no message, for loops over many values.
std::optional<int64_t> json_integer(const nlohmann::json& v, int64_t lo, int64_t hi);

// As json_integer, but throws Error "<what> must be an integer in <lo>..<hi>, found <v>"; `what`
// names the file and the field.
int64_t require_json_integer(const nlohmann::json& v, int64_t lo, int64_t hi, std::string_view what);

// Throws require_json_integer's Error; for loops that test json_integer and build `what` only when
// it failed.
[[noreturn]] void fail_json_integer(const nlohmann::json& v, int64_t lo, int64_t hi, std::string_view what);

}  // namespace fuselm
