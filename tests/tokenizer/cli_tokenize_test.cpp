// The fuselm tokenize / chat-template commands, run as a user would.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace fuselm {
namespace {

struct Result {
  int status;
  std::string out;
};

Result run(const std::string& args) {
  std::string cmd = test::cli_path() + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  Result r{-1, {}};
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string quoted(const std::string& path) { return "'" + path + "'"; }

TEST(CliTokenize, EncodesDecodesAndReportsJson) {
  FUSELM_REQUIRE_MODEL("llama3-tokenizer/tokenizer.model");
  const std::string m = quoted(test::model_path("llama3-tokenizer/tokenizer.model"));
  EXPECT_EQ(run("tokenize -m " + m + " --text 'Hello world'").out, "128000,9906,1917\n");
  EXPECT_EQ(run("tokenize -m " + m + " --text 'Hello world' --no-bos --json").out, "{\"ids\":[9906,1917]}\n");
  EXPECT_EQ(run("tokenize -m " + m + " --text '<|eot_id|>' --no-bos --parse-special").out, "128009\n");
  EXPECT_EQ(run("tokenize -m " + m + " --decode 9906,1917").out, "Hello world\n");
  Result bad = run("tokenize -m " + m + " --decode 1,x");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("not an integer"), std::string::npos) << bad.out;
}

TEST(CliTokenize, AcceptsEveryKindOfPath) {
  FUSELM_REQUIRE_MODEL("tiny-llama2-gguf/tiny-llama2-q8_0.gguf");
  for (const char* rel : {"tiny-llama2", "llama2-tokenizer", "llama2-tokenizer/tokenizer.bin",
                          "tiny-llama2-gguf/tiny-llama2-q8_0.gguf"})
    EXPECT_EQ(run("tokenize -m " + quoted(test::model_path(rel)) + " --text 'Hello world'").out, "1,15043,3186\n") << rel;
  EXPECT_EQ(run("tokenize -m " + quoted(test::model_path("aidreams260K")) + " --decode 1,319,459").out, "\"E\n");
  Result missing = run("tokenize -m " + quoted(test::model_path("does-not-exist")) + " --text x");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("does not exist"), std::string::npos);
}

TEST(CliChatTemplate, RendersTheGoldenConversation) {
  FUSELM_REQUIRE_MODEL("llama3-tokenizer/chat-golden.json");
  const std::string m = quoted(test::model_path("llama3-tokenizer"));
  const std::string messages = quoted(test::model_path("llama3-tokenizer/chat-golden.json"));
  Result r = run("chat-template -m " + m + " --messages " + messages + " --add-generation-prompt");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nSay hi.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  Result ids = run("chat-template -m " + m + " --messages " + messages + " --add-generation-prompt --ids");
  EXPECT_EQ(ids.out.substr(0, 26), "{\"ids\":[128000,128006,9125");
}

// Copying the parsed messages recursed once per level of "[[[[...": a small file crashed the process.
TEST(CliChatTemplate, DeeplyNestedMessagesAreAnError) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "deep_messages";
  std::filesystem::create_directories(dir);
  std::string tokenizer;  // a llama2.c tokenizer.bin of three tokens, with a chat template beside it
  auto put = [&](const void* p, size_t n) { tokenizer.append(static_cast<const char*>(p), n); };
  const int32_t max_len = 5;
  put(&max_len, 4);
  for (std::string piece : {"<unk>", "<s>", "</s>"}) {
    const float score = 0;
    const int32_t len = static_cast<int32_t>(piece.size());
    put(&score, 4);
    put(&len, 4);
    put(piece.data(), piece.size());
  }
  std::ofstream(dir / "tokenizer.bin", std::ios::binary) << tokenizer;
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "{{ messages }}"})";
  std::ofstream(dir / "ok.json") << R"([{"role": "user", "content": "hi"}])";
  std::ofstream(dir / "deep.json") << std::string(100000, '[') + std::string(100000, ']');
  Result ok = run("chat-template -m " + quoted(dir.string()) + " --messages " + quoted((dir / "ok.json").string()));
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_EQ(ok.out, "[{'role': 'user', 'content': 'hi'}]");
  Result deep = run("chat-template -m " + quoted(dir.string()) + " --messages " + quoted((dir / "deep.json").string()));
  EXPECT_EQ(deep.status, 1);
  EXPECT_NE(deep.out.find("nested more than 512 levels deep"), std::string::npos) << deep.out;
}

TEST(CliTokenize, BenchmarkRuns) {
  FUSELM_REQUIRE_MODEL("llama3-tokenizer/tokenizer.model");
  Result r = run("tokenize -m " + quoted(test::model_path("llama3-tokenizer/tokenizer.model")) + " --benchmark 20KB --json");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\"bytes\":20000"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace fuselm
