// The run-time estimate: its arithmetic on hand-made calibrations, a calibration on the CPU engine,
// and the default sweep of both synthetic shapes planned from the H200 baseline measurements
// committed in bench/results (the estimates bench/README.md quotes).
#include "bench/estimate.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/report.h"
#include "core/error.h"
#include "model/synthetic.h"
#include "runtime/cpu_engine.h"
#include "runtime/tiny_model.h"

namespace fuselm::bench {
namespace {

// The shape the benchmark runs for `spec`, kept in bf16 as on the GPU.
CostModel bf16(const std::string& spec) {
  return make_cost_model(parse_synthetic_spec(spec).config, DType::BF16, DType::BF16, DType::BF16);
}

TEST(Estimate, DecodeStepsScaleWithTheirBytesOrFlops) {
  const CostModel m = bf16("synthetic:llama-3.1-8b?vocab=32000");
  Calibration cal;
  cal.prefill_tokens = 512;
  cal.prefill_ms = 12.0;
  cal.decode_cached = 512;
  cal.decode_step_ms = 5.0;
  // The calibration step itself comes back.
  EXPECT_NEAR(estimate_step_ms(m, cal, 1, 512), 5.0, 1e-9);
  // Batch 1 deeper in the cache: more KV bytes at the same bandwidth.
  const double ratio = static_cast<double>(decode_step_bytes(m, 1, 4096).total()) /
                       static_cast<double>(decode_step_bytes(m, 1, 512).total());
  EXPECT_NEAR(estimate_step_ms(m, cal, 1, 4096), 5.0 * ratio, 1e-9);
  // Every step is the slower of its bytes at the calibration bandwidth and its FLOPs at the prefill
  // rate. A batch of 256 fresh sequences is bound by FLOPs (256 tokens of matmuls), a long cache
  // at batch 1 by bytes.
  const double flops_per_ms =
      (prefill_flops(m, 0, 512) + (kAttentionFlopWeight - 1) * attention_flops(m, 0, 512)) / 12.0;
  const double bytes_per_ms = static_cast<double>(decode_step_bytes(m, 1, 512).total()) / 5.0;
  auto by_flops = [&](int batch, int64_t cached) {
    return batch * (prefill_flops(m, cached, 1) + (kAttentionFlopWeight - 1) * attention_flops(m, cached, 1)) /
           flops_per_ms;
  };
  auto by_bytes = [&](int batch, int64_t cached) {
    return static_cast<double>(decode_step_bytes(m, batch, cached).total()) / bytes_per_ms;
  };
  EXPECT_GT(by_flops(256, 0), by_bytes(256, 0));
  EXPECT_NEAR(estimate_step_ms(m, cal, 256, 0), by_flops(256, 0), 1e-9);
  EXPECT_GT(by_bytes(1, 32768), by_flops(1, 32768));
  EXPECT_NEAR(estimate_step_ms(m, cal, 1, 32768), by_bytes(1, 32768), 1e-9);
  EXPECT_NEAR(estimate_step_ms(m, cal, 64, 2048), std::max(by_flops(64, 2048), by_bytes(64, 2048)), 1e-9);
  // Prefill: the calibration prompt itself comes back; attention weighs kAttentionFlopWeight times.
  EXPECT_NEAR(estimate_prefill_ms(m, cal, 0, 512), 12.0, 1e-9);
  EXPECT_DOUBLE_EQ(estimate_prefill_ms(m, cal, 0, 0), 0.0);
  EXPECT_GT(estimate_prefill_ms(m, cal, 0, 32768), 64 * 12.0);  // superlinear: the causal attention
}

TEST(Estimate, ScenariosCountEveryRunOnEveryEngine) {
  const CostModel m = bf16("synthetic:llama?hidden=256&layers=2&heads=4&kv_heads=2&ffn=512&vocab=512");
  Calibration cal{64, 2.0, 64, 1.0};
  BenchOptions o;
  o.warmup = 1;
  o.reps = 3;
  o.prefill_lens = {64};
  const Scenario prefill[] = {Scenario::Prefill};
  const auto one = estimate_seconds(prefill, o, m, cal, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].scenario, Scenario::Prefill);
  EXPECT_NEAR(one[0].seconds, 4 * 2.0e-3, 1e-12);  // (1 + 3) runs of the 2 ms calibration prompt
  EXPECT_NEAR(estimate_seconds(prefill, o, m, cal, 2)[0].seconds, 2 * 4 * 2.0e-3, 1e-12);

  o.prompt_len = 64;
  o.gen_len = 3;
  const Scenario latency[] = {Scenario::Latency};
  // Prompt, then 2 decode steps at 64 and 65 cached tokens.
  const double expected = 4 * (2.0 + estimate_step_ms(m, cal, 1, 64) + estimate_step_ms(m, cal, 1, 65)) * 1e-3;
  EXPECT_NEAR(estimate_seconds(latency, o, m, cal, 1)[0].seconds, expected, 1e-12);

  const std::vector<Scenario> all = parse_scenarios("all");
  EXPECT_EQ(estimate_seconds(all, o, m, cal, 1).size(), all.size());
}

TEST(Estimate, ServingIsTheLongerOfItsArrivalsAndItsWork) {
  const CostModel m = bf16("synthetic:llama?hidden=256&layers=2&heads=4&kv_heads=2&ffn=512&vocab=512");
  Calibration cal{64, 2.0, 64, 1.0};
  BenchOptions o;
  o.warmup = 0;
  o.reps = 5;  // serving runs once whatever --reps says
  o.num_prompts = 8;
  o.serving_input_len = 64;
  o.serving_output_len = 3;
  o.serving_max_batch = 4;
  const Scenario serving[] = {Scenario::Serving};
  // Slow arrivals: 8 requests at 0.5/s take 16 s, then the last one's prompt and 2 steps.
  o.request_rate = 0.5;
  const double last_ms = 2.0 + estimate_step_ms(m, cal, 1, 64) + estimate_step_ms(m, cal, 1, 65);
  EXPECT_NEAR(estimate_seconds(serving, o, m, cal, 1)[0].seconds, 16.0 + last_ms * 1e-3, 1e-9);
  // All at once: the work, 8 prompts and 2 waves of 4 requests decoding 2 steps.
  o.request_rate = INFINITY;
  const double work_ms = 8 * 2.0 + 2 * (estimate_step_ms(m, cal, 4, 64) + estimate_step_ms(m, cal, 4, 65));
  EXPECT_NEAR(estimate_seconds(serving, o, m, cal, 1)[0].seconds, work_ms * 1e-3, 1e-12);
  EXPECT_NEAR(estimate_seconds(serving, o, m, cal, 2)[0].seconds, 2 * work_ms * 1e-3, 1e-12);
}

TEST(Estimate, CalibratesOnTheCpuEngine) {
  omp_set_num_threads(1);
  ModelConfig c = test::tiny_config();
  c.max_position_embeddings = 64;
  auto model = test::tiny_model(c, DType::BF16);
  EngineOptions eo;
  eo.max_seq_len = kCalibrationMinSeqLen;
  eo.max_batch = 1;
  auto engine = make_cpu_engine(*model, eo);
  const Calibration cal = calibrate(*engine, kCalibrationMinSeqLen, 8, 1);
  EXPECT_EQ(cal.prefill_tokens, kCalibrationMinSeqLen - kCalibrationSteps - 1);
  EXPECT_EQ(cal.decode_cached, cal.prefill_tokens);
  EXPECT_GT(cal.prefill_ms, 0.0);
  EXPECT_GT(cal.decode_step_ms, 0.0);
  EXPECT_THROW(calibrate(*engine, kCalibrationMinSeqLen - 1, 8, 1), Error);
}

// The default `fuselm bench --scenario all` of both synthetic shapes, planned from the H200
// baseline results (bench/results/h200-*.json: a 512-token prompt and the batch-1 TPOT). This
// checks the plan, not the machine: the GPU run records the measured times next to these.
TEST(Estimate, DefaultSweepOfBothShapesFitsFiveMinutesOnTheH200Baseline) {
  struct Shape {
    const char* spec;
    Calibration cal;  // prefill 512 tokens: ms; TPOT after a 512-token prompt: ms
  };
  const Shape shapes[] = {
      {"synthetic:llama-3.1-8b?vocab=32000", {512, 12.668, 512, 5.178}},
      {"synthetic:llama-3.2-1b?vocab=32000", {512, 2.708, 512, 1.512}},
  };
  const BenchOptions defaults;
  const std::vector<Scenario> all = parse_scenarios("all");
  for (const Shape& s : shapes) {
    const auto est = estimate_seconds(all, defaults, bf16(s.spec), s.cal, 1);
    double total = 0;
    for (const auto& e : est) total += e.seconds;
    std::printf("%s: %s\n", s.spec, render_seconds(est).c_str());
    EXPECT_LT(total, 300.0) << s.spec;
  }
}

}  // namespace
}  // namespace fuselm::bench
