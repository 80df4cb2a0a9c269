// JSON, Markdown and table writers on hand-made results: the keys later tools read are present and
// the derived metrics follow from the raw samples.
#include "bench/report.h"

#include <gtest/gtest.h>

#include "bench/stats.h"
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fuselm::bench {
namespace {

using nlohmann::json;

ModelConfig small_config() {
  ModelConfig c;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.vocab_size = 256;
  c.max_position_embeddings = 1024;
  return c;
}

RunInfo run_info(bool with_gpu) {
  RunInfo info;
  info.environment.commit = "0123456789abcdef";
  info.environment.command_line = "fuselm bench -m synthetic:llama";
  info.environment.date_utc = "2026-01-02T03:04:05Z";
  info.environment.compiler = "gcc test";
  info.environment.optimized = true;
  info.environment.host_cpu = "test cpu";
  info.environment.host_threads = 2;
  if (with_gpu) {
    GpuInfo g;
    g.name = "Test GPU";
    g.sm_count = 132;
    g.sm_clock_max_mhz = 1980;
    g.memory_clock_max_mhz = 2619;
    g.sm_clock_mhz = 1755;
    g.memory_clock_mhz = -1;  // NVML unavailable: reported as null
    g.memory_bus_width_bits = 6144;
    g.cuda_driver_version = 13000;
    g.cuda_runtime_version = 13000;
    g.driver_version = "580.00";
    info.environment.gpu = g;
  }
  BandwidthPeak peak;
  peak.device = with_gpu ? "cuda" : "cpu";
  peak.read_method = "test read";
  peak.read_bytes = 1000000000;
  peak.read_ms = {1.0, 1.0, 1.0};
  peak.read_gbs = 1000.0;
  peak.copy_method = "test copy";
  peak.copy_bytes = 2000000000;
  peak.copy_ms = {2.5};
  peak.copy_gbs = 800.0;
  if (with_gpu) {
    peak.copy_kernel_method = "test copy kernel";
    peak.copy_kernel_ms = {2.6};
    peak.copy_kernel_gbs = 780.0;
  }
  info.peak = peak;
  info.model_spec = "synthetic:llama?hidden=64";
  info.model_format = "synthetic";
  info.config = small_config();
  info.device = with_gpu ? "cuda" : "cpu";
  info.dtype = "bf16";
  info.scenarios = {Scenario::Latency, Scenario::Throughput, Scenario::Prefill, Scenario::Depth, Scenario::Stability};
  RunTiming timing;
  timing.calibration = {256, 10.0, 256, 2.0};
  timing.estimated = {{Scenario::Latency, 1.5}, {Scenario::Stability, 2.0}};
  timing.measured = {{Scenario::Latency, 1.75}, {Scenario::Stability, 2.25}};
  timing.wall_s = 5.0;
  info.timing = timing;
  return info;
}

// Every time scaled by `slow`, so a second variant is a known factor faster or slower.
VariantResults results(double slow) {
  VariantResults r;
  r.latency = LatencyResult{8, 4, {}};
  r.latency->reps.push_back({10.0 * slow, 16.0 * slow, {2.0 * slow, 2.0 * slow, 2.0 * slow}});
  r.latency->reps.push_back({12.0 * slow, 21.0 * slow, {3.0 * slow, 3.0 * slow, 3.0 * slow}});
  r.latency->reps.push_back({11.0 * slow, 23.0 * slow, {4.0 * slow, 4.0 * slow, 4.0 * slow}});
  for (int batch : {1, 4}) {
    ThroughputResult t{batch, 8, 3, {}};
    t.reps.push_back({100.0 * slow, 40.0 * slow, {30.0 * slow, 30.0 * slow}});
    t.reps.push_back({120.0 * slow, 40.0 * slow, {40.0 * slow, 40.0 * slow}});
    r.throughput.push_back(t);
  }
  r.prefill.push_back(PrefillResult{16, {4.0 * slow, 2.0 * slow, 3.0 * slow}});
  r.depth.push_back(DepthResult{0, 2, {{{1.0 * slow, 1.0 * slow}}, {{3.0 * slow, 1.0 * slow}}}});
  r.depth.push_back(DepthResult{32, 2, {{{2.0 * slow, 2.0 * slow}}, {{2.0 * slow, 2.0 * slow}}}});
  StabilityResult st;
  st.itl = LatencyResult{8, 5, {}};
  st.itl.reps.push_back({5.0 * slow, 15.0 * slow, {1.0 * slow, 2.0 * slow, 3.0 * slow, 4.0 * slow}});
  st.itl.reps.push_back({5.0 * slow, 13.0 * slow, {2.0 * slow, 2.0 * slow, 2.0 * slow, 2.0 * slow}});
  ThroughputResult steps{2, 8, 4, {}};  // 3 timed steps per rep
  steps.reps.push_back({10.0 * slow, 4.0 * slow, {1.0 * slow, 1.0 * slow, 4.0 * slow}});
  steps.reps.push_back({10.0 * slow, 4.0 * slow, {2.0 * slow, 2.0 * slow, 2.0 * slow}});
  st.steps.push_back(steps);
  r.stability = st;
  return r;
}

CostModel cost() { return make_cost_model(small_config(), DType::BF16, DType::BF16, DType::BF16); }

TEST(Report, SingleVariantJsonHasTheKeysAndDerivedMetrics) {
  const RunInfo info = run_info(true);
  const std::vector<VariantReport> variants = {{"fused", "test engine", cost(), results(1.0)}};
  const json j = report_json(info, variants);

  EXPECT_EQ(j["schema"], kReportSchema);
  EXPECT_EQ(j["path"], "fused");
  EXPECT_EQ(j["environment"]["commit"], "0123456789abcdef");
  EXPECT_EQ(j["environment"]["gpu"]["name"], "Test GPU");
  EXPECT_EQ(j["environment"]["gpu"]["sm_count"], 132);
  EXPECT_EQ(j["environment"]["gpu"]["sm_clock_mhz"], 1755);
  EXPECT_TRUE(j["environment"]["gpu"]["memory_clock_mhz"].is_null());
  for (const char* key : {"sm_clock_max_mhz", "memory_clock_max_mhz", "driver_version", "cuda_runtime_version"})
    EXPECT_TRUE(j["environment"]["gpu"].contains(key)) << key;
  for (const char* key : {"command_line", "date"}) EXPECT_TRUE(j["environment"].contains(key)) << key;
  EXPECT_EQ(j["model"]["spec"], "synthetic:llama?hidden=64");
  EXPECT_EQ(j["model"]["kv_bytes_per_token"], 2 * 2 * 2 * 16 * 2);
  EXPECT_DOUBLE_EQ(j["peak_bandwidth"]["read_gbs"].get<double>(), 1000.0);

  const json& l = j["scenarios"]["latency"];
  // TPOT per rep 2, 3, 4 ms -> decode 500, 333.3, 250 tok/s; medians over reps.
  EXPECT_DOUBLE_EQ(l["ttft_ms"].get<double>(), 11.0);
  EXPECT_DOUBLE_EQ(l["tpot_ms"].get<double>(), 3.0);
  EXPECT_NEAR(l["decode_tok_s"].get<double>(), 1000.0 / 3.0, 1e-9);
  EXPECT_DOUBLE_EQ(l["e2e_ms"].get<double>(), 21.0);
  // ITL pooled: 2,2,2,3,3,3,4,4,4 -> p50 3, p90 h = 7.2 -> 4, max 4.
  EXPECT_DOUBLE_EQ(l["itl_ms"]["p50"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(l["itl_ms"]["p90"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(l["itl_ms"]["p99"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(l["itl_ms"]["max"].get<double>(), 4.0);
  EXPECT_NEAR(l["jitter"]["p99_over_p50"].get<double>(), 4.0 / 3.0, 1e-12);
  ASSERT_EQ(l["samples"].size(), 3u);
  EXPECT_EQ(l["samples"][0]["itl_ms"].size(), 3u);
  // Bandwidth: the bytes of decode steps at cached lengths 8, 9, 10, three reps, over 27 ms.
  const CostModel c = cost();
  const double bytes = 3.0 * static_cast<double>(decode_step_bytes(c, 1, 8).total() + decode_step_bytes(c, 1, 9).total() +
                                                 decode_step_bytes(c, 1, 10).total());
  const json& bw = l["bandwidth"];
  EXPECT_NEAR(bw["achieved_gbs"].get<double>(), bytes / 27e-3 / 1e9, 1e-9);
  EXPECT_DOUBLE_EQ(bw["peak_gbs"].get<double>(), 1000.0);
  EXPECT_NEAR(bw["utilization"].get<double>(), bytes / 27e-3 / 1e9 / 1000.0, 1e-12);

  const json& t = j["scenarios"]["throughput"];
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1]["batch"], 4);
  // Output tok/s per rep: 4 * 3 / 0.1 s = 120 and 4 * 3 / 0.12 s = 100; median 110.
  EXPECT_DOUBLE_EQ(t[1]["output_tok_s"].get<double>(), 110.0);
  // Total: 4 * (8 + 3) / wall -> 440 and 366.67; median 403.33.
  EXPECT_NEAR(t[1]["total_tok_s"].get<double>(), (440.0 + 4.0 * 11.0 / 0.12) / 2.0, 1e-9);
  EXPECT_DOUBLE_EQ(t[1]["step_ms_median"].get<double>(), 35.0);

  const json& p = j["scenarios"]["prefill"];
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]["tokens"], 16);
  EXPECT_DOUBLE_EQ(p[0]["tok_s"].get<double>(), 16.0 / 3e-3);
  EXPECT_NEAR(p[0]["tflops"].get<double>(), prefill_flops(c, 0, 16) / 3e-3 / 1e12, 1e-15);

  const json& d = j["scenarios"]["depth"];
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1]["depth"], 32);
  EXPECT_DOUBLE_EQ(d[1]["decode_tok_s"].get<double>(), 500.0);
  // Depth 0: reps of 2 ms and 4 ms for 2 tokens -> 1000 and 500 tok/s, median 750.
  EXPECT_DOUBLE_EQ(d[0]["decode_tok_s"].get<double>(), 750.0);
  EXPECT_FALSE(j.contains("compare"));

  // Copy kernel next to cudaMemcpy: 780 / 800 GB/s.
  EXPECT_DOUBLE_EQ(j["peak_bandwidth"]["copy_kernel_gbs"].get<double>(), 780.0);
  EXPECT_DOUBLE_EQ(j["peak_bandwidth"]["copy_gbs"].get<double>(), 800.0);
  EXPECT_NEAR(j["peak_bandwidth"]["copy_kernel_vs_memcpy"].get<double>(), 0.975, 1e-12);
  EXPECT_EQ(j["peak_bandwidth"]["copy_kernel_method"], "test copy kernel");

  const json& timing = j["timing"];
  EXPECT_DOUBLE_EQ(timing["scenarios"]["latency"]["estimated_s"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(timing["scenarios"]["stability"]["measured_s"].get<double>(), 2.25);
  EXPECT_DOUBLE_EQ(timing["estimated_s"].get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(timing["measured_s"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(timing["wall_s"].get<double>(), 5.0);
  EXPECT_TRUE(timing["budget_s"].is_null());
  EXPECT_EQ(timing["calibration"]["prefill_tokens"], 256);
  EXPECT_DOUBLE_EQ(timing["calibration"]["decode_step_ms"].get<double>(), 2.0);
  EXPECT_EQ(j["options"]["stability_batches"], json({16, 64}));
}

TEST(Report, StabilityJsonFollowsFromTheSamples) {
  const RunInfo info = run_info(false);
  const std::vector<VariantReport> variants = {{"baseline", "e", cost(), results(1.0)}};
  const json st = report_json(info, variants)["scenarios"]["stability"];

  // ITL reps 1,2,3,4 and 2,2,2,2 pooled: sorted 1,2,2,2,2,2,3,4.
  const json& itl = st["itl"];
  EXPECT_EQ(itl["batch"], 1);
  EXPECT_EQ(itl["prompt_len"], 8);
  EXPECT_EQ(itl["gen_len"], 5);
  EXPECT_EQ(itl["reps"], 2);
  EXPECT_EQ(itl["itl_ms"]["count"], 8);
  EXPECT_DOUBLE_EQ(itl["itl_ms"]["p50"].get<double>(), 2.0);         // h = 3.5
  EXPECT_NEAR(itl["itl_ms"]["p99"].get<double>(), 3.93, 1e-12);      // h = 6.93
  EXPECT_DOUBLE_EQ(itl["itl_ms"]["max"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(itl["max_ms"].get<double>(), 4.0);
  EXPECT_NEAR(itl["p99_over_p50"].get<double>(), 3.93 / 2.0, 1e-12);
  EXPECT_NEAR(itl["stddev_ms"].get<double>(), std::sqrt(5.5 / 7.0), 1e-12);  // mean 2.25
  // Slopes 1 and 0 per step: median 0.5, i.e. 500 ms per 1000 steps; both reps lie on their lines.
  EXPECT_NEAR(itl["trend_ms_per_1k_steps"].get<double>(), 500.0, 1e-9);
  EXPECT_NEAR(itl["detrended_stddev_ms"].get<double>(), 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(itl["decode_tok_s"].get<double>(), 450.0);  // 4 tokens in 10 ms and in 8 ms
  ASSERT_EQ(itl["samples"].size(), 2u);
  EXPECT_EQ(itl["samples"][0]["itl_ms"].size(), 4u);

  // Steps at batch 2: reps 1,1,4 and 2,2,2. Rep 1's line: slope 1.5, residuals 0.5, -1, 0.5.
  ASSERT_EQ(st["steps"].size(), 1u);
  const json& b = st["steps"][0];
  EXPECT_EQ(b["batch"], 2);
  EXPECT_EQ(b["prompt_len"], 8);
  EXPECT_EQ(b["steps"], 3);
  EXPECT_EQ(b["reps"], 2);
  EXPECT_DOUBLE_EQ(b["step_ms"]["p50"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(b["step_ms"]["max"].get<double>(), 4.0);
  EXPECT_NEAR(b["trend_ms_per_1k_steps"].get<double>(), 750.0, 1e-9);
  EXPECT_NEAR(b["detrended_stddev_ms"].get<double>(), std::sqrt(1.5 / 5.0), 1e-12);
  EXPECT_DOUBLE_EQ(b["decode_tok_s"].get<double>(), 1000.0);  // 2 x 3 tokens in 6 ms
  ASSERT_EQ(b["samples"].size(), 2u);
  EXPECT_EQ(b["samples"][1]["step_ms"].size(), 3u);

  // A CPU peak has no copy kernel.
  const json j = report_json(info, variants);
  EXPECT_TRUE(j["peak_bandwidth"]["copy_kernel_gbs"].is_null());
  EXPECT_TRUE(j["peak_bandwidth"]["copy_kernel_vs_memcpy"].is_null());
}

TEST(Report, ServingMetricsFollowVllmDefinitions) {
  ServingResult r;
  r.request_rate = INFINITY;
  r.num_prompts = 3;
  r.input_len = 10;
  r.output_len = 3;
  r.duration_s = 2.0;
  r.steps = 7;
  r.goodput_ttft_ms = 250;
  r.goodput_tpot_ms = 30;
  r.requests = {{10, 3, 0.0, 100.0, 140.0, {15.0, 25.0}},  // TPOT 20: meets both SLOs
                {10, 3, 0.0, 300.0, 400.0, {50.0, 50.0}},  // TPOT 50, TTFT over: not good
                {10, 1, 0.0, 200.0, 200.0, {}}};           // one token: no TPOT; good
  VariantResults v;
  v.serving = r;
  const std::vector<VariantReport> variants = {{"fused", "e", cost(), v}};
  RunInfo info = run_info(false);
  info.options.request_rate = INFINITY;
  info.scenarios = {Scenario::Serving};
  const json j = report_json(info, variants);
  EXPECT_EQ(j["options"]["request_rate"], "inf");
  const json& s = j["scenarios"]["serving"];
  EXPECT_EQ(s["request_rate"], "inf");
  EXPECT_EQ(s["completed"], 3);
  EXPECT_EQ(s["total_input_tokens"], 30);
  EXPECT_EQ(s["total_output_tokens"], 7);
  EXPECT_DOUBLE_EQ(s["request_throughput"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(s["output_throughput"].get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(s["total_token_throughput"].get<double>(), 18.5);
  EXPECT_EQ(s["tpot_ms"]["count"], 2);  // requests with more than one token
  EXPECT_DOUBLE_EQ(s["tpot_ms"]["mean"].get<double>(), 35.0);
  EXPECT_EQ(s["itl_ms"]["count"], 4);  // every gap
  EXPECT_DOUBLE_EQ(s["itl_ms"]["p50"].get<double>(), 37.5);
  EXPECT_DOUBLE_EQ(s["ttft_ms"]["p50"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(s["ttft_ms"]["mean"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(s["e2e_ms"]["p50"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(s["e2e_ms"]["p99"].get<double>(), 200.0 + 0.98 * 200.0);  // h = 1.98
  EXPECT_EQ(s["goodput"]["good_requests"], 2);
  EXPECT_DOUBLE_EQ(s["goodput"]["requests_per_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["goodput"]["slo"]["tpot_ms"].get<double>(), 30.0);
  EXPECT_TRUE(s["goodput"]["slo"]["e2el_ms"].is_null());
  ASSERT_EQ(s["samples"].size(), 3u);
  EXPECT_DOUBLE_EQ(s["samples"][0]["tpot_ms"].get<double>(), 20.0);
  EXPECT_TRUE(s["samples"][2]["tpot_ms"].is_null());
  EXPECT_EQ(s["samples"][1]["itl_ms"].size(), 2u);

  const std::string table = render_table(j), md = render_markdown(j);
  for (const char* text : {"serving: 3 requests of 10 prompt + 3 output tokens, arriving all at once",
                           "goodput req/s (ttft_ms <= 250.0, tpot_ms <= 30.0)", "serving latency", "TPOT"}) {
    EXPECT_NE(table.find(text), std::string::npos) << text << "\n" << table;
    EXPECT_NE(md.find(text), std::string::npos) << text << "\n" << md;
  }

  // Without SLOs goodput is null and its row is left out.
  v.serving->goodput_ttft_ms = v.serving->goodput_tpot_ms = 0;
  const std::vector<VariantReport> no_slo = {{"fused", "e", cost(), v}};
  const json k = report_json(info, no_slo);
  EXPECT_TRUE(k["scenarios"]["serving"]["goodput"].is_null());
  EXPECT_EQ(render_table(k).find("goodput"), std::string::npos);
}

TEST(Report, CompareHoldsBothVariantsAndPairSpeedups) {
  const RunInfo info = run_info(false);
  const std::vector<VariantReport> variants = {{"baseline", "engine a", cost(), results(2.0)},
                                               {"fused", "engine b", cost(), results(1.0)}};
  const json j = report_json(info, variants);
  EXPECT_EQ(j["path"], "baseline,fused");
  EXPECT_TRUE(j["environment"]["gpu"].is_null());
  ASSERT_TRUE(j.contains("compare"));
  const json& c = j["compare"];
  for (const char* name : {"baseline", "fused"}) {
    ASSERT_TRUE(c.contains(name)) << name;
    EXPECT_EQ(c[name]["path"], name);
    EXPECT_TRUE(c[name]["scenarios"]["latency"].contains("decode_tok_s"));
    EXPECT_TRUE(c[name]["scenarios"]["latency"]["itl_ms"].contains("p99"));
    EXPECT_TRUE(c[name]["scenarios"]["throughput"][0].contains("output_tok_s"));
    EXPECT_TRUE(c[name]["scenarios"]["prefill"][0].contains("tflops"));
    EXPECT_TRUE(c[name]["scenarios"]["depth"][0].contains("decode_tok_s"));
  }
  // Every time halves, so every pair is 2x, and so is their median.
  EXPECT_DOUBLE_EQ(c["speedup"]["decode"].get<double>(), 2.0);
  ASSERT_EQ(c["speedup"]["latency"]["decode_tok_s"]["pairs"].size(), 3u);
  EXPECT_DOUBLE_EQ(c["speedup"]["latency"]["ttft_ms"]["speedup"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(c["speedup"]["throughput"][1]["speedup"].get<double>(), 2.0);
  EXPECT_EQ(c["speedup"]["throughput"][1]["batch"], 4);
  EXPECT_DOUBLE_EQ(c["speedup"]["prefill"][0]["speedup"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(c["speedup"]["depth"][0]["speedup"].get<double>(), 2.0);
  // The top level carries the second variant's numbers.
  EXPECT_EQ(j["scenarios"], c["fused"]["scenarios"]);
}

TEST(Report, PairsAreMatchedRepByRep) {
  // Rep speeds that differ per rep: pair ratios 1.5, 2 and 3 give a median of 2, while the ratio of
  // the medians would be something else.
  const json a = {{"path", "baseline"},
                  {"scenarios", {{"latency", {{"samples", {{{"decode_tok_s", 100.0}, {"ttft_ms", 1.0}, {"e2e_ms", 1.0}},
                                                            {{"decode_tok_s", 50.0}, {"ttft_ms", 1.0}, {"e2e_ms", 1.0}},
                                                            {{"decode_tok_s", 80.0}, {"ttft_ms", 1.0}, {"e2e_ms", 1.0}}}}}}}}};
  const json b = {{"path", "fused"},
                  {"scenarios", {{"latency", {{"samples", {{{"decode_tok_s", 150.0}, {"ttft_ms", 1.0}, {"e2e_ms", 1.0}},
                                                            {{"decode_tok_s", 100.0}, {"ttft_ms", 1.0}, {"e2e_ms", 1.0}},
                                                            {{"decode_tok_s", 240.0}, {"ttft_ms", 1.0}, {"e2e_ms", 1.0}}}}}}}}};
  const json c = compare_json(a, b);
  EXPECT_DOUBLE_EQ(c["speedup"]["decode"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(c["speedup"]["latency"]["decode_tok_s"]["pairs"][2]["speedup"].get<double>(), 3.0);
}

TEST(Report, UtilizationIsNullWithoutAPeak) {
  RunInfo info = run_info(false);
  info.peak.reset();
  const std::vector<VariantReport> variants = {{"baseline", "e", cost(), results(1.0)}};
  const json j = report_json(info, variants);
  EXPECT_TRUE(j["peak_bandwidth"].is_null());
  EXPECT_TRUE(j["scenarios"]["latency"]["bandwidth"]["utilization"].is_null());
  EXPECT_GT(j["scenarios"]["latency"]["bandwidth"]["achieved_gbs"].get<double>(), 0.0);
  EXPECT_NE(render_table(j).find("not measured"), std::string::npos);
}

TEST(Report, TableAndMarkdownShowEveryScenario) {
  const RunInfo info = run_info(true);
  const std::vector<VariantReport> one = {{"fused", "test engine", cost(), results(1.0)}};
  const json j = report_json(info, one);
  const std::string table = render_table(j);
  for (const char* text : {"TTFT ms", "ITL p50 / p90 / p99 / max ms", "decode tok/s", "output tok/s", "TFLOP/s",
                           "depth", "Test GPU", "peak memory bandwidth", "0123456789abcdef", "copy kernel 780.0 GB/s",
                           "0.975 x", "stability: ITL of 5 tokens at batch 1", "step, batch 2", "p99/p50",
                           "trend ms/1k steps", "time, estimated / measured s: latency 1.5 / 1.8"})
    EXPECT_NE(table.find(text), std::string::npos) << text << "\n" << table;
  const std::string md = render_markdown(j);
  for (const char* text : {"## fuselm bench", "### latency", "### throughput", "### prefill", "### depth",
                           "### stability", "| ITL, batch 1 | 8 |", "| batch | output tok/s |", "| --- |"})
    EXPECT_NE(md.find(text), std::string::npos) << text;

  const std::vector<VariantReport> two = {{"baseline", "a", cost(), results(2.0)}, {"fused", "b", cost(), results(1.0)}};
  const json jc = report_json(info, two);
  const std::string ct = render_table(jc);
  for (const char* text : {"[baseline]", "[fused]", "compare latency", "2.000x", "compare throughput",
                           "stability [baseline]", "stability [fused]"})
    EXPECT_NE(ct.find(text), std::string::npos) << text;
  EXPECT_NE(render_markdown(jc).find("### compare latency"), std::string::npos);
}

TEST(Report, EnvironmentCommitHonoursTheOverride) {
  setenv("FUSELM_COMMIT", "override-123", 1);
  EXPECT_EQ(build_commit(), "override-123");
  unsetenv("FUSELM_COMMIT");
  EXPECT_FALSE(build_commit().empty());
  const Environment env = collect_environment(false);
  EXPECT_FALSE(env.command_line.empty());
  EXPECT_EQ(env.date_utc.size(), 20u);  // 2026-01-02T03:04:05Z
  EXPECT_FALSE(env.gpu.has_value());
}

// bench/plot.sh renders every plot from a result file (single run and --compare); needs gnuplot.
TEST(Report, PlotScriptRendersEveryPlot) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot not installed (gnuplot-nox)";
  namespace fs = std::filesystem;
  // __FILE__ may be relative to the build directory (ccache's base_dir rewrites it so), where the
  // compiler ran and the fuselm binary lies, not to wherever ctest runs this.
  fs::path source = __FILE__;
  if (source.is_relative()) source = fs::path(test::cli_path()).parent_path() / source;
  const fs::path plot = source.parent_path().parent_path().parent_path() / "bench" / "plot.sh";
  ASSERT_TRUE(fs::exists(plot)) << plot;
  const fs::path dir = fs::temp_directory_path() / ("fuselm_plot_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  RunInfo info = run_info(true);
  info.scenarios.push_back(Scenario::Serving);
  info.options.request_rate = 4.0;
  std::vector<VariantReport> one = {{"fused", "e", cost(), results(1.0)}};
  std::vector<VariantReport> two = {{"baseline", "a", cost(), results(2.0)}, {"fused", "b", cost(), results(1.0)}};
  for (auto* variants : {&one, &two})
    for (VariantReport& v : *variants) {
      ServingResult r;
      r.request_rate = 4.0;
      r.num_prompts = 2;
      r.input_len = 10;
      r.output_len = 3;
      r.duration_s = 1.0;
      r.steps = 5;
      r.requests = {{10, 3, 0.0, 100.0, 140.0, {15.0, 25.0}}, {10, 3, 0.25, 120.0, 170.0, {20.0, 30.0}}};
      v.results.serving = r;
    }
  for (const auto* variants : {&one, &two}) {
    const fs::path json_file = dir / "result.json", out = dir / (variants->size() == 1 ? "one" : "two");
    std::ofstream(json_file) << report_json(info, *variants).dump(2);
    const std::string cmd = plot.string() + " " + json_file.string() + " " + out.string() + " >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    for (const char* png :
         {"itl.png", "itl_cdf.png", "throughput.png", "prefill.png", "depth.png", "stability.png", "serving.png"})
      EXPECT_GT(fs::file_size(out / png), 1000u) << out / png;
  }
  fs::remove_all(dir);
}

// bench/repeatability.py passes two runs within 3% on latency decode tok/s and fails two 10% apart.
TEST(Report, RepeatabilityScriptHoldsRunsToThreePercent) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
  namespace fs = std::filesystem;
  fs::path source = __FILE__;
  if (source.is_relative()) source = fs::path(test::cli_path()).parent_path() / source;
  const fs::path script = source.parent_path().parent_path().parent_path() / "bench" / "repeatability.py";
  ASSERT_TRUE(fs::exists(script)) << script;
  const fs::path dir = fs::temp_directory_path() / ("fuselm_repeat_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const RunInfo info = run_info(true);
  auto write = [&](const char* name, double slow) {
    const std::vector<VariantReport> v = {{"baseline", "e", cost(), results(slow)}};
    std::ofstream(dir / name) << report_json(info, v).dump(2);
    return (dir / name).string();
  };
  const std::string a = write("a.json", 1.0), b = write("b.json", 1.02), c = write("c.json", 1.1);
  auto run = [&](const std::string& x, const std::string& y) {
    const int status = std::system(("python3 " + script.string() + " " + x + " " + y + " >/dev/null").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run(a, b), 0);
  EXPECT_EQ(run(a, c), 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fuselm::bench
