// The plan on the CPU: what the rules choose for known shapes and GPUs, the batch invariance of
// the decode choices, JSON round trips, refusals of plans made for something else, and clear
// errors (never crashes) for broken plan files.
#include "plan/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "core/error.h"
#include "model/loader.h"
#include "model/model_test_util.h"
#include "plan/tune.h"

namespace fuselm {
namespace {

using json = PlanJson;  // ordered, as plan_to_json writes it
using test::expect_error;
using ::testing::HasSubstr;
using ::testing::Not;

ModelConfig config_of(const std::string& spec) {
  return load_model(spec, LoadOptions{.materialize_synthetic = false})->config;
}

const ModelConfig& llama_8b() {
  static const ModelConfig c = config_of("synthetic:llama-3.1-8b");
  return c;
}
const ModelConfig& llama_1b() {
  static const ModelConfig c = config_of("synthetic:llama-3.2-1b");
  return c;
}

PlanLimits default_limits(const ModelConfig& c) { return make_plan_limits(c, 256, 8192, 0); }

Plan rule_plan(const ModelConfig& c, const std::string& gpu = "h200", DType dtype = DType::BF16) {
  return make_rule_plan(c, dtype, gpu_preset(gpu), default_limits(c));
}

std::map<std::string, std::string> variants(const Plan& p) {
  std::map<std::string, std::string> out;
  for (const DecodeGemmChoice& c : p.decode.gemm) out[std::string(plan_op_name(c.op))] = c.variant;
  return out;
}
// The ops whose grids are spread evenly, for 2+ tokens ("op") and for one ("op:1").
std::string balanced(const Plan& p) {
  std::string out;
  for (const DecodeGemmChoice& c : p.decode.gemm) {
    const std::string op(plan_op_name(c.op));
    if (c.balance_sms) out += (out.empty() ? "" : " ") + op;
    if (c.single_token_balance_sms) out += (out.empty() ? "" : " ") + op + ":1";
  }
  return out;
}
std::map<std::string, std::string> single_token_variants(const Plan& p) {
  std::map<std::string, std::string> out;
  for (const DecodeGemmChoice& c : p.decode.gemm) out[std::string(plan_op_name(c.op))] = c.single_token_variant;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Rules

TEST(PlanRules, Llama8BOnHopper) {
  for (const char* gpu : {"h200", "h100"}) {
    SCOPED_TRACE(gpu);
    const Plan p = rule_plan(llama_8b(), gpu);
    // Measured on H200: the CTA pipeline, K split across a cluster until >= 2.5 CTAs per SM (qkv 2.9
    // row tiles per SM: 4; o and down 1.9: 8); gate_up 13.6: 2, with 7 one-tile warps; the LM head,
    // 128256 rows: 2, with 8 one-tile warps.
    const std::map<std::string, std::string> want = {{"qkv", "rt1_w4_k4_cta"},
                                                     {"o", "rt1_w4_k8_cta"},
                                                     {"gate_up", "rt1_w7_k2_cta"},
                                                     {"down", "rt1_w4_k8_cta"},
                                                     {"lm_head", "rt1_w8_k2_cta"}};
    EXPECT_EQ(variants(p), want);
    // One token: the warp-pipeline twins of qkv/o/down's k4/k8 variants; gate_up and the LM head
    // run their own variant (in tile groups, which the twins cannot read).
    std::map<std::string, std::string> want_one = {{"qkv", "rt1_w4"},
                                                   {"o", "rt1_w8"},
                                                   {"gate_up", "rt1_w7_k2_cta"},
                                                   {"down", "rt1_w8"},
                                                   {"lm_head", "rt1_w8_k2_cta"}};
    EXPECT_EQ(single_token_variants(p), want_one);
    // Grids spread evenly over the SMs: gate_up and the LM head at every batch, o and down from 2 tokens.
    EXPECT_EQ(balanced(p), "o gate_up gate_up:1 down lm_head lm_head:1");
    EXPECT_EQ(p.decode_gemm(PlanOp::Qkv).rows, 6144);
    EXPECT_EQ(p.decode_gemm(PlanOp::Qkv).cols, 4096);
    EXPECT_EQ(p.decode_gemm(PlanOp::GateUp).rows, 28672);
    EXPECT_EQ(p.decode_gemm(PlanOp::Down).cols, 14336);
    // head_dim 128 on Hopper: clusters of 8, each cluster's work in one CTA from 16 sequences
    EXPECT_EQ(p.decode.attention.kernel, "mma_c8_s16");
    EXPECT_EQ(p.decode.attention.split_tokens, 256);
    EXPECT_EQ(p.decode.attention.max_splits_per_seq, 32);  // 8192 / 256
    EXPECT_EQ(p.prefill.attention_kernel, "mma_r32_k32");
    EXPECT_EQ(p.kv_block_size, 16);
    EXPECT_EQ(p.prefill.gemm_workspace_bytes, uint64_t{32} << 20);
    EXPECT_EQ(p.made_by, "rules");
    for (const DecodeGemmChoice& c : p.decode.gemm) {
      EXPECT_EQ(c.origin.source, "rule");
      EXPECT_THAT(c.origin.reason, HasSubstr("H200"));  // the measured rows, not the carried-over ones
    }
  }
}

TEST(PlanRules, Llama1BOnHopper) {
  const Plan p = rule_plan(llama_1b());
  // gate_up 16384 rows = 7.8 row tiles per SM on 132 SMs: a split of 2; qkv 1.5, o and down 1.0: 8.
  const std::map<std::string, std::string> want = {{"qkv", "rt1_w4_k8_cta"},
                                                   {"o", "rt1_w4_k8_cta"},
                                                   {"gate_up", "rt1_w4_k2_cta"},
                                                   {"down", "rt1_w4_k8_cta"},
                                                   {"lm_head", "rt1_w8_k2_cta"}};
  EXPECT_EQ(variants(p), want);
  EXPECT_EQ(single_token_variants(p).at("qkv"), "rt1_w8");
  EXPECT_EQ(balanced(p), "qkv o gate_up gate_up:1 down lm_head lm_head:1");
  EXPECT_EQ(p.decode_gemm(PlanOp::Qkv).rows, 3072);
  EXPECT_EQ(p.prefill.attention_kernel, "mma_r32_k64");  // head_dim 64
  // head_dim 64 on Hopper: clusters below 16 sequences (batch 1 +3%), stacked ranks from 16 (batch 16 -3%
  // against one CTA per split, which the rules trade for batch-1 latency)
  EXPECT_EQ(p.decode.attention.kernel, "mma_c8_s16");
}

TEST(PlanRules, AmpereGetsKnownVariantsCarriedOver) {
  const Plan p = rule_plan(llama_8b(), "a100");
  EXPECT_EQ(p.gpu.sm(), 80);
  const auto names = skinny_gemm_variant_names();
  for (const DecodeGemmChoice& c : p.decode.gemm) {
    EXPECT_NE(std::find(names.begin(), names.end(), c.variant), names.end()) << c.variant;
    EXPECT_THAT(c.origin.reason, HasSubstr("not measured"));
  }
  // Row tiles per SM scale with the SM count: 1792 / 108 = 16.6 for gate_up, 384 / 108 = 3.6 for qkv.
  EXPECT_EQ(p.decode_gemm(PlanOp::GateUp).variant, "rt4_w8");
  EXPECT_EQ(p.decode_gemm(PlanOp::Qkv).variant, "rt2_w8");
  EXPECT_EQ(p.decode.attention.split_tokens % p.kv_block_size, 0);
}

TEST(PlanRules, TableIsKeyedByShapeBucket) {
  const GpuIdentity h200 = gpu_preset("h200");
  EXPECT_EQ(find_plan_rule(PlanOp::GateUp, DType::BF16, 13.6, h200).choice, "rt1_w7_k2_cta");
  EXPECT_EQ(find_plan_rule(PlanOp::LmHead, DType::BF16, 60.7, h200).choice, "rt1_w8_k2_cta");
  EXPECT_EQ(find_plan_rule(PlanOp::GateUp, DType::BF16, 13.6, h200).single_token, "");  // the same for one token
  EXPECT_EQ(find_plan_rule(PlanOp::Qkv, DType::BF16, 2.9, h200).single_token, "rt1_w4");
  EXPECT_EQ(find_plan_rule(PlanOp::GateUp, DType::BF16, 7.8, h200).choice, "rt1_w4_k2_cta");
  EXPECT_EQ(find_plan_rule(PlanOp::GateUp, DType::BF16, 2.9, h200).choice, "rt1_w4_k4_cta");
  EXPECT_EQ(find_plan_rule(PlanOp::O, DType::F16, 1.9, h200).choice, "rt1_w4_k8_cta");
  EXPECT_EQ(find_plan_rule(PlanOp::PrefillAttention, DType::BF16, 96, h200).choice, "generic");
  EXPECT_DOUBLE_EQ(rule_shape_measure(PlanOp::GateUp, plan_model(llama_8b()), h200), 1792.0 / 132);
}

TEST(PlanRules, EveryRuleChoiceIsAName) {
  auto known = [](std::span<const std::string_view> names, std::string_view n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  for (const PlanRule& r : plan_rules()) {
    SCOPED_TRACE(std::string(r.choice));
    EXPECT_FALSE(r.evidence.empty());
    for (int i = 0; i < kPlanOpCount; ++i) {
      if ((r.ops & (1u << i)) == 0) continue;
      switch (static_cast<PlanOp>(i)) {
        case PlanOp::DecodeAttention: EXPECT_TRUE(known(decode_attention_kernel_names(), r.choice)); break;
        case PlanOp::PrefillAttention: EXPECT_TRUE(known(prefill_attention_kernel_names(), r.choice)); break;
        case PlanOp::PrefillGemm: EXPECT_TRUE(known(prefill_gemm_path_names(), r.choice)); break;
        case PlanOp::DecodeSplit:
        case PlanOp::KvBlock: EXPECT_GT(std::atoi(std::string(r.choice).c_str()), 0); break;
        default: EXPECT_TRUE(known(skinny_gemm_variant_names(), r.choice));
      }
    }
  }
}

// One token may run another variant than more tokens only within one rounding class.
TEST(PlanRules, SingleTokenVariantsRoundLikeTheirChoice) {
  int rows_with_one = 0;
  for (const PlanRule& r : plan_rules()) {
    if (r.single_token.empty()) continue;
    ++rows_with_one;
    EXPECT_EQ(skinny_rounding_class(r.single_token), skinny_rounding_class(r.choice)) << r.choice;
  }
  EXPECT_GT(rows_with_one, 0);
  for (const char* gpu : {"h200", "a100", "l40s"})
    for (const DecodeGemmChoice& c : rule_plan(llama_8b(), gpu).decode.gemm)
      EXPECT_EQ(skinny_rounding_class(c.single_token_variant), skinny_rounding_class(c.variant)) << gpu;
}

TEST(PlanRules, RoundingClassesFollowTheKSplit) {
  // The CTA pipeline: the cluster's K split, whatever the row tiles and warps.
  EXPECT_EQ(skinny_rounding_class("rt1_w4_cta"), "k1");
  EXPECT_EQ(skinny_rounding_class("rt1_w8_k2_cta"), "k2");
  EXPECT_EQ(skinny_rounding_class("rt2_w4_k2_cta"), "k2");
  EXPECT_EQ(skinny_rounding_class("rt4_w4_k8_cta"), "k8");
  // The warp pipeline without a cluster split: its warps take the pieces a cluster of that size would.
  EXPECT_EQ(skinny_rounding_class("rt1_w4"), "k4");
  EXPECT_EQ(skinny_rounding_class("rt4_w8"), "k8");
  // ... and with one, the sums of each CTA's warps: a class of its own.
  EXPECT_EQ(skinny_rounding_class("rt2_w4_k2"), "k2x4");
  EXPECT_EQ(skinny_rounding_class("rt1_w8_k8"), "k8x8");
  for (std::string_view name : skinny_gemm_variant_names()) EXPECT_FALSE(skinny_rounding_class(name).empty());
  expect_error([] { skinny_rounding_class("rt9_w9"); }, {"'rt9_w9' is not a decode GEMM variant"});
}

// `fuselm tune`'s choice from timings: per rounding class the fastest one-token variant and the
// variant with the least total over the buckets of more, the class with the least total winning.
GemmTiming timing(const std::string& variant, std::vector<double> us) {
  GemmTiming t{variant, std::move(us), 0.0};
  // Buckets 1, 2, 4, 8, 16 are one launch each at m = batch; 32 ... 256 are 2 ... 16 launches at m = 16.
  for (size_t i = 0; i < t.us.size(); ++i) t.total_us += t.us[i];
  t.total_us += 30 * t.us.back();
  return t;
}
const std::vector<int> kMeasuredM = {1, 2, 4, 8, 16};

TEST(PlanTunePick, PairsTheFastestOneTokenVariantWithTheBestOfItsClass) {
  const std::vector<GemmTiming> timings = {
      timing("rt1_w4_cta", {10, 11, 12, 13, 14}),         // k1: 480 in all
      timing("rt2_w4_k2_cta", {12, 10, 10.5, 11, 12}),    // k2: the best for 2+ tokens
      timing("rt1_w8_k2_cta", {9, 20, 20, 20, 20}),       // k2: the best for one token
      timing("rt1_w4", {8.5, 30, 30, 30, 30}),            // k4: the fastest single token of all
  };
  const GemmPick pick = pick_decode_gemm(timings, kMeasuredM);
  EXPECT_EQ(pick.variant, "rt2_w4_k2_cta");
  EXPECT_EQ(pick.single_token_variant, "rt1_w8_k2_cta");
  EXPECT_DOUBLE_EQ(pick.total_us, 9 + 10 + 10.5 + 11 + 31 * 12);
  EXPECT_THAT(pick.reason, HasSubstr("class k2 (rt2_w4_k2_cta, rt1_w8_k2_cta for one token) 412.5 us"));
  EXPECT_THAT(pick.reason, HasSubstr("next class k1 (rt1_w4_cta) 480.0 us (+16%)"));
  EXPECT_EQ(skinny_rounding_class(pick.single_token_variant), skinny_rounding_class(pick.variant));
}

TEST(PlanTunePick, NamesTheKernelThatRunsOneToken) {
  const std::vector<GemmTiming> timings = {timing("rt1_w4_k4_cta", {5, 6, 6, 6, 6}), timing("rt2_w4", {7, 7, 7, 7, 7})};
  const GemmPick pick = pick_decode_gemm(timings, kMeasuredM, [](const std::string& v) {
    return v == "rt1_w4_k4_cta" ? std::string("rt1_w4") : v;  // as the kernels' twin maps it
  });
  EXPECT_EQ(pick.variant, "rt1_w4_k4_cta");
  EXPECT_EQ(pick.single_token_variant, "rt1_w4");
  EXPECT_THAT(pick.reason, HasSubstr("class k4 (rt1_w4_k4_cta, rt1_w4 for one token)"));
}

TEST(PlanTunePick, OnlyTheBatchOneBucket) {
  const std::vector<GemmTiming> timings = {{"rt1_w4_cta", {10}, 10}, {"rt2_w4_k2_cta", {12}, 12},
                                           {"rt1_w8_k2_cta", {9}, 9}};
  const GemmPick pick = pick_decode_gemm(timings, {1});
  EXPECT_EQ(pick.variant, "rt1_w8_k2_cta");
  EXPECT_EQ(pick.single_token_variant, "rt1_w8_k2_cta");
}

TEST(PlanTunePick, RefusesWhatItCannotPickFrom) {
  expect_error([] { pick_decode_gemm({}, kMeasuredM); }, {"no decode GEMM variant was timed"});
  expect_error([] { pick_decode_gemm({timing("rt1_w4", {1, 2, 3, 4, 5})}, {2, 4, 8, 16, 32}); },
               {"must include batch 1"});
  expect_error([] { pick_decode_gemm({{"rt1_w4", {1, 2}, 3}}, kMeasuredM); }, {"rt1_w4 has 2 timings for 5"});
  expect_error([] { pick_decode_gemm({timing("rt9_w9", {1, 2, 3, 4, 5})}, kMeasuredM); },
               {"'rt9_w9' is not a decode GEMM variant"});
}

TEST(PlanRules, OtherHeadDimsUseTheFallback) {
  const ModelConfig c = config_of("synthetic:llama?hidden=640&layers=2&heads=8&kv_heads=2&ffn=1024&vocab=512");
  ASSERT_EQ(c.head_dim, 80);
  const Plan p = rule_plan(c);
  EXPECT_EQ(p.decode.attention.kernel, "generic");
  EXPECT_EQ(p.prefill.attention_kernel, "generic");
  EXPECT_EQ(p.decode.buckets.back().attention_grid, (std::array<int, 3>{8, 256, 1}));  // heads x batch
}

TEST(PlanRules, RefusesOldGpusAndF32) {
  GpuIdentity turing{"NVIDIA T4", 7, 5, 40, uint64_t{15} << 30};
  expect_error([&] { make_rule_plan(llama_8b(), DType::BF16, turing, default_limits(llama_8b())); },
               {"NVIDIA T4 (sm_75", "compute capability 8.0 or newer"});
  expect_error([&] { make_rule_plan(llama_8b(), DType::F32, gpu_preset("h200"), default_limits(llama_8b())); },
               {"bf16 or f16, not f32"});
}

TEST(PlanRules, GpuPresetsAndArchitectures) {
  EXPECT_EQ(gpu_preset("H200").describe(), "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)");
  expect_error([] { gpu_preset("h300"); }, {"unknown GPU preset 'h300'", "h200", "--sm"});
  EXPECT_EQ(parse_sm_arch("90"), (std::array<int, 2>{9, 0}));
  EXPECT_EQ(parse_sm_arch("9.0"), (std::array<int, 2>{9, 0}));
  EXPECT_EQ(parse_sm_arch("sm_90a"), (std::array<int, 2>{9, 0}));
  EXPECT_EQ(parse_sm_arch("8.6"), (std::array<int, 2>{8, 6}));
  EXPECT_EQ(parse_sm_arch("120"), (std::array<int, 2>{12, 0}));
  for (const char* bad : {"", "9", "x90", "9.x", "9.10", "-80"})
    expect_error([&] { parse_sm_arch(bad); }, {"is not a compute capability"});
}

// ---------------------------------------------------------------------------------------------
// Buckets and batch invariance

TEST(PlanBuckets, DecodeChoicesAreTheSameForEveryBucket) {
  const Plan full = rule_plan(llama_8b());
  for (int max_batch : {1, 7, 16, 100, 256, 1000}) {
    SCOPED_TRACE(max_batch);
    const Plan p = make_rule_plan(llama_8b(), DType::BF16, gpu_preset("h200"), make_plan_limits(llama_8b(), max_batch, 8192, 0));
    // The variants and the split do not depend on the batch limit, so not on any bucket either:
    // the buckets hold no kernel choice at all, only the graph size and launch grids.
    EXPECT_EQ(variants(p), variants(full));
    EXPECT_EQ(single_token_variants(p), single_token_variants(full));
    EXPECT_EQ(p.decode.attention.split_tokens, full.decode.attention.split_tokens);
    std::vector<int> batches;
    for (const DecodeBucket& b : p.decode.buckets) {
      batches.push_back(b.batch);
      EXPECT_EQ(b.gemm_launches, (b.batch + 15) / 16);
      EXPECT_EQ(b.attention_grid, (std::array<int, 3>{8, b.batch, 32}));
    }
    EXPECT_EQ(batches, decode_batch_buckets(max_batch));
    for (int batch = 1; batch <= max_batch; ++batch) {
      const DecodeBucket& b = p.decode_bucket(batch);
      ASSERT_GE(b.batch, batch);
      if (&b != &p.decode.buckets.front()) {
        ASSERT_LT((&b - 1)->batch, batch);  // the smallest bucket that holds it
      }
    }
    expect_error([&] { p.decode_bucket(max_batch + 1); }, {"largest batch bucket", "--max-batch"});
  }
  EXPECT_EQ(decode_batch_buckets(256), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(decode_batch_buckets(100), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 100}));
  EXPECT_EQ(decode_batch_buckets(1), (std::vector<int>{1}));
}

TEST(PlanBuckets, PrefillChunks) {
  EXPECT_EQ(prefill_chunk_buckets(8192), (std::vector<int>{64, 128, 256, 512, 1024, 2048, 4096, 8192}));
  EXPECT_EQ(prefill_chunk_buckets(100), (std::vector<int>{64, 100}));
  EXPECT_EQ(prefill_chunk_buckets(32), (std::vector<int>{32}));
  const Plan p = rule_plan(llama_8b());
  EXPECT_EQ(p.prefill_bucket(1).tokens, 64);
  EXPECT_EQ(p.prefill_bucket(65).tokens, 128);
  EXPECT_EQ(p.prefill_bucket(8192).tokens, 8192);
  expect_error([&] { p.prefill_bucket(8193); }, {"8193 tokens", "--max-prefill-tokens"});
}

// On Hopper the prefill projections run the sm_90a GEMMs, tiles of 128 features for chunks of up to
// 1,024 tokens and 256 above (the same bits); elsewhere, or for a model whose projections do not fit
// them, cuBLASLt for every chunk.
TEST(PlanRules, PrefillGemmPaths) {
  const Plan hopper = rule_plan(llama_8b());
  for (int tokens : {1, 300, 1024}) EXPECT_EQ(hopper.prefill_bucket(tokens).gemm, "sm90_w128") << tokens;
  for (int tokens : {1025, 2048, 8192}) EXPECT_EQ(hopper.prefill_bucket(tokens).gemm, "sm90_w256") << tokens;
  EXPECT_THAT(hopper.prefill.gemm_origin.reason, HasSubstr("sm90_w128: H200"));
  EXPECT_THAT(hopper.prefill.gemm_origin.reason, HasSubstr("sm90_w256: H200"));
  EXPECT_EQ(rule_plan(llama_1b(), "h100", DType::F16).prefill_bucket(8192).gemm, "sm90_w256");
  for (const PrefillBucket& b : rule_plan(llama_8b(), "a100").prefill.buckets) EXPECT_EQ(b.gemm, "cublaslt");

  ModelConfig odd = llama_8b();
  odd.intermediate_size = 5000;  // down's k is not a multiple of 64
  const Plan p = rule_plan(odd);
  for (const PrefillBucket& b : p.prefill.buckets) EXPECT_EQ(b.gemm, "cublaslt") << b.tokens;
  EXPECT_THAT(p.prefill.gemm_origin.reason, HasSubstr("the down [4096][5000] projection does not fit"));
}

TEST(PlanBuckets, WorkspaceFollowsTheLimits) {
  const Plan p = rule_plan(llama_8b());
  // A 16-byte header, then 256 sequences x (8 head-group merge counters + 32 heads x 32 splits x
  // (128 + 1) fp32 values).
  EXPECT_EQ(p.decode.attention.workspace_bytes, 16 + uint64_t{256} * (8 * 4 + 32 * 32 * 129 * 4));
  const PlanLimits short_seqs = make_plan_limits(llama_8b(), 256, 8192, 1000);
  EXPECT_EQ(short_seqs.max_seq_len, 1000);
  EXPECT_EQ(make_plan_limits(llama_8b(), 256, 8192, 0).max_seq_len, 8192);  // 131072 capped
  expect_error([] { make_plan_limits(llama_8b(), 0, 8192, 0); }, {"--max-batch"});
}

// ---------------------------------------------------------------------------------------------
// Serialisation

Plan with_fake_timings(Plan p) {
  p.made_by = "tune";
  for (DecodeGemmChoice& c : p.decode.gemm) {
    c.measured_m = {1, 2, 4, 8, 16};
    for (std::string_view v : skinny_gemm_variant_names())
      c.timings.push_back({std::string(v), {18.9, 19.25, 1.0 / 3.0, 21.0, 24.2}, 1234.5678901234});
    c.origin = {"tune", "fastest"};
  }
  p.decode.attention.measured_cases = {{1, 512}, {16, 2048}, {64, 8192}};
  p.decode.attention.timings = {{128, {10.1, 20.2, 300.3}, 1.05}, {256, {11.1, 19.2, 290.0}, 1.0 + 1e-12}};
  p.decode.attention.origin = {"tune", "least mean ratio"};
  return p;
}

TEST(PlanJson, RoundTripIsExact) {
  for (const Plan& p : {rule_plan(llama_8b()), rule_plan(llama_1b(), "a100", DType::F16),
                        with_fake_timings(rule_plan(llama_8b(), "h100"))}) {
    const json j = plan_to_json(p);
    EXPECT_EQ(j["format"], "fuselm-plan");
    EXPECT_EQ(j["version"], kPlanFormatVersion);
    const Plan back = plan_from_json(json::parse(j.dump(2)), "test");
    EXPECT_EQ(back, p);
    EXPECT_EQ(plan_to_json(back), j);
  }
  // Plans written before per-bucket variants have no single_token_variant: one variant for all.
  json old = plan_to_json(rule_plan(llama_8b()));
  old["decode"]["gemm"]["qkv"].erase("single_token_variant");
  EXPECT_EQ(plan_from_json(old, "old plan").decode_gemm(PlanOp::Qkv).single_token_variant, "rt1_w4_k4_cta");
  // Nor balance_sms: their grids were placed as the block scheduler does. Without its one-token
  // twin, one flag serves every batch.
  json unbalanced = plan_to_json(rule_plan(llama_8b()));
  unbalanced["decode"]["gemm"]["qkv"]["balance_sms"] = true;
  unbalanced["decode"]["gemm"]["qkv"].erase("single_token_balance_sms");
  EXPECT_TRUE(plan_from_json(unbalanced, "edited plan").decode_gemm(PlanOp::Qkv).single_token_balance_sms);
  unbalanced["decode"]["gemm"]["qkv"].erase("balance_sms");
  EXPECT_FALSE(plan_from_json(unbalanced, "old plan").decode_gemm(PlanOp::Qkv).balance_sms);
  EXPECT_FALSE(plan_from_json(unbalanced, "old plan").decode_gemm(PlanOp::Qkv).single_token_balance_sms);
  test::TempDir dir;
  const Plan p = with_fake_timings(rule_plan(llama_1b()));
  save_plan_file(p, dir.file("plan.json"));
  EXPECT_EQ(load_plan_file(dir.file("plan.json")), p);
}

TEST(PlanText, ShowsChoicesBucketsAndMeasurements) {
  const std::string rules = render_plan(rule_plan(llama_8b()));
  EXPECT_THAT(rules, HasSubstr("NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"));
  EXPECT_THAT(rules, HasSubstr("decode batch buckets"));
  EXPECT_THAT(rules, Not(HasSubstr("measured")));
  const std::string tuned = render_plan(with_fake_timings(rule_plan(llama_8b())));
  EXPECT_THAT(tuned, HasSubstr("measured qkv"));
  EXPECT_THAT(tuned, HasSubstr("rt1_w8_k2_cta *"));  // the chosen variant is marked
  EXPECT_THAT(tuned, HasSubstr("rt1_w4_k4_cta *m>1"));  // and where one token runs another
  EXPECT_THAT(tuned, HasSubstr("rt1_w4 *m=1"));
  EXPECT_THAT(rules, HasSubstr("one token"));
  EXPECT_THAT(tuned, HasSubstr("1x512"));        // an attention case
  EXPECT_THAT(tuned, HasSubstr("256 *"));        // the chosen split
  EXPECT_THAT(render_plan_rules(), HasSubstr("decode_split"));
}

TEST(PlanJson, FingerprintIsStable) {
  const PlanModel m = plan_model(llama_8b());
  // A fixed value: the fingerprint must not change between builds or machines.
  EXPECT_EQ(model_fingerprint(m, DType::BF16), "3ac310c496297040");
  EXPECT_NE(model_fingerprint(m, DType::F16), model_fingerprint(m, DType::BF16));
  PlanModel other = m;
  other.vocab_size = 32000;
  EXPECT_NE(model_fingerprint(other, DType::BF16), model_fingerprint(m, DType::BF16));
  EXPECT_EQ(rule_plan(llama_8b()).fingerprint, model_fingerprint(m, DType::BF16));
}

// ---------------------------------------------------------------------------------------------
// Refusals

TEST(PlanMatch, AcceptsItsOwnGpuModelAndDtype) {
  const Plan p = rule_plan(llama_8b());
  check_plan_matches(p, llama_8b(), DType::BF16, gpu_preset("h200"));
  GpuIdentity same = gpu_preset("h200");
  same.memory_bytes += same.memory_bytes / 100;  // ECC or driver reservations move it a little
  check_plan_matches(p, llama_8b(), DType::BF16, same);
}

TEST(PlanMatch, RefusesAnotherGpu) {
  const Plan p = rule_plan(llama_8b(), "h100");
  expect_error([&] { check_plan_matches(p, llama_8b(), DType::BF16, gpu_preset("h200"), "plan.json"); },
               {"plan.json does not fit", "made for NVIDIA H100 80GB HBM3 (sm_90, 132 SMs",
                "this GPU is NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)", "fuselm tune"});
  GpuIdentity fewer_sms = gpu_preset("h100");
  fewer_sms.sm_count = 114;  // e.g. a partition, or the PCIe board under the same name
  expect_error([&] { check_plan_matches(p, llama_8b(), DType::BF16, fewer_sms); }, {"132 SMs", "114 SMs"});
  GpuIdentity half_memory = gpu_preset("h100");
  half_memory.memory_bytes /= 2;
  expect_error([&] { check_plan_matches(p, llama_8b(), DType::BF16, half_memory); }, {"this GPU is"});
}

TEST(PlanMatch, RefusesAnotherModel) {
  const Plan p = rule_plan(llama_8b());
  expect_error([&] { check_plan_matches(p, llama_1b(), DType::BF16, gpu_preset("h200"), "plan.json"); },
               {"made for another model", "hidden_size 4096 (this model: 2048)", "num_layers 32 (this model: 16)",
                "intermediate_size 14336 (this model: 8192)", p.fingerprint});
  ModelConfig small_vocab = llama_8b();
  small_vocab.vocab_size = 32000;
  expect_error([&] { check_plan_matches(p, small_vocab, DType::BF16, gpu_preset("h200")); },
               {"vocab_size 128256 (this model: 32000)"});
}

TEST(PlanMatch, RefusesAnotherDtypeAndNamesEveryDifference) {
  const Plan p = rule_plan(llama_8b());
  expect_error([&] { check_plan_matches(p, llama_8b(), DType::F16, gpu_preset("h200")); },
               {"made for bf16, the engine runs f16"});
  expect_error([&] { check_plan_matches(p, llama_1b(), DType::F16, gpu_preset("a100")); },
               {"this GPU is NVIDIA A100", "made for bf16", "another model"});
}

TEST(PlanMatch, LimitsMustBeCovered) {
  const Plan p = make_rule_plan(llama_8b(), DType::BF16, gpu_preset("h200"), make_plan_limits(llama_8b(), 64, 2048, 4096));
  check_plan_covers(p, make_plan_limits(llama_8b(), 64, 2048, 4096));
  check_plan_covers(p, make_plan_limits(llama_8b(), 8, 512, 100));
  expect_error([&] { check_plan_covers(p, make_plan_limits(llama_8b(), 256, 2048, 4096), "plan.json"); },
               {"plan.json was made for at most 64 sequences per step", "--max-batch 256"});
  expect_error([&] { check_plan_covers(p, make_plan_limits(llama_8b(), 64, 8192, 4096)); }, {"--max-prefill-tokens"});
  expect_error([&] { check_plan_covers(p, make_plan_limits(llama_8b(), 64, 2048, 8192)); }, {"--max-seq-len"});
}

// ---------------------------------------------------------------------------------------------
// Broken files

class PlanFile : public ::testing::Test {
 protected:
  void SetUp() override { good_ = plan_to_json(rule_plan(llama_8b())); }

  // Writes `text` and expects load_plan_file to throw fuselm::Error mentioning every part.
  void expect_load_error(const std::string& text, std::initializer_list<std::string> parts) {
    const std::string path = dir_.file("plan.json");
    test::write_bytes(path, text);
    expect_error([&] { load_plan_file(path); }, parts);
  }
  void expect_load_error(const json& j, std::initializer_list<std::string> parts) {
    expect_load_error(j.dump(2), parts);
  }

  test::TempDir dir_;
  json good_;
};

TEST_F(PlanFile, Truncated) {
  const std::string text = good_.dump(2);
  expect_load_error(text.substr(0, text.size() / 2), {"plan file", "malformed JSON at line", "ends early"});
  expect_load_error(text.substr(0, text.size() - 2), {"malformed JSON"});
}

TEST_F(PlanFile, NotAPlan) {
  expect_load_error(std::string(), {"is empty (0 bytes)"});
  expect_load_error(std::string("<!DOCTYPE html><html><body>Sign in</body></html>"), {"HTML page"});
  expect_load_error(json::array({1, 2}), {"not a fuselm plan", "an array"});
  expect_load_error(json{{"schema", "fuselm-bench"}, {"results", json::array()}},
                    {"not a fuselm plan", "\"format\": \"fuselm-plan\"", "no \"format\" key"});
  expect_error([&] { load_plan_file(dir_.file("missing.json")); }, {"not found", "fuselm tune"});
}

TEST_F(PlanFile, DeeplyNested) {
  // Describing the value in the error message recursed once per level of "[[[[...".
  json j = good_;
  j["version"] = json::array();
  std::string text = j.dump();
  const size_t at = text.find("[]");
  text.replace(at, 2, std::string(100000, '[') + std::string(100000, ']'));
  expect_load_error(text, {"plan file", "nested more than 512 levels deep"});
}

// The decode and prefill bucket lists double up to the limit in int: above 2^30 they overflowed
// and grew until memory ran out.
TEST_F(PlanFile, HugeLimits) {
  json j = good_;
  j["limits"]["max_batch"] = 2147483647;
  expect_load_error(j, {"limits exceed", "max_batch 2147483647 of at most 65535"});
  j = good_;
  j["limits"]["max_prefill_tokens"] = 2147483647;
  expect_load_error(j, {"limits exceed", "max_prefill_tokens 2147483647 of at most 1048576"});
  j = good_;
  j["kv_block"]["tokens"] = 1;
  j["decode"]["attention"]["split_tokens"] = 2147483647;
  expect_load_error(j, {"split_tokens 2147483647 spans more than"});
}

TEST_F(PlanFile, WrongVersion) {
  json j = good_;
  j["version"] = 2;
  expect_load_error(j, {"plan format version 2", "reads version 1", "newer fuselm"});
  j["version"] = "1";
  expect_load_error(j, {"version: expected an integer, found a string \"1\""});
}

TEST_F(PlanFile, WrongTypesAndMissingKeys) {
  json j = good_;
  j["limits"]["max_batch"] = "64";
  expect_load_error(j, {"limits.max_batch: expected an integer, found a string \"64\"", "fuselm tune"});
  j = good_;
  j["gpu"] = 5;
  expect_load_error(j, {"gpu: expected an object, found the number 5"});
  j = good_;
  j["decode"]["attention"].erase("split_tokens");
  expect_load_error(j, {"missing key 'decode.attention.split_tokens'"});
  j = good_;
  j["decode"]["gemm"].erase("down");
  expect_load_error(j, {"missing key 'decode.gemm.down'"});
  j = good_;
  j["decode"]["buckets"][2]["attention_grid"] = json::array({1, 2});
  expect_load_error(j, {"decode.buckets[2].attention_grid: expected 3 integers"});
  j = good_;
  j["gpu"]["memory_bytes"] = -1;
  expect_load_error(j, {"gpu.memory_bytes: expected a non-negative integer"});
  j = good_;
  j["dtype"] = "q4";
  expect_load_error(j, {"dtype: unsupported dtype 'q4'"});
  j = good_;
  j["gpu"]["compute_capability"] = "nine";
  expect_load_error(j, {"gpu.compute_capability", "not a compute capability"});
  j = good_;
  j["decode"]["gemm"]["o"]["balance_sms"] = 1;
  expect_load_error(j, {"decode.gemm.o.balance_sms: expected true or false, found the number 1"});
}

// decode.ffn_one_launch_tokens: read back as written, 0 where an older file has none, refused out of
// range or where gate/up or down rounds in a class the one-launch FFN does not run.
TEST_F(PlanFile, OneLaunchFfnTokens) {
  const std::string path = dir_.file("plan.json");
  json j = good_;
  ASSERT_EQ(j["decode"]["ffn_one_launch_tokens"], 0);  // the rules leave it off
  j["decode"]["ffn_one_launch_tokens"] = 4;
  test::write_bytes(path, j.dump(2));
  EXPECT_EQ(load_plan_file(path).decode.ffn_one_launch_tokens, 4);
  j["decode"].erase("ffn_one_launch_tokens");
  test::write_bytes(path, j.dump(2));
  EXPECT_EQ(load_plan_file(path).decode.ffn_one_launch_tokens, 0);
  j = good_;
  j["decode"]["ffn_one_launch_tokens"] = 9;
  expect_load_error(j, {"decode.ffn_one_launch_tokens 9 is not in 0..8"});
  j["decode"]["ffn_one_launch_tokens"] = 1;
  j["decode"]["gemm"]["gate_up"]["variant"] = "rt1_w4_k2";  // the warp pipeline split in a cluster: k2x4
  j["decode"]["gemm"]["gate_up"]["single_token_variant"] = "rt1_w4_k2";
  expect_load_error(j, {"decode.ffn_one_launch_tokens", "decode.gemm.gate_up rounds as k2x4"});
}

// decode.o_in_attention: read back, false where an older file has none, refused where the O
// projection does not round as k8 or decode attention does not run in clusters of 8.
TEST_F(PlanFile, OProjectionInAttention) {
  const std::string path = dir_.file("plan.json");
  json j = good_;
  ASSERT_EQ(j["decode"]["o_in_attention"], false);  // the rules leave it off
  j["decode"]["o_in_attention"] = true;
  test::write_bytes(path, j.dump(2));
  EXPECT_TRUE(load_plan_file(path).decode.o_in_attention);
  j["decode"].erase("o_in_attention");
  test::write_bytes(path, j.dump(2));
  EXPECT_FALSE(load_plan_file(path).decode.o_in_attention);
  j = good_;
  j["decode"]["o_in_attention"] = 1;
  expect_load_error(j, {"decode.o_in_attention: expected true or false"});
  j["decode"]["o_in_attention"] = true;
  j["decode"]["gemm"]["o"]["variant"] = "rt1_w4_k4_cta";
  j["decode"]["gemm"]["o"]["single_token_variant"] = "rt1_w4";
  expect_load_error(j, {"decode.o_in_attention", "decode.gemm.o rounds as k4"});
  j = good_;
  j["decode"]["o_in_attention"] = true;
  j["decode"]["attention"]["kernel"] = "mma";
  expect_load_error(j, {"decode.o_in_attention needs decode attention in clusters of 8", "is mma"});
}

TEST_F(PlanFile, UnknownNames) {
  json j = good_;
  j["decode"]["gemm"]["qkv"]["variant"] = "rt9_w9";
  expect_load_error(j, {"decode.gemm.qkv.variant 'rt9_w9' is not a decode GEMM variant", "rt1_w4, rt1_w8"});
  j = good_;
  j["decode"]["attention"]["kernel"] = "flash";
  expect_load_error(j, {"decode.attention.kernel 'flash' is unknown"});
  j = good_;
  j["prefill"]["buckets"][0]["gemm"] = "cutlass";
  expect_load_error(j, {"GEMM path 'cutlass' is unknown"});
}

// The sm_90a prefill GEMMs for every chunk or none, on Hopper only, for a model they fit.
TEST_F(PlanFile, PrefillGemmPaths) {
  json j = good_;
  j["prefill"]["buckets"][0]["gemm"] = "cublaslt";
  expect_load_error(j, {"prefill bucket", "round differently", "depend on its chunk's size"});
  j = good_;
  j["prefill"]["buckets"][7]["gemm"] = "sm90_w128";  // the width may change, the family may not
  EXPECT_EQ(plan_from_json(j, "test").prefill_bucket(8192).gemm, "sm90_w128");
  json ampere = plan_to_json(rule_plan(llama_8b(), "a100"));
  for (auto& b : ampere["prefill"]["buckets"]) b["gemm"] = "sm90_w256";
  expect_load_error(ampere, {"runs Hopper's sm_90a code", "sm_80", "use cublaslt"});
}

TEST_F(PlanFile, InconsistentEdits) {
  json j = good_;
  j["decode"]["gemm"]["gate_up"]["single_token_variant"] = "rt1_w4_cta";
  expect_load_error(j, {"decode.gemm.gate_up: the single-token variant rt1_w4_cta (rounding class k1) rounds "
                        "differently from rt1_w7_k2_cta (class k2)", "depend on the batch size"});
  j = good_;
  j["decode"]["gemm"]["o"]["single_token_variant"] = "rt2_w8_k8_cta";  // the same class as rt1_w4_k8_cta
  EXPECT_EQ(plan_from_json(j, "test").decode_gemm(PlanOp::O).single_token_variant, "rt2_w8_k8_cta");
  j = good_;
  j["model"]["hidden_size"] = 2048;
  expect_load_error(j, {"does not match the shapes and dtype", "edited by hand"});
  j = good_;
  j["decode"]["attention"]["split_tokens"] = 100;
  expect_load_error(j, {"split_tokens 100 is not a positive multiple of the KV block size 16"});
  j = good_;
  j["decode"]["attention"]["split_tokens"] = 4096;
  expect_load_error(j, {"split_tokens 4096 spans more than 127 KV blocks of 16 tokens; use at most 2032"});
  j = good_;
  j["decode"]["attention"]["split_tokens"] = 512;  // derived numbers left as they were
  expect_load_error(j, {"do not follow from split 512"});
  j = good_;
  j["decode"]["buckets"].erase(3);
  expect_load_error(j, {"decode.buckets do not follow from max_batch 256"});
  j = good_;
  j["limits"]["max_prefill_tokens"] = 4096;
  expect_load_error(j, {"prefill.buckets", "do not follow from max_prefill_tokens 4096"});
}

// Kernels that need thread-block clusters are refused in a plan for an older GPU, at load.
TEST_F(PlanFile, ClusterKernelsNeedHopper) {
  const json ampere = plan_to_json(rule_plan(llama_8b(), "a100"));
  (void)plan_from_json(ampere, "test");
  json j = ampere;
  j["decode"]["attention"]["kernel"] = "mma_c8";
  expect_load_error(j, {"decode.attention.kernel mma_c8 runs in thread-block clusters", "sm_80"});
  j = ampere;
  j["decode"]["gemm"]["down"]["variant"] = "rt1_w4_k8_cta";
  j["decode"]["gemm"]["down"]["single_token_variant"] = "rt1_w8_k8";
  expect_load_error(j, {"decode.gemm.down names rt1_w4_k8_cta, which needs thread-block clusters", "sm_80"});
  EXPECT_TRUE(skinny_variant_needs_sm90("rt2_w4_k2_cta"));
  EXPECT_TRUE(skinny_variant_needs_sm90("rt1_w4_cta"));
  EXPECT_TRUE(skinny_variant_needs_sm90("rt1_w8_k2"));
  EXPECT_FALSE(skinny_variant_needs_sm90("rt2_w8"));
  EXPECT_EQ(decode_attention_cluster_ranks("mma"), 1);
  EXPECT_EQ(decode_attention_cluster_ranks("mma_c8"), 8);
  EXPECT_EQ(decode_attention_cluster_ranks("mma_c8_s16"), 8);
  EXPECT_EQ(decode_attention_stacked_from("mma_c8"), 0);
  EXPECT_EQ(decode_attention_stacked_from("mma_c8_s4"), 4);
  EXPECT_EQ(decode_attention_stacked_from("mma_c8_s16"), 16);
  j = ampere;
  j["decode"]["attention"]["kernel"] = "mma_c8_s16";
  expect_load_error(j, {"decode.attention.kernel mma_c8_s16 runs in thread-block clusters", "sm_80"});
}

// Every leaf of a good plan replaced by values of every JSON type, and the file cut at many
// points: loading either works or throws fuselm::Error, never anything else.
TEST_F(PlanFile, NeverCrashes) {
  const json good = plan_to_json(with_fake_timings(rule_plan(llama_1b())));
  const json flat = good.flatten();
  const json replacements[] = {nullptr, "x", -1, 0, 3, 1e30, 2.5, true, json::array(), json::object()};
  // The measured timings repeat one shape for every variant (nine leaves in ten): each op's first
  // candidate stands for the rest, which are read by the same code.
  auto repeats_first_candidate = [](const std::string& pointer) {
    const size_t at = pointer.find("/candidates/");
    return at != std::string::npos && !pointer.substr(at).starts_with("/candidates/0/");
  };
  int errors = 0, loaded = 0, mutated = 0;
  for (const auto& [pointer, value] : flat.items()) {
    if (repeats_first_candidate(pointer)) continue;
    ++mutated;
    for (const json& r : replacements) {
      json f = good;
      f[json::json_pointer(pointer)] = r;
      try {
        plan_from_json(f, "fuzz");
        ++loaded;
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  EXPECT_GT(mutated, 150);  // every leaf outside the repeated timings
  EXPECT_GT(errors, 0);
  EXPECT_GT(loaded, 0);  // e.g. a reason replaced by "x"
  const std::string text = good.dump();
  for (size_t cut = 0; cut < text.size(); cut += 97) {
    const std::string path = dir_.file("cut.json");
    test::write_bytes(path, text.substr(0, cut));
    EXPECT_THROW(load_plan_file(path), Error) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace fuselm
