// The plan against the kernels: the names and sizes plan/ mirrors for CPU builds agree with the
// kernels' own (host-only checks, no device needed), and `fuselm tune` on a GPU gives a valid plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>

#include "core/error.h"
#include "gpu_test_util.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/skinny_gemm.h"
#include "model/loader.h"
#include "plan/cuda/plan_cuda.h"
#include "plan/plan.h"
#include "plan/tune.h"
#include "runtime/cuda/memory_plan.h"

namespace fuselm {
namespace {

using ::testing::HasSubstr;

TEST(PlanKernels, VariantNamesAreTheKernels) {
  std::vector<std::string> kernels, plan;
  for (const SkinnyGemmVariant& v : skinny_gemm_variants()) kernels.push_back(v.name());
  for (std::string_view n : skinny_gemm_variant_names()) plan.emplace_back(n);
  EXPECT_EQ(plan, kernels) << "update kSkinnyGemmVariants in src/plan/rules.cpp to the kernels' list";
  for (const std::string& n : kernels) EXPECT_EQ(find_skinny_gemm_variant(n).name(), n);
  try {
    find_skinny_gemm_variant("rt9_w9");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'rt9_w9' is not one this build's kernels have"));
  }
}

TEST(PlanKernels, MirroredSizesAgree) {
  EXPECT_EQ(kCublasLtWorkspaceBytes, GemmPlan::kWorkspaceBytes);
  EXPECT_EQ(kPlanDefaultMaxSeqLen, kDefaultMaxSeqLenCap);
  EXPECT_EQ(kDecodeGemmMaxTokens, kSkinnyGemmMaxTokens);
  // Head counts: 4 heads per KV head; 32 (two 16-head groups); 1 with an odd head count.
  for (const auto& [heads, kv_heads] : {std::pair{32, 8}, std::pair{64, 2}, std::pair{9, 9}}) {
    for (int head_dim : {64, 128, 80}) {
      for (int split : {128, 256, 512}) {
        for (int max_seq_len : {100, 4096, 8192}) {
          PlanModel m;
          m.num_heads = heads;
          m.num_kv_heads = kv_heads;
          m.head_dim = head_dim;
          const AttentionShape shape{heads, kv_heads, head_dim, 0.1f};
          const DecodeAttentionPlan plan{split, (max_seq_len + split - 1) / split};
          EXPECT_EQ(decode_attention_workspace(m, split, max_seq_len, 64),
                    decode_attention_workspace_bytes(shape, plan, 64))
              << heads << " heads, " << kv_heads << " KV heads, head_dim " << head_dim << ", split " << split;
        }
      }
    }
  }
}

TEST(PlanKernels, PrefillKernelNamesAreTheLaunchersChoices) {
  const auto name = [](attention_detail::PrefillVariant v) {
    return str_cat("mma_r", v.rows_per_warp, "_k", v.keys_per_tile);
  };
  const GpuIdentity h200 = gpu_preset("h200");
  for (int head_dim : {64, 128})
    EXPECT_EQ(find_plan_rule(PlanOp::PrefillAttention, DType::BF16, head_dim, h200).choice,
              name(attention_detail::choose_prefill_variant(head_dim)));
}

TEST(PlanKernels, RulePlanResolves) {
  const ModelConfig c = load_model("synthetic:llama-3.1-8b", LoadOptions{.materialize_synthetic = false})->config;
  const Plan p = make_rule_plan(c, DType::BF16, gpu_preset("h200"), make_plan_limits(c, 256, 8192, 0));
  for (PlanOp op : kDecodeGemmOps) {
    const SkinnyGemmChoice choice = plan_skinny_gemm_choice(p, op);
    EXPECT_EQ(choice.variant.name(), p.decode_gemm(op).variant);
    EXPECT_EQ(choice.single_token.name(), p.decode_gemm(op).single_token_variant);
  }
  const DecodeAttentionPlan a = plan_decode_attention(p, 4096);
  EXPECT_EQ(a.split_tokens, 256);
  EXPECT_EQ(a.max_splits_per_seq, 16);
}

TEST(PlanTune, SmallModelOnThisGpu) {
  FUSELM_REQUIRE_GPU();
  const ModelConfig c = load_model("synthetic:llama?hidden=256&layers=2&heads=4&kv_heads=2&ffn=512&vocab=1000",
                                   LoadOptions{.materialize_synthetic = false})
                            ->config;
  TuneOptions o;
  o.reps = 3;
  o.warmup = 1;
  o.attention_batches = {1, 4};
  o.attention_depths = {64, 512};
  std::vector<std::string> log;
  const Plan p = tune_plan(c, DType::BF16, make_plan_limits(c, 32, 256, 1024), o,
                           [&](const std::string& line) { log.push_back(line); });
  EXPECT_EQ(p.made_by, "tune");
  EXPECT_FALSE(log.empty());
  const GpuIdentity gpu = query_gpu_identity();
  check_plan_matches(p, c, DType::BF16, gpu);
  for (const DecodeGemmChoice& g : p.decode.gemm) {
    EXPECT_EQ(g.origin.source, "tune");
    EXPECT_EQ(g.measured_m, (std::vector<int>{1, 2, 4, 8, 16}));
    ASSERT_EQ(g.timings.size(), skinny_gemm_variants().size());
    for (const GemmTiming& t : g.timings)
      for (double us : t.us) EXPECT_GT(us, 0.0) << t.variant;
    EXPECT_EQ(skinny_rounding_class(g.single_token_variant), skinny_rounding_class(g.variant));
  }
  const DecodeAttentionChoice& a = p.decode.attention;
  EXPECT_EQ(a.measured_cases.size(), 4u);
  EXPECT_EQ(a.timings.size(), 3u);
  EXPECT_EQ(plan_from_json(plan_to_json(p), "round trip"), p);
}

}  // namespace
}  // namespace fuselm
