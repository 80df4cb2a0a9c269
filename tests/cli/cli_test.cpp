// The fuselm command as a user runs it: output shapes and values against the goldens, error exits.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/golden.h"
#include "test_util.h"

namespace fuselm {
namespace {

using nlohmann::json;
using test::model_path;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `fuselm args...`, capturing stdout and stderr; with `address_space_kb`, under that limit
// (`ulimit -v`), where allocations beyond it fail.
RunResult run_cli(const std::vector<std::string>& args, long address_space_kb = 0) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const auto out_path = dir / ("fuselm_cli_" + tag + ".out");
  const auto err_path = dir / ("fuselm_cli_" + tag + ".err");
  std::string cmd = address_space_kb > 0 ? "ulimit -v " + std::to_string(address_space_kb) + " && " : "";
  cmd += shell_quote(test::cli_path());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(out_path.string()) + " 2>" + shell_quote(err_path.string());
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

json parse_stdout(const RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not one JSON object: " << e.what() << "\n" << r.out.substr(0, 500);
    return {};
  }
}

// Expects a failed run whose stderr mentions `needle`.
void expect_failure(const std::vector<std::string>& args, const std::string& needle) {
  const RunResult r = run_cli(args);
  EXPECT_NE(r.exit_code, 0) << "stdout: " << r.out;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr lacks '" << needle << "': " << r.err;
}

TEST(Cli, ForwardJsonMatchesTheGolden) {
  FUSELM_REQUIRE_MODEL("tiny-llama2/golden.json");
  const auto golden = test::read_golden("tiny-llama2");
  const test::GoldenCase& g = golden[0];
  const json j = parse_stdout(run_cli({"forward", "-m", model_path("tiny-llama2"), "--prompt-ids", join_ids(g.ids),
                                       "--bf16-rope-freqs", "--json"}));
  ASSERT_TRUE(j.contains("positions") && j.contains("last_logits")) << j.dump().substr(0, 300);
  ASSERT_EQ(j["positions"].size(), g.ids.size());
  for (size_t pos = 0; pos < g.ids.size(); ++pos) {
    const json& p = j["positions"][pos];
    const auto ids = p["top_ids"].get<std::vector<int32_t>>();
    const auto logits = p["top_logits"].get<std::vector<float>>();
    ASSERT_EQ(ids.size(), 5u);
    ASSERT_EQ(logits.size(), 5u);
    EXPECT_TRUE(std::is_sorted(logits.rbegin(), logits.rend())) << "position " << pos;
    // The CLI reports only its own top 5, so a golden id missing from them is looked up in the
    // golden instead (which only happens when it is tied with the one that replaced it).
    auto logit_of = [&](int32_t id) -> float {
      for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == id) return logits[i];
      for (size_t i = 0; i < 5; ++i)
        if (g.top5_ids[pos][i] == id) return g.top5_logits[pos][i];
      return NAN;
    };
    test::expect_position_matches(g, pos, ids, logit_of, p["logsumexp"].get<double>(), {});
  }
  const auto last = j["last_logits"].get<std::vector<float>>();
  ASSERT_EQ(last.size(), 32000u);
  EXPECT_LE(test::relative_l2(last, g.last_logits), 1e-3);
}

TEST(Cli, ForwardTopKAndTextOutput) {
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  const json j = parse_stdout(run_cli({"forward", "-m", model_path("tiny-llama2"), "--prompt-ids", "1,450",
                                       "--top-k", "3", "--json"}));
  ASSERT_EQ(j["positions"].size(), 2u);
  EXPECT_EQ(j["positions"][1]["top_ids"].size(), 3u);
  const RunResult text = run_cli({"forward", "-m", model_path("tiny-llama2"), "--prompt-ids", "1,450"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("pos 1"), std::string::npos) << text.out;
}

// The goldens need --bf16-rope-freqs: HF computed them with bf16-rounded RoPE frequencies.
TEST(Cli, GenerateGreedyJsonEqualsGreedy24) {
  FUSELM_REQUIRE_MODEL("tiny-llama2/golden.json");
  for (const test::GoldenCase& g : test::read_golden("tiny-llama2")) {
    const json j = parse_stdout(run_cli({"generate", "-m", model_path("tiny-llama2"), "--prompt-ids",
                                         join_ids(g.ids), "-n", "24", "--temperature", "0", "--bf16-rope-freqs",
                                         "--json"}));
    EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), g.ids);
    EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), g.greedy24) << "prompt '" << g.prompt << "'";
    EXPECT_TRUE(j["text"].is_string());
  }
}

TEST(Cli, GenerateTinyLlama3GreedyJsonEqualsGreedy24) {
  FUSELM_REQUIRE_MODEL("tiny-llama3/golden.json");
  const test::GoldenCase g = test::read_golden("tiny-llama3")[1];
  const json j = parse_stdout(run_cli({"generate", "-m", model_path("tiny-llama3"), "--prompt-ids", join_ids(g.ids),
                                       "-n", "24", "--temperature", "0", "--bf16-rope-freqs", "--json"}));
  EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), g.greedy24);
}

TEST(Cli, GenerateAidreamsFromBosStreamsTheReferenceText) {
  FUSELM_REQUIRE_MODEL("aidreams260K/aidreams260K.bin");
  const std::string model = model_path("aidreams260K/aidreams260K.bin");
  const std::string tokenizer = model_path("aidreams260K/tok512.bin");
  // SOURCES.md's reference text opens with a quotation mark.
  const std::string expected = "\"Echoes of vectors unfold, a gentle hum of precision";
  const json j = parse_stdout(run_cli({"generate", "-m", model, "--tokenizer", tokenizer, "--prompt-ids", "1", "-n",
                                       "32", "--temperature", "0", "--json"}));
  const std::vector<int32_t> reference = {319, 459, 355, 260, 275, 429, 339, 315, 374, 327, 446,
                                          262, 421, 392, 275, 280, 269, 440, 270, 283, 446, 299,
                                          303, 266, 358, 430, 312, 379, 441, 260, 446, 262};
  EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), reference);
  EXPECT_TRUE(j["text"].get<std::string>().starts_with(expected)) << j["text"];

  // Streaming text from -p "" (BOS only) prints the same words.
  const RunResult text = run_cli({"generate", "-m", model, "--tokenizer", tokenizer, "-p", "", "-n", "32",
                                  "--temperature", "0"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(text.out.starts_with(expected)) << text.out;
}

TEST(Cli, GenerateWithAMissingTokenizerFails) {
  FUSELM_REQUIRE_MODEL("tiny-llama2/golden.json");
  const test::GoldenCase g = test::read_golden("tiny-llama2")[1];
  expect_failure({"generate", "-m", model_path("tiny-llama2"), "--tokenizer", model_path("no-such-tokenizer"),
                  "--prompt-ids", join_ids(g.ids), "-n", "3"},
                 "no-such-tokenizer");
}

TEST(Cli, GenerateWithoutATokenizerPrintsIds) {
  const std::string model = "synthetic:llama?hidden=64&layers=2&heads=4&ffn=128&vocab=256&max_pos=64";
  const RunResult r = run_cli({"generate", "-m", model, "--prompt-ids", "1,2,3", "-n", "5", "--temperature", "0",
                               "--ignore-eos"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream words(r.out);
  std::vector<int32_t> ids;
  for (int32_t id; words >> id;) ids.push_back(id);
  EXPECT_EQ(ids.size(), 5u) << r.out;
  const json j = parse_stdout(run_cli({"generate", "-m", model, "--prompt-ids", "1,2,3", "-n", "5", "--temperature",
                                       "0", "--ignore-eos", "--json"}));
  EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(j["text"], "");
  expect_failure({"generate", "-m", model, "-p", "hello"}, "-p needs a tokenizer");
}

TEST(Cli, StreamedTextEqualsJsonText) {
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  const std::vector<std::string> args = {"generate", "-m", model_path("tiny-llama2"), "-p", "Once upon a time",
                                         "-n", "12", "--temperature", "0", "--ignore-eos"};
  const RunResult streamed = run_cli(args);
  EXPECT_EQ(streamed.exit_code, 0) << streamed.err;
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const json j = parse_stdout(run_cli(json_args));
  EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), (std::vector<int32_t>{1, 9038, 2501, 263, 931}));
  EXPECT_EQ(j["ids"].size(), 12u);
  EXPECT_FALSE(j["text"].get<std::string>().empty());
  EXPECT_EQ(streamed.out, j["text"].get<std::string>() + "\n");
  // --no-bos drops the BOS id.
  json_args.push_back("--no-bos");
  const json no_bos = parse_stdout(run_cli(json_args));
  EXPECT_EQ(no_bos["prompt_ids"].get<std::vector<int32_t>>(), (std::vector<int32_t>{9038, 2501, 263, 931}));
}

TEST(Cli, SameSeedSameIdsDifferentSeedDifferentIds) {
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  auto sample = [](const std::string& seed) {
    const json j = parse_stdout(run_cli({"generate", "-m", model_path("tiny-llama2"), "--prompt-ids", "1,450,7483",
                                         "-n", "16", "--temperature", "1.0", "--top-p", "0.95", "--seed", seed,
                                         "--json"}));
    return j["ids"].get<std::vector<int32_t>>();
  };
  const auto a = sample("7");
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, sample("7"));
  EXPECT_NE(a, sample("8"));
}

TEST(Cli, InspectJsonFields) {
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  const json j = parse_stdout(run_cli({"inspect", "-m", model_path("tiny-llama2"), "--json"}));
  EXPECT_EQ(j["format"], "hf");
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["hidden_size"], 128);
  EXPECT_EQ(j["num_layers"], 2);
  EXPECT_EQ(j["num_heads"], 2);
  EXPECT_EQ(j["num_kv_heads"], 1);
  EXPECT_EQ(j["head_dim"], 64);
  EXPECT_EQ(j["intermediate_size"], 384);
  EXPECT_EQ(j["vocab_size"], 32000);
  EXPECT_EQ(j["max_position_embeddings"], 2048);
  EXPECT_EQ(j["rope"]["theta"], 10000.0);
  EXPECT_EQ(j["rope"]["scaling"], "default");
  EXPECT_NEAR(j["rms_norm_eps"].get<double>(), 1e-5, 1e-12);
  EXPECT_EQ(j["tie_word_embeddings"], true);
  // embedding + 2 x (2 norms, q 128x128, k/v 64x128, o 128x128, gate/up/down 384x128) + final norm
  const int64_t params = 32000 * 128 + 2 * (2 * 128 + 2 * 128 * 128 + 2 * 64 * 128 + 3 * 384 * 128) + 128;
  EXPECT_EQ(j["parameter_count"], params);
  EXPECT_EQ(j["weight_bytes"], params * 4);
  EXPECT_EQ(j["dtypes"], json({{"f32", 20}}));
  ASSERT_TRUE(j["tokenizer"].contains("kind"));
  EXPECT_NE(j["tokenizer"]["kind"], "none");  // the checkpoint names its tokenizer folder
}

TEST(Cli, InspectLlama3RopeScaling) {
  FUSELM_REQUIRE_MODEL("tiny-llama3");
  const json j = parse_stdout(run_cli({"inspect", "-m", model_path("tiny-llama3"), "--json"}));
  EXPECT_EQ(j["rope"]["scaling"], "llama3");
  EXPECT_EQ(j["rope"]["factor"], 32.0);
  EXPECT_EQ(j["rope"]["theta"], 500000.0);
  EXPECT_EQ(j["dtypes"], json({{"bf16", 20}}));
}

TEST(Cli, InspectSyntheticEightBillionIsInstant) {
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_cli({"inspect", "-m", "synthetic:llama-3.1-8b", "--json"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const json j = parse_stdout(r);
  EXPECT_EQ(j["hidden_size"], 4096);
  EXPECT_EQ(j["num_layers"], 32);
  EXPECT_EQ(j["num_kv_heads"], 8);
  EXPECT_EQ(j["format"], "synthetic");
  EXPECT_GT(j["parameter_count"].get<int64_t>(), 8'000'000'000);
  EXPECT_EQ(j["tokenizer"]["kind"], "none");
  EXPECT_LT(seconds, 5.0) << "inspect must not generate the weights";
}

TEST(Cli, InspectTextOutput) {
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  const RunResult r = run_cli({"inspect", "-m", model_path("tiny-llama2")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hidden_size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer"), std::string::npos) << r.out;
}

TEST(Cli, BadInputFailsWithAMessage) {
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  const std::string m = model_path("tiny-llama2");
  expect_failure({"forward", "-m", model_path("no-such-model"), "--prompt-ids", "1,2", "--json"}, "no-such-model");
  expect_failure({"generate", "-m", model_path("no-such-model"), "--prompt-ids", "1,2"}, "no-such-model");
  expect_failure({"inspect", "-m", model_path("no-such-model")}, "no-such-model");
  expect_failure({"forward", "-m", m, "--prompt-ids", "1,x,3", "--json"}, "'x' is not a token id");
  expect_failure({"forward", "-m", m, "--prompt-ids", "1,,3", "--json"}, "empty item");
  expect_failure({"forward", "-m", m, "--prompt-ids", "", "--json"}, "--prompt-ids");
  expect_failure({"forward", "-m", m, "--prompt-ids", "1,32000", "--json"}, "token id 32000 at index 1");
  expect_failure({"generate", "-m", m, "--prompt-ids", "1,-5"}, "token id -5");
  expect_failure({"generate", "-m", m, "--prompt-ids", "1,2", "-n", "-1"}, "-n must be >= 0");
  expect_failure({"generate", "-m", m, "--prompt-ids", "1,2", "--device", "tpu"}, "unknown device 'tpu'");
  expect_failure({"generate", "-m", m, "--prompt-ids", "1,2", "--path", "fast"}, "unknown path 'fast'");
  expect_failure({"generate", "-m", m, "--prompt-ids", "1,2", "--top-p", "0"}, "--top-p");
  expect_failure({"generate", "-m", m, "--prompt-ids", "1,2", "--temperature", "-1"}, "--temperature");
  expect_failure({"generate", "-m", m}, "give a prompt");
  expect_failure({"generate", "-m", m, "-p", "hi", "--prompt-ids", "1"}, "excludes");
}

// std::bad_alloc reached the top level as "error: std::bad_alloc". Now the message says what ran out
// of memory and the exit status is 1, whether loading or running. The runs get 1.5 GB of address space.
TEST(Cli, OutOfMemoryIsAClearError) {
  constexpr long kAddressSpaceKb = 1500 * 1000;
  // The 8B shape's fp32 weights (32 GB) while loading.
  RunResult r = run_cli({"generate", "-m", "synthetic:llama-3.1-8b", "--prompt-ids", "1", "-n", "1"}, kAddressSpaceKb);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("error: out of memory while loading the model 'synthetic:llama-3.1-8b'"), std::string::npos)
      << r.err;
  // A small model's logits at 2,000 positions over a vocabulary of a million tokens (8 GB).
  const std::string small =
      "synthetic:llama?hidden=64&layers=1&heads=1&kv_heads=1&head_dim=64&ffn=64&vocab=1000000&tied=1";
  r = run_cli({"forward", "-m", small, "--prompt-ids", join_ids(std::vector<int32_t>(2000, 1)), "--json"},
              kAddressSpaceKb);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("error: out of memory in `fuselm forward`"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
}

TEST(Cli, PromptLongerThanTheContextIsAnError) {
  FUSELM_REQUIRE_MODEL("aidreams260K/aidreams260K.bin");
  const std::vector<int32_t> long_prompt(129, 5);  // the model's context is 128 tokens
  expect_failure({"forward", "-m", model_path("aidreams260K/aidreams260K.bin"), "--prompt-ids",
                  join_ids(long_prompt), "--json"},
                 "more than the model's context of 128");
  // Generation stops at the context instead of failing.
  const std::vector<int32_t> near_full(126, 5);
  const json j = parse_stdout(run_cli({"generate", "-m", model_path("aidreams260K/aidreams260K.bin"), "--prompt-ids",
                                       join_ids(near_full), "-n", "10", "--temperature", "0", "--ignore-eos",
                                       "--json"}));
  EXPECT_EQ(j["ids"].size(), 2u);
}

}  // namespace
}  // namespace fuselm
