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

}  // namespace
}  // namespace fuselm
