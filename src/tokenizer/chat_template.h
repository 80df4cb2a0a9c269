#pragma once
// Chat templates: a small Jinja interpreter for the subset that model chat templates use, with
// the environment HF transformers renders them in (trim_blocks, lstrip_blocks, its tojson).
// Supported: {{ }}, {% if/elif/else %}, {% for %} (loop.*, unpacking, `if` filter, else),
// {% set %} (also namespace attributes), comments, whitespace control {%- -%}; expressions with
// literals, lists, dicts, attribute/subscript/slice access, + - * / // % ~, comparisons, and/or/not,
// in / not in, `is` tests, conditional expressions, common filters (trim, length, tojson, upper,
// lower, join, default, first, last, ...) and string/dict methods (strip, startswith, items, get,
// ...), raise_exception(), namespace(), range(). Anything else is an Error naming the construct.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace fuselm {

class ChatTemplate {
 public:
  // Parses `source`; throws Error naming the unsupported construct and its line.
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders with `context` as the global variables (messages, add_generation_prompt, bos_token,
  // ...). raise_exception() in the template becomes an Error carrying its message.
  std::string render(const nlohmann::ordered_json& context) const;

  struct Node;

 private:
  std::unique_ptr<Node> root_;
};

// Renders `tokenizer`'s chat template for `messages` (a JSON array of {role, content, ...}), with
// bos_token / eos_token taken from the tokenizer. `extra` adds variables (tools, ...). Throws Error
// when the tokenizer ships no chat template.
std::string apply_chat_template(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                                bool add_generation_prompt,
                                const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

}  // namespace fuselm
