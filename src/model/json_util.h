#pragma once
// JSON parsing for model files, with errors that give the file, line and column.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace fuselm {

// Parses `text` (the contents of `where`); throws Error with the line, column and byte offset of
// the first syntax error.
nlohmann::json parse_json_text(std::string_view text, const std::string& where);

}  // namespace fuselm
