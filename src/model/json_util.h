#pragma once
// JSON parsing for model files, with errors that give the file, line and column.
#include <nlohmann/json.hpp>

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

}  // namespace fuselm
