// `fuselm plan` and `fuselm tune` through the CLI binary, on synthetic models and named GPUs, so they
// run on machines without a GPU (CI).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/loader.h"
#include "model/model_test_util.h"
#include "plan/plan.h"
#include "test_util.h"

namespace fuselm {
namespace {

using json = PlanJson;  // ordered, as plan_to_json writes it
using ::testing::HasSubstr;
using ::testing::Not;

const char* k8B = "synthetic:llama-3.1-8b?vocab=32000";
const char* k1B = "synthetic:llama-3.2-1b?vocab=32000";

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `fuselm args...` with stdout and stderr captured apart.
CliResult run_cli(const std::vector<std::string>& args) {
  const test::TempDir dir;
  std::string cmd = quote(test::cli_path());
  for (const std::string& a : args) {
    cmd += ' ';
    cmd += quote(a);
  }
  cmd += " >";
  cmd += quote(dir.file("out"));
  cmd += " 2>";
  cmd += quote(dir.file("err"));
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, test::read_bytes(dir.file("out")),
          test::read_bytes(dir.file("err"))};
}

bool gpu_here() {
  try {
    query_gpu_identity();
    return true;
  } catch (const Error&) {
    return false;
  }
}

TEST(PlanCli, PrintsTheRulePlanForANamedGpu) {
  const CliResult r = run_cli({"plan", "-m", k8B, "--gpu", "h200"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"));
  EXPECT_THAT(r.out, HasSubstr("hidden 4096, 32 layers, 32/8 heads x 128, ffn 14336, vocab 32000"));
  EXPECT_THAT(r.out, HasSubstr("one rounding class per op for every batch bucket"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("qkv +6144 x 4096 +2\\.9 +rt1_w4_k4_cta +rt1_w4 +k4 +fill +rule"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("gate_up +28672 x 4096 +13\\.6 +rt1_w7_k2_cta +rt1_w7_k2_cta +k2 +even +rule"));
  EXPECT_THAT(r.out, HasSubstr("decode attention: mma_c8_s16 kernel, split 256 tokens"));
  EXPECT_THAT(r.out, HasSubstr("from 16 sequences per launch each cluster's keys in one CTA"));
  EXPECT_THAT(r.out, HasSubstr("prefill attention: mma_r32_k32"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n +256 +16 +8 x 256 x 32\n"));  // the last decode bucket
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n +1024 +sm90_w128\n"));        // prefill buckets
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n +8192 +sm90_w256\n"));
  EXPECT_THAT(r.out, HasSubstr("why:"));
}

TEST(PlanCli, JsonIsTheRulePlan) {
  const CliResult r = run_cli({"plan", "-m", k1B, "--gpu", "h100", "--dtype", "fp16", "--max-batch", "64", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Plan from_cli = plan_from_json(json::parse(r.out), "stdout");
  const ModelConfig config = load_model(k1B, LoadOptions{.materialize_synthetic = false})->config;
  EXPECT_EQ(from_cli, make_rule_plan(config, DType::F16, gpu_preset("h100"), make_plan_limits(config, 64, 8192, 0)));
  EXPECT_EQ(from_cli.decode.buckets.back().batch, 64);
}

TEST(PlanCli, GpuDescribedByNumbers) {
  const CliResult r = run_cli({"plan", "-m", k8B, "--sm", "8.0", "--sm-count", "108", "--memory-gb", "80", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["gpu"]["name"], "sm_80 GPU");
  EXPECT_EQ(j["gpu"]["compute_capability"], "8.0");
  EXPECT_EQ(j["gpu"]["sm_count"], 108);
  EXPECT_EQ(j["gpu"]["memory_bytes"], uint64_t{80} << 30);

  const CliResult partial = run_cli({"plan", "-m", k8B, "--sm", "9.0"});
  EXPECT_EQ(partial.exit_code, 1);
  EXPECT_THAT(partial.err, HasSubstr("all of --sm, --sm-count and --memory-gb"));
  const CliResult unknown = run_cli({"plan", "-m", k8B, "--gpu", "h300"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("unknown GPU preset 'h300'"));
}

TEST(PlanCli, LoadsAndChecksAPlanFile) {
  const test::TempDir dir;
  const std::string path = dir.file("plan.json");
  const CliResult made = run_cli({"plan", "-m", k8B, "--gpu", "h200", "--json"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  test::write_bytes(path, made.out);

  const CliResult ok = run_cli({"plan", "-m", k8B, "--gpu", "h200", "--plan", path, "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(json::parse(ok.out), json::parse(made.out));

  const CliResult other_gpu = run_cli({"plan", "-m", k8B, "--gpu", "h100", "--plan", path});
  EXPECT_EQ(other_gpu.exit_code, 1);
  EXPECT_THAT(other_gpu.err, HasSubstr("made for NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB), this GPU is NVIDIA H100"));
  const CliResult other_model = run_cli({"plan", "-m", k1B, "--gpu", "h200", "--plan", path});
  EXPECT_EQ(other_model.exit_code, 1);
  EXPECT_THAT(other_model.err, HasSubstr("made for another model"));
  const CliResult other_dtype = run_cli({"plan", "-m", k8B, "--gpu", "h200", "--dtype", "fp16", "--plan", path});
  EXPECT_EQ(other_dtype.exit_code, 1);
  EXPECT_THAT(other_dtype.err, HasSubstr("made for bf16, the engine runs f16"));
  const CliResult bigger = run_cli({"plan", "-m", k8B, "--gpu", "h200", "--plan", path, "--max-batch", "512"});
  EXPECT_EQ(bigger.exit_code, 1);
  EXPECT_THAT(bigger.err, HasSubstr("--max-batch 512"));

  test::write_bytes(path, made.out.substr(0, made.out.size() / 3));
  const CliResult truncated = run_cli({"plan", "-m", k8B, "--gpu", "h200", "--plan", path});
  EXPECT_EQ(truncated.exit_code, 1);
  EXPECT_THAT(truncated.err, HasSubstr("ends early"));
}

TEST(PlanCli, RulesTable) {
  const CliResult r = run_cli({"plan", "--rules"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("qkv,o,gate_up,down,lm_head"));
  EXPECT_THAT(r.out, HasSubstr("rt1_w4_k8_cta"));
  EXPECT_THAT(r.out, HasSubstr("bench/results/h200-skinny-gemm-lab3.txt"));
}

TEST(PlanCli, NeedsAGpuOrANamedOne) {
  if (gpu_here()) GTEST_SKIP() << "a GPU is here: `fuselm plan` uses it";
  const CliResult r = run_cli({"plan", "-m", k8B});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--gpu PRESET (h200"));
  EXPECT_THAT(r.out, Not(HasSubstr("qkv")));
}

TEST(PlanCli, TuneFailsClearlyWithoutAGpu) {
  if (gpu_here()) GTEST_SKIP() << "a GPU is here: tuning runs in tests/gpu/plan_kernels_test.cu";
  const test::TempDir dir;
  const CliResult r = run_cli({"tune", "-m", k8B, "-o", dir.file("plan.json")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("fuselm tune times kernels on the GPU"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("plan.json")));
  const CliResult no_output = run_cli({"tune", "-m", k8B});
  EXPECT_EQ(no_output.exit_code, 2);  // usage error: -o is required
}

}  // namespace
}  // namespace fuselm
