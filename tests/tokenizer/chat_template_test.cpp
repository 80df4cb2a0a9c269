#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "test_util.h"

namespace fuselm {
namespace {

using Json = nlohmann::ordered_json;

std::string render(const std::string& source, const Json& context = Json::object()) {
  return ChatTemplate(source).render(context);
}

TEST(ChatTemplate, Llama3GoldenRenderedAndTokenizedExactly) {
  FUSELM_REQUIRE_MODEL("llama3-tokenizer/chat-golden.json");
  auto golden = Json::parse(read_text_file(test::model_path("llama3-tokenizer/chat-golden.json")));
  for (const char* source : {"llama3-tokenizer", "llama3-tokenizer/tokenizer.json"}) {
    auto tok = load_tokenizer(test::model_path(source));
    std::string prompt = apply_chat_template(*tok, golden["messages"], true);
    EXPECT_EQ(prompt, golden["rendered"].get<std::string>()) << source;
    EXPECT_EQ(tok->encode(prompt, false, true), golden["ids"].get<std::vector<int32_t>>()) << source;
  }
  // The tiktoken file has no template beside it in general, but this folder ships one.
  auto tiktoken = load_tokenizer(test::model_path("llama3-tokenizer/tokenizer.model"));
  std::string prompt = apply_chat_template(*tiktoken, golden["messages"], true);
  EXPECT_EQ(tiktoken->encode(prompt, false, true), golden["ids"].get<std::vector<int32_t>>());
}

TEST(ChatTemplate, WhitespaceControlAndHfBlockTrimming) {
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  // trim_blocks drops the newline after a tag; lstrip_blocks the indentation before one.
  EXPECT_EQ(render("{% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");
  EXPECT_EQ(render("line\n"), "line");  // one trailing newline is dropped, as Jinja does
  EXPECT_EQ(render("{# note #}\nz"), "z");
  EXPECT_EQ(render("q {%+ if true %}w{% endif %}"), "q w");
}

TEST(ChatTemplate, LoopsConditionsAndVariables) {
  Json ctx = {{"messages", Json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", "yo"}}})}};
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index }}:{{ m.role }}={{ m['content'] }}{% if not loop.last %},{% endif %}"
                   "{% endfor %}",
                   ctx),
            "1:user=hi,2:assistant=yo");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", ctx),
            "2");
  EXPECT_EQ(render("{% set x = 1 %}{% for m in messages %}{% set x = 5 %}{% endfor %}{{ x }}", ctx), "1");
  EXPECT_EQ(render("{% for m in messages if m.role == 'assistant' %}{{ m.content }}{{ loop.length }}{% endfor %}", ctx),
            "yo1");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "a1b2");
  EXPECT_EQ(render("{% for x in [] %}y{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% if a is defined %}d{% elif b is not defined %}nb{% else %}e{% endif %}"), "nb");
  EXPECT_EQ(render("{{ messages[0].content | upper ~ '!' }}", ctx), "HI!");
  EXPECT_EQ(render("{{ messages | length }} {{ 'abc'[1:] }} {{ [1,2,3][::-1] }}", ctx), "2 bc [3, 2, 1]");
  EXPECT_EQ(render("{{ '  pad ' | trim }}|{{ 'x' if false else 'y' }}|{{ 7 // 2 }} {{ 7 % 3 }} {{ 1 / 2 }}"),
            "pad|y|3 1 0.5");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 3 not in [1, 2] }} {{ none }} {{ true and 'v' }}"), "True True None v");
  EXPECT_EQ(render("{{ {'k': [1, 'two', none]} | tojson }}"), "{\"k\": [1, \"two\", null]}");
  EXPECT_EQ(render("{{ 'Hello World'.lower().startswith('hello') }} {{ ' s '.strip() }}{{ 'a,b'.split(',') | join('+') }}"),
            "True sa+b");
  EXPECT_EQ(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | first }}", ctx), "hi");
  EXPECT_EQ(render("{{ missing | default('dflt') }}{{ missing }}"), "dflt");
}

TEST(ChatTemplate, RaiseExceptionBecomesError) {
  try {
    render("{{ raise_exception('Conversation roles must alternate') }}");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Conversation roles must alternate"), std::string::npos);
  }
}

TEST(ChatTemplate, UnsupportedConstructsAreNamed) {
  auto expect_named = [](const std::string& source, const std::string& name) {
    try {
      ChatTemplate t(source);
      t.render(Json::object());
      ADD_FAILURE() << source;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  expect_named("{% macro m() %}x{% endmacro %}", "macro");
  expect_named("{{ x | wordcount }}", "wordcount");
  expect_named("{% if x %}never closed", "endif");
  expect_named("{{ 'abc' ", "unclosed");
  expect_named("{{ x is divisibleby(3) }}", "divisibleby");
}

// The template comes with the model's files: deep nesting, integer overflow and huge values must
// end in an Error, not a stack overflow, a SIGFPE or an exhausted memory.
TEST(ChatTemplate, HostileTemplatesAreErrors) {
  auto expect_error = [](const std::string& source, const std::string& needle) {
    try {
      ChatTemplate(source).render(Json::object());
      ADD_FAILURE() << source.substr(0, 80);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  expect_error("{{ " + repeat("(", 300) + "1" + repeat(")", 300) + " }}", "nested more than 64 levels");
  expect_error("{{ " + repeat("not ", 300) + "1 }}", "nested more than 64 levels");
  expect_error("{{ " + repeat("-", 300) + "1 }}", "nested more than 64 levels");
  expect_error("{{ " + repeat("[", 300) + repeat("]", 300) + " }}", "nested more than 64 levels");
  expect_error("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}", "more than the 1024 supported");
  expect_error("{{ 1" + repeat(" + 1", 100000) + " }}", "more than the 1024 supported");
  expect_error("{{ x" + repeat(".a", 100000) + " }}", "more than the 1024 supported");
  expect_error(repeat("{% if true %}", 100000) + "x" + repeat("{% endif %}", 100000), "blocks nested more than 64");
  EXPECT_EQ(render("{{ " + repeat("(", 60) + "1" + repeat(")", 60) + " }}"), "1");
  expect_error("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}",
               "nested more than");
  expect_error("{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow");
  expect_error("{{ (-9223372036854775807 - 1) % -1 }}", "integer overflow");
  expect_error("{{ 9223372036854775807 + 1 }}", "integer overflow");
  expect_error("{{ -(-9223372036854775807 - 1) }}", "integer overflow");
  expect_error("{{ 99999999999999999999 }}", "does not fit in 64 bits");
  expect_error("{{ range(1000000000000) | length }}", "range()");
  expect_error("{{ range(0, 9223372036854775807, 2) | length }}", "range()");
  expect_error("{{ 'ab' * 10000000000 }}", "repeating a 2-byte string 10000000000 times");
  expect_error("{{ ('a' * 10000000) ~ ('b' * 10000000) }}", "string of");
  expect_error("{{ 'a' | indent(-1) }}", "indent's width");
  expect_error("{{ 1 | tojson(indent=1000000000000) }}", "tojson's indent");
  expect_error("{{ (1.5 * 9223372036854775807) | int }}", "out of range");
  expect_error("{{ 'a' | abs }}", "chat template");
  expect_error("{{ range('a') }}", "range() argument");
  expect_error("{{ messages[] }}", "empty subscript");  // evaluated a null key
  EXPECT_EQ(render("{{ '\\uzz' }}|{{ '\\u00e9' }}"), "\\uzz|\xC3\xA9");  // a malformed escape stays as written
  EXPECT_EQ(render("{{ (-7) // 2 }} {{ (-7) % 2 }} {{ 7 % -2 }} {{ [1, 2, 3][1::9223372036854775807] }}"),
            "-4 1 -1 [2]");
  EXPECT_EQ(render("{{ range(9223372036854775805, 9223372036854775807) | list }}"),
            "[9223372036854775805, 9223372036854775806]");
  // A subscript from the context past 2^63 - 1 is out of range, not a wrapped negative index.
  EXPECT_EQ(render("[{{ [1, 2][i] }}|{{ 'ab'[i] }}|{{ [1, 2][j] }}]",
                   Json{{"i", uint64_t{18446744073709551615u}}, {"j", uint64_t{9223372036854775808u}}}),
            "[||]");
  EXPECT_EQ(render("{{ 'ab' * n }}|{{ 'x' * -2 }}|{{ n * 2 }}", Json{{"n", 3u}}), "ababab||6");  // JSON's 3 is unsigned
}

}  // namespace
}  // namespace fuselm

namespace fuselm {
namespace {

// A tool-calling template in the style of recent Llama releases (system-message extraction,
// tools as indented JSON, tool calls and tool results), written for this test.
const char* const kToolTemplate = R"JINJA({%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "1 Jan 2024" %}
    {%- endif %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- bos_token }}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none %}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("only single tool calls") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", "parameters": ' + tool_call.arguments | tojson + "}<|eot_id|>" }}
    {%- else %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)JINJA";

TEST(ChatTemplate, ToolCallingTemplate) {
  Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  Json messages = Json::parse(R"([
    {"role": "system", "content": " Be brief. "},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": {"temp_c": 21.5}}
  ])");
  Json ctx = {{"messages", messages}, {"tools", tools}, {"add_generation_prompt", true}, {"bos_token", "<|begin_of_text|>"},
              {"date_string", "2 Feb 2025"}};
  const std::string expected =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nToday Date: 2 Feb 2025\n\n"
      "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"parameters\": {\n"
      "            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n"
      "                    \"type\": \"string\"\n                }\n            },\n            \"required\": [\n"
      "                \"city\"\n            ]\n        }\n    }\n}\n\n"
      "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"
      "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n{\"temp_c\": 21.5}<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(render(kToolTemplate, ctx), expected);
  // Without a date, HF's strftime_now global supplies today's date (so the fallback is unused).
  Json no_date = ctx;
  no_date.erase("date_string");
  EXPECT_EQ(render(kToolTemplate, no_date).find("1 Jan 2024"), std::string::npos);
  Json two_calls = ctx;
  two_calls["messages"][2]["tool_calls"].push_back(two_calls["messages"][2]["tool_calls"][0]);
  EXPECT_THROW(render(kToolTemplate, two_calls), Error);
}

}  // namespace
}  // namespace fuselm
