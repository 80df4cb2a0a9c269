// `fuselm bench` end to end through the CLI binary, on the CPU engine and a tiny synthetic model:
// every scenario at tiny sizes, --compare, --peak, and errors a user can act on.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "test_util.h"

namespace fuselm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kTinyModel = "'synthetic:llama?hidden=128&layers=2&heads=4&kv_heads=2&ffn=256&vocab=512'";

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// One OpenMP thread: these runs check the protocol, not speed, and spinning thread teams on a
// CI machine shared by parallel tests only make them slow.
CliResult run_cli(const std::string& args, const std::string& env = "") {
  const std::string cmd = "OMP_NUM_THREADS=1 " + env + " '" + test::cli_path() + "' " + args + " 2>&1";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing " << path;
  return json::parse(in);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fuselm_bench_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(BenchCli, AllScenariosOnATinySyntheticModel) {
  const fs::path json_file = dir_ / "result.json", md_file = dir_ / "result.md";
  const CliResult r = run_cli(std::string("bench -m ") + kTinyModel +
                                  " --device cpu --scenario all --prompt-len 16 --gen-len 8 --reps 2 --warmup 1"
                                  " --batches 1,2 --batch-prompt-len 8 --batch-gen-len 4 --prefill-lens 8,16"
                                  " --depths 0,16 --depth-gen-len 4 --stability-gen-len 12 --stability-batches 1,2"
                                  " --stability-steps 5 --peak-bytes 16M --peak-runs 3 -q"
                                  " --json " + json_file.string() + " --markdown " + md_file.string(),
                              "FUSELM_COMMIT=test-commit-1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"TTFT ms", "ITL p50 / p90 / p99 / max ms", "output tok/s", "TFLOP/s", "decode tok/s",
                           "stability: ITL of 12 tokens", "step, batch 2", "time, estimated / measured s"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;

  const json j = read_json(json_file);
  EXPECT_EQ(j["path"], "fused");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["environment"]["commit"], "test-commit-1");
  EXPECT_NE(j["environment"]["command_line"].get<std::string>().find("--scenario all"), std::string::npos);
  EXPECT_FALSE(j["environment"]["date"].get<std::string>().empty());
  EXPECT_EQ(j["model"]["hidden_size"], 128);
  EXPECT_GT(j["peak_bandwidth"]["read_gbs"].get<double>(), 0.0);

  const json& l = j["scenarios"]["latency"];
  EXPECT_GT(l["decode_tok_s"].get<double>(), 0.0);
  EXPECT_GT(l["ttft_ms"].get<double>(), 0.0);
  for (const char* p : {"p50", "p90", "p99", "max"}) EXPECT_GT(l["itl_ms"][p].get<double>(), 0.0) << p;
  for (const char* k : {"achieved_gbs", "peak_gbs", "utilization"}) EXPECT_GT(l["bandwidth"][k].get<double>(), 0.0) << k;
  ASSERT_EQ(l["samples"].size(), 2u);
  EXPECT_EQ(l["samples"][0]["itl_ms"].size(), 7u);

  ASSERT_EQ(j["scenarios"]["throughput"].size(), 2u);
  EXPECT_EQ(j["scenarios"]["throughput"][1]["batch"], 2);
  EXPECT_GT(j["scenarios"]["throughput"][1]["output_tok_s"].get<double>(), 0.0);
  ASSERT_EQ(j["scenarios"]["prefill"].size(), 2u);
  EXPECT_EQ(j["scenarios"]["prefill"][1]["tokens"], 16);
  EXPECT_GT(j["scenarios"]["prefill"][1]["tok_s"].get<double>(), 0.0);
  EXPECT_GT(j["scenarios"]["prefill"][1]["tflops"].get<double>(), 0.0);
  ASSERT_EQ(j["scenarios"]["depth"].size(), 2u);
  EXPECT_EQ(j["scenarios"]["depth"][1]["depth"], 16);
  EXPECT_GT(j["scenarios"]["depth"][1]["decode_tok_s"].get<double>(), 0.0);

  const json& st = j["scenarios"]["stability"];
  EXPECT_EQ(st["itl"]["gen_len"], 12);
  EXPECT_EQ(st["itl"]["prompt_len"], 16);  // the latency scenario's prompt
  EXPECT_EQ(st["itl"]["itl_ms"]["count"], 2 * 11);
  for (const char* p : {"p50", "p90", "p99", "max"}) EXPECT_GT(st["itl"]["itl_ms"][p].get<double>(), 0.0) << p;
  EXPECT_GE(st["itl"]["p99_over_p50"].get<double>(), 1.0);
  EXPECT_GE(st["itl"]["stddev_ms"].get<double>(), 0.0);
  ASSERT_EQ(st["steps"].size(), 2u);
  EXPECT_EQ(st["steps"][1]["batch"], 2);
  EXPECT_EQ(st["steps"][1]["prompt_len"], 8);  // the throughput scenario's prompt
  EXPECT_EQ(st["steps"][1]["steps"], 5);
  EXPECT_EQ(st["steps"][1]["step_ms"]["count"], 2 * 5);
  for (const char* k : {"p99_over_p50", "stddev_ms", "max_ms", "trend_ms_per_1k_steps", "detrended_stddev_ms"})
    EXPECT_TRUE(st["steps"][1][k].is_number()) << k;

  const json& timing = j["timing"];
  for (const char* s : {"latency", "throughput", "prefill", "depth", "stability"}) {
    EXPECT_GT(timing["scenarios"][s]["estimated_s"].get<double>(), 0.0) << s;
    EXPECT_GE(timing["scenarios"][s]["measured_s"].get<double>(), 0.0) << s;
  }
  EXPECT_GE(timing["wall_s"].get<double>(), timing["measured_s"].get<double>());
  EXPECT_GT(timing["calibration"]["decode_step_ms"].get<double>(), 0.0);
  EXPECT_EQ(j["options"]["stability_steps"], 5);

  const std::string md = read_text(md_file);
  for (const char* text :
       {"## fuselm bench", "### latency", "### throughput", "### prefill", "### depth", "### stability"})
    EXPECT_NE(md.find(text), std::string::npos) << text;
}

TEST_F(BenchCli, ServingOnATinySyntheticModel) {
  const fs::path json_file = dir_ / "serving.json", md_file = dir_ / "serving.md";
  const CliResult r = run_cli(std::string("bench -m ") + kTinyModel +
                              " --device cpu --scenario serving --num-prompts 6 --serving-input-len 24"
                              " --serving-output-len 5 --request-rate 100 --serving-max-batch 4 --max-prefill-tokens 32"
                              " --goodput ttft:60000,tpot:60000 --no-peak -q --json " + json_file.string() +
                              " --markdown " + md_file.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"serving: 6 requests of 24 prompt + 5 output tokens, arriving 100.00 req/s (Poisson)",
                           "request throughput req/s", "goodput req/s", "serving latency"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;

  const json j = read_json(json_file);
  EXPECT_EQ(j["options"]["scenarios"], json({"serving"}));
  EXPECT_EQ(j["options"]["num_prompts"], 6);
  EXPECT_DOUBLE_EQ(j["options"]["request_rate"].get<double>(), 100.0);
  const json& s = j["scenarios"]["serving"];
  for (const char* k : {"completed", "duration_s", "request_throughput", "output_throughput", "total_token_throughput",
                        "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "goodput", "samples", "scheduler", "steps"})
    EXPECT_TRUE(s.contains(k)) << k;
  EXPECT_EQ(s["completed"], 6);
  EXPECT_EQ(s["total_input_tokens"], 6 * 24);
  EXPECT_EQ(s["total_output_tokens"], 6 * 5);
  EXPECT_EQ(s["scheduler"]["max_sequences"], 4);
  EXPECT_EQ(s["scheduler"]["max_step_tokens"], 32);
  EXPECT_EQ(s["itl_ms"]["count"], 6 * 4);
  EXPECT_EQ(s["tpot_ms"]["count"], 6);
  const double duration = s["duration_s"].get<double>();
  EXPECT_GT(duration, 0.0);
  EXPECT_NEAR(s["request_throughput"].get<double>(), 6 / duration, 1e-9);
  EXPECT_NEAR(s["output_throughput"].get<double>(), 30 / duration, 1e-9);
  EXPECT_LE(s["goodput"]["requests_per_s"].get<double>(), s["request_throughput"].get<double>());
  EXPECT_EQ(s["goodput"]["good_requests"], 6);  // a minute per token: every request meets it
  EXPECT_LE(s["ttft_ms"]["max"].get<double>(), s["e2e_ms"]["max"].get<double>());
  ASSERT_EQ(s["samples"].size(), 6u);
  double previous_arrival = 0;
  for (const json& q : s["samples"]) {
    EXPECT_EQ(q["output_tokens"], 5);
    EXPECT_EQ(q["prompt_tokens"], 24);
    EXPECT_EQ(q["itl_ms"].size(), 4u);
    EXPECT_GT(q["ttft_ms"].get<double>(), 0.0);
    EXPECT_LE(q["ttft_ms"].get<double>(), q["e2e_ms"].get<double>());
    EXPECT_GE(q["arrival_s"].get<double>(), previous_arrival);
    EXPECT_LE(q["arrival_s"].get<double>() + q["e2e_ms"].get<double>() * 1e-3, duration + 1e-6);
    previous_arrival = q["arrival_s"].get<double>();
  }
  EXPECT_GT(j["timing"]["scenarios"]["serving"]["estimated_s"].get<double>(), 0.0);
  EXPECT_GT(j["timing"]["scenarios"]["serving"]["measured_s"].get<double>(), 0.0);
  EXPECT_NE(read_text(md_file).find("### serving latency"), std::string::npos);
}

TEST_F(BenchCli, CompareRunsBothPathsAlternately) {
  const fs::path json_file = dir_ / "compare.json";
  const CliResult r = run_cli(std::string("bench -m ") + kTinyModel +
                              " --device cpu --compare baseline,fused --scenario latency,depth,stability --prompt-len 8"
                              " --gen-len 4 --reps 2 --warmup 0 --depths 4 --depth-gen-len 2 --stability-gen-len 6"
                              " --stability-batches 2 --stability-steps 3 --batch-prompt-len 4 --no-peak -q --json " +
                              json_file.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("compare latency"), std::string::npos) << r.output;
  const json j = read_json(json_file);
  EXPECT_EQ(j["path"], "baseline,fused");
  for (const char* v : {"baseline", "fused"}) {
    EXPECT_GT(j["compare"][v]["scenarios"]["latency"]["decode_tok_s"].get<double>(), 0.0) << v;
    EXPECT_TRUE(j["compare"][v]["scenarios"]["latency"]["bandwidth"]["utilization"].is_null()) << "--no-peak";
    EXPECT_EQ(j["compare"][v]["scenarios"]["depth"][0]["depth"], 4) << v;
    EXPECT_EQ(j["compare"][v]["scenarios"]["stability"]["itl"]["itl_ms"]["count"], 2 * 5) << v;
    EXPECT_EQ(j["compare"][v]["path"], v);
  }
  EXPECT_EQ(j["compare"]["order"], json({"baseline", "fused"}));
  EXPECT_GT(j["compare"]["speedup"]["decode"].get<double>(), 0.0);
  EXPECT_EQ(j["compare"]["speedup"]["latency"]["decode_tok_s"]["pairs"].size(), 2u);
}

TEST_F(BenchCli, PeakAlone) {
  const fs::path json_file = dir_ / "peak.json";
  const CliResult r =
      run_cli("bench --peak --device cpu --peak-bytes 16M --peak-runs 3 --json " + json_file.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("peak memory bandwidth (cpu): read"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("copy"), std::string::npos) << r.output;
  const json j = read_json(json_file);
  EXPECT_GT(j["peak_bandwidth"]["read_gbs"].get<double>(), 0.0);
  EXPECT_EQ(j["peak_bandwidth"]["read_ms"].size(), 3u);
  EXPECT_TRUE(j.contains("environment"));
}

TEST_F(BenchCli, MistakesAreReportedWithTheFix) {
  CliResult r = run_cli(std::string("bench -m ") + kTinyModel + " --device cpu --scenario serve --no-peak");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("supported: latency, throughput, prefill, depth, stability, serving, all"),
            std::string::npos)
      << r.output;

  r = run_cli(std::string("bench -m ") + kTinyModel + " --device cpu --scenario serving --request-rate fast --no-peak");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--request-rate"), std::string::npos) << r.output;

  r = run_cli(std::string("bench -m ") + kTinyModel + " --device cpu --scenario serving --goodput ttft=5 --no-peak");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("NAME:MILLISECONDS"), std::string::npos) << r.output;

  r = run_cli("bench --device cpu --no-peak");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("needs a model"), std::string::npos) << r.output;

  r = run_cli(std::string("bench -m ") + kTinyModel + " --device cpu --compare fused,fused --no-peak");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("two different paths"), std::string::npos) << r.output;

  r = run_cli(std::string("bench -m ") + kTinyModel + " --device cpu --gen-len 1 --no-peak");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--gen-len"), std::string::npos) << r.output;

  r = run_cli(std::string("bench -m ") + kTinyModel +
              " --device cpu --scenario stability --stability-gen-len 1 --no-peak");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--stability-gen-len"), std::string::npos) << r.output;
}

// The estimate is printed before the scenarios start, and a budget it exceeds stops the run there.
TEST_F(BenchCli, TimeEstimateAndBudget) {
  CliResult r = run_cli(std::string("bench -m ") + kTinyModel +
                        " --device cpu --scenario latency --prompt-len 8 --gen-len 4 --reps 1 --no-peak");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("estimated time: latency"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("took: latency"), std::string::npos) << r.output;

  const fs::path json_file = dir_ / "never.json";
  r = run_cli(std::string("bench -m ") + kTinyModel + " --device cpu --scenario latency --prompt-len 8 --gen-len 4"
              " --reps 1 --no-peak -q --time-budget 0.000001 --json " + json_file.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("over --time-budget"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("HINT"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(json_file));
}

}  // namespace
}  // namespace fuselm
