// The CUDA engine's fused decode path against its baseline path, and its batch invariance: a
// sequence's logits are bitwise identical whatever else is in the batch.
//
// Tolerance against the baseline: per row ||fused - baseline|| / ||baseline|| <= 2e-2 in bf16 (both
// round activations to bf16, at different points), top-1 equal where the baseline's top two are at
// least 0.05 apart. Invariance and repeatability are bitwise.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/skinny_gemm.h"
#include "plan/plan.h"
#include "reference_model.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/batch_runner.h"
#include "runtime/cuda/fused_decoder.h"

namespace fuselm {
namespace {

using test::make_synthetic_model;

// Llama-shaped, GQA 2, head_dim 64; an FFN width and a vocabulary that are not multiples of 16.
ModelConfig small_llama() {
  ModelConfig c;
  c.hidden_size = 256;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.intermediate_size = 680;
  c.vocab_size = 1001;
  c.max_position_embeddings = 4096;
  c.rope.theta = 500000.0f;
  return c;
}

EngineOptions options(ExecutionPath path, int max_batch = 64) {
  EngineOptions o;
  o.device = DeviceKind::Cuda;
  o.dtype = DType::BF16;
  o.path = path;
  o.max_batch = max_batch;
  o.max_prefill_tokens = 4096;
  o.max_seq_len = 1024;
  return o;
}

std::vector<int32_t> random_tokens(std::mt19937& gen, int n, int vocab) {
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = pick(gen);
  return t;
}

// The index of the first value whose bits differ, or a.size() when none does (sizes equal).
size_t first_bitwise_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
  return a.size();
}

TEST(FusedEngine, UnsupportedReasons) {
  ModelConfig c = small_llama();
  EXPECT_EQ(fused_decode_unsupported_reason(c, DType::BF16), "");
  EXPECT_EQ(fused_decode_unsupported_reason(c, DType::F16), "");
  EXPECT_NE(fused_decode_unsupported_reason(c, DType::F32), "");
  c.head_dim = 8;
  EXPECT_NE(fused_decode_unsupported_reason(c, DType::BF16).find("head_dim 8"), std::string::npos);
}

// Eight sequences with different prompts decode 40 steps on both paths, fed the same tokens.
TEST(FusedEngine, DecodeAgreesWithTheBaselinePath) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(201);
  const ModelConfig config = small_llama();
  auto model = make_synthetic_model(config, false);
  auto fused = make_cuda_engine(*model, options(ExecutionPath::Fused));
  auto baseline = make_cuda_engine(*model, options(ExecutionPath::Baseline));
  const int n = 8, vocab = config.vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) prompts.push_back(random_tokens(gen, 5 + 37 * i, vocab));
  std::vector<int> fs, bs;
  for (int i = 0; i < n; ++i) {
    fs.push_back(fused->add_sequence());
    bs.push_back(baseline->add_sequence());
  }
  std::vector<SequenceChunk> fc, bc;
  for (int i = 0; i < n; ++i) {
    fc.push_back({fs[i], prompts[i], false});
    bc.push_back({bs[i], prompts[i], false});
  }
  std::vector<float> fl, bl;
  fused->forward(fc, fl);
  baseline->forward(bc, bl);
  double worst = 0.0;
  for (int step = 0; step < 40; ++step) {
    std::vector<int32_t> next(n);
    for (int i = 0; i < n; ++i) next[i] = test::argmax(bl.data() + static_cast<size_t>(i) * vocab, vocab);
    for (int i = 0; i < n; ++i) {
      fc[i].tokens = std::span<const int32_t>(&next[i], 1);
      bc[i].tokens = std::span<const int32_t>(&next[i], 1);
    }
    fused->forward(fc, fl);
    baseline->forward(bc, bl);
    ASSERT_EQ(fl.size(), bl.size());
    for (int i = 0; i < n; ++i) {
      const float* f = fl.data() + static_cast<size_t>(i) * vocab;
      const float* b = bl.data() + static_cast<size_t>(i) * vocab;
      const double err = test::relative_l2(f, b, static_cast<size_t>(vocab));
      worst = std::max(worst, err);
      EXPECT_LE(err, 2e-2) << "step " << step << " sequence " << i;
      if (test::top2_gap(b, vocab) >= 0.05f)
        EXPECT_EQ(test::argmax(f, vocab), test::argmax(b, vocab)) << "step " << step << " sequence " << i;
    }
  }
  std::printf("fused vs baseline decode, 8 sequences x 40 steps: worst relative error %.3g\n", worst);
}

// The target sequence: a prompt, then `steps` decode steps fed fixed tokens. Returns the logits of
// every decode step. The prompt is prefilled alone (prefill runs cuBLAS GEMMs, whose rounding may
// depend on the step's token count); from the first decode step on, `others` sequences join, each
// with a prompt of random length (so that some steps mix prefill and decode), then decode.
std::vector<float> run_target(Engine& engine, const std::vector<int32_t>& prompt, const std::vector<int32_t>& feed,
                              int others, uint32_t seed) {
  std::mt19937 gen(seed);
  const int vocab = engine.config().vocab_size;
  const int target = engine.add_sequence();
  std::vector<int> other_ids;
  std::vector<std::vector<int32_t>> other_tokens;  // the next chunk of each other sequence
  std::uniform_int_distribution<int> len(1, 90), join(1, 20);
  std::vector<int> joins;
  for (int i = 0; i < others; ++i) {
    other_ids.push_back(engine.add_sequence());
    other_tokens.push_back(random_tokens(gen, len(gen), vocab));
    joins.push_back(i % 3 == 0 ? join(gen) : 1);
  }
  std::vector<float> out, logits;
  for (int step = 0; step <= static_cast<int>(feed.size()); ++step) {
    std::vector<SequenceChunk> chunks;
    std::vector<int> other_rows;
    for (int i = 0; i < others; ++i) {
      if (joins[i] > step) continue;
      other_rows.push_back(i);
      chunks.push_back({other_ids[i], other_tokens[i], false});
    }
    // The target's place in the batch moves from step to step.
    const size_t at = chunks.empty() ? 0 : static_cast<size_t>(step) % (chunks.size() + 1);
    const std::span<const int32_t> mine =
        step == 0 ? std::span<const int32_t>(prompt) : std::span<const int32_t>(&feed[step - 1], 1);
    chunks.insert(chunks.begin() + static_cast<std::ptrdiff_t>(at), SequenceChunk{target, mine, false});
    engine.forward(chunks, logits);
    if (step > 0) out.insert(out.end(), logits.begin() + static_cast<std::ptrdiff_t>(at) * vocab,
                             logits.begin() + static_cast<std::ptrdiff_t>(at + 1) * vocab);
    for (size_t r = 0; r < other_rows.size(); ++r) {
      const size_t row = r < at ? r : r + 1;
      other_tokens[other_rows[r]] = {test::argmax(logits.data() + row * vocab, vocab)};
    }
  }
  engine.remove_sequence(target);
  for (int id : other_ids) engine.remove_sequence(id);
  return out;
}

// The invariance tests' target: a prompt and 128 tokens fed after it, over the test model.
struct TargetCase {
  ModelConfig config = small_llama();
  std::unique_ptr<Model> model;
  std::vector<int32_t> prompt, feed;
};

TargetCase target_case() {
  std::mt19937 gen(202);
  TargetCase c;
  c.model = make_synthetic_model(c.config, false);
  c.prompt = random_tokens(gen, 70, c.config.vocab_size);
  c.feed = random_tokens(gen, 128, c.config.vocab_size);
  return c;
}

TEST(FusedEngine, DecodeIsBitwiseBatchInvariant) {
  FUSELM_REQUIRE_GPU();
  const TargetCase c = target_case();
  const ModelConfig& config = c.config;
  const Model& model = *c.model;
  const std::vector<int32_t>& prompt = c.prompt;
  const std::vector<int32_t>& feed = c.feed;
  auto engine = make_cuda_engine(model, options(ExecutionPath::Fused));
  const std::vector<float> alone = run_target(*engine, prompt, feed, 0, 1);
  ASSERT_EQ(alone.size(), feed.size() * config.vocab_size);
  for (int others : {1, 6, 63}) {
    const std::vector<float> beside = run_target(*engine, prompt, feed, others, 100 + others);
    ASSERT_EQ(beside.size(), alone.size());
    const size_t first_diff = first_bitwise_difference(alone, beside);
    EXPECT_EQ(first_diff, alone.size()) << "with " << others << " others: first differing logit at decode step "
                                        << first_diff / config.vocab_size;
  }
  // Repeated, and on a second engine (fresh buffers, graphs and cache).
  EXPECT_EQ(0, std::memcmp(alone.data(), run_target(*engine, prompt, feed, 0, 1).data(), alone.size() * sizeof(float)));
  auto second = make_cuda_engine(model, options(ExecutionPath::Fused, 16));
  EXPECT_EQ(0, std::memcmp(alone.data(), run_target(*second, prompt, feed, 0, 1).data(), alone.size() * sizeof(float)));
}

// The rule plan for the target case's model and engine options, to edit.
Plan rule_plan(const TargetCase& c, const EngineOptions& o) {
  return make_rule_plan(c.config, o.dtype, query_gpu_identity(),
                        make_plan_limits(c.config, o.max_batch, o.max_prefill_tokens, o.max_seq_len));
}

// An engine running `plan` (completed here), through a plan file as a user would give it.
std::unique_ptr<CudaEngine> engine_with_plan(const TargetCase& c, const EngineOptions& o, Plan plan) {
  complete_plan(plan);
  const std::string path = testing::TempDir() + "fuselm-test-plan-" + std::to_string(getpid()) + ".json";
  save_plan_file(plan, path);
  EngineOptions with_plan = o;
  with_plan.plan_file = path;
  auto engine = make_cuda_engine(*c.model, with_plan);
  std::remove(path.c_str());
  return engine;
}

// Plans whose decode GEMMs run the register pipeline, or the CTA pipeline, for every token count (so
// their weights are packed in tile groups: skinny_tile_group), each op in the rules' rounding class,
// decode with the rules' bits: alone, and beside 15 others (16-token launches). So do the rules' own
// variants and the 7-tile CTA shape (ragged groups on these shapes) with their grids spread evenly
// over the SMs (padded shared memory: balance_sms).
TEST(FusedEngine, TileGroupPlansGiveTheRulesBits) {
  FUSELM_REQUIRE_GPU();
  if (!skinny_gemm_clusters_supported()) GTEST_SKIP() << "the rules' rounding classes here need cluster K splits";
  const TargetCase c = target_case();
  const EngineOptions o = options(ExecutionPath::Fused);
  auto rules_engine = make_cuda_engine(*c.model, o);
  const std::vector<float> want = run_target(*rules_engine, c.prompt, c.feed, 0, 1);
  rules_engine.reset();

  struct Arm {
    std::string shape, pipeline;  // empty shape: the rules' variants
    bool balance_sms;             // for every batch
  };
  for (const Arm& arm : {Arm{"rt1_w8", "_reg", false}, Arm{"rt1_w8", "_cta", false}, Arm{"rt1_w7", "_cta", true},
                         Arm{"", "", true}}) {
    Plan plan = rule_plan(c, o);
    for (DecodeGemmChoice& g : plan.decode.gemm) {
      g.balance_sms = g.single_token_balance_sms = arm.balance_sms;
      if (arm.shape.empty()) continue;
      const std::string cls = skinny_rounding_class(g.variant);  // "k<split>" here (CTA pipeline and twins)
      ASSERT_EQ(cls.find('x'), std::string::npos) << plan_op_name(g.op) << ": " << g.variant;
      const std::string name = (cls == "k1" ? arm.shape : arm.shape + "_" + cls) + arm.pipeline;
      ASSERT_EQ(skinny_rounding_class(name), cls);
      g.variant = g.single_token_variant = name;
    }
    auto engine = engine_with_plan(c, o, plan);
    for (int others : {0, 15}) {
      const std::vector<float> got = run_target(*engine, c.prompt, c.feed, others, 300 + others);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(first_bitwise_difference(want, got), want.size())
          << (arm.shape.empty() ? "rules" : arm.shape + arm.pipeline) << (arm.balance_sms ? " balanced" : "")
          << " beside " << others << " others: first differing logit at decode step "
          << first_bitwise_difference(want, got) / c.config.vocab_size;
    }
  }
}

// The gate/up and down projections in one launch (kernels/cuda/skinny_ffn.h) give the two launches'
// bits: alone (batch 1), beside 6 others (8-token launches) and beside 15 (16-token launches, which
// run two launches again).
TEST(FusedEngine, OneLaunchFfnGivesTheTwoLaunchesBits) {
  FUSELM_REQUIRE_GPU();
  if (!skinny_gemm_clusters_supported()) GTEST_SKIP() << "the rules' rounding classes here need cluster K splits";
  const TargetCase c = target_case();
  const EngineOptions o = options(ExecutionPath::Fused);
  auto engine_with = [&](int ffn_one_launch_tokens) {
    Plan plan = rule_plan(c, o);
    plan.decode.ffn_one_launch_tokens = ffn_one_launch_tokens;
    return engine_with_plan(c, o, plan);
  };
  auto two = engine_with(0), one = engine_with(kDecodeFfnOneLaunchMaxTokens);
  for (int others : {0, 6, 15}) {
    const std::vector<float> want = run_target(*two, c.prompt, c.feed, others, 400 + others);
    const std::vector<float> got = run_target(*one, c.prompt, c.feed, others, 400 + others);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(first_bitwise_difference(want, got), want.size())
        << "beside " << others << " others: first differing logit at decode step "
        << first_bitwise_difference(want, got) / c.config.vocab_size;
  }
}

// The O projection inside decode attention's launch (plan decode.o_in_attention, one-sequence steps)
// gives its own launch's bits, on a model with 8 KV heads (the O projection's 8 K pieces are the head
// groups) and head_dim 64, as the 1B shape: after a short prompt (one or two ranks a head group, a
// cluster taking several groups), a prompt whose groups take all 8 ranks, and one past a cluster's
// split (the groups' outputs merged from partials). Alone the target's steps run the fold; beside
// 15 others (16-token launches) they run the O projection's own launch.
TEST(FusedEngine, OProjectionInAttentionGivesItsOwnLaunchBits) {
  FUSELM_REQUIRE_GPU();
  if (!skinny_gemm_clusters_supported()) GTEST_SKIP() << "the fold runs in thread-block clusters";
  TargetCase c;
  c.config.num_heads = 16;
  c.config.num_kv_heads = 8;
  c.model = make_synthetic_model(c.config, false);
  EngineOptions o = options(ExecutionPath::Fused, 16);
  o.max_seq_len = 4096;
  const Plan rules = rule_plan(c, o);
  const DecodeAttentionChoice& a = rules.decode.attention;
  DecodeAttentionPlan attention;
  attention.cluster_ranks = decode_attention_cluster_ranks(a.kernel);
  attention.split_tokens = a.split_tokens;
  const PackedWeight o_weights{nullptr, DType::BF16, c.config.hidden_size,
                               static_cast<int64_t>(c.config.num_heads) * c.config.head_dim, 1};
  const AttentionShape shape{c.config.num_heads, c.config.num_kv_heads, c.config.head_dim, 0.125f};
  if (skinny_rounding_class(rules.decode_gemm(PlanOp::O).variant) != "k8" || !decode_o_fold_fits(shape, attention, o_weights))
    GTEST_SKIP() << "the rules' O projection (" << rules.decode_gemm(PlanOp::O).variant << ") or attention ("
                 << a.kernel << ") cannot take the fold here";
  Plan folded_plan = rules;
  folded_plan.decode.o_in_attention = true;
  auto own = engine_with_plan(c, o, rules), folded = engine_with_plan(c, o, folded_plan);
  std::mt19937 gen(808);
  const std::vector<int32_t> feed = random_tokens(gen, 24, c.config.vocab_size);
  for (int prompt_len : {70, 1000, 8 * a.split_tokens + 100}) {
    ASSERT_LE(prompt_len + static_cast<int>(feed.size()), o.max_seq_len);
    const std::vector<int32_t> prompt = random_tokens(gen, prompt_len, c.config.vocab_size);
    const std::vector<float> want = run_target(*own, prompt, feed, 0, 1);
    for (int others : {0, 15}) {
      const std::vector<float> got = run_target(*folded, prompt, feed, others, 500 + others);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(first_bitwise_difference(want, got), want.size())
          << "prompt " << prompt_len << ", beside " << others << " others: first differing logit at decode step "
          << first_bitwise_difference(want, got) / c.config.vocab_size;
    }
  }
}

// The target run alone on a fresh engine: what the repeat and restart checks below compare.
std::vector<float> fresh_engine_run() {
  const TargetCase c = target_case();
  auto engine = make_cuda_engine(*c.model, options(ExecutionPath::Fused));
  return run_target(*engine, c.prompt, c.feed, 0, 1);
}

// Run only as a child process of the test below: writes fresh_engine_run()'s logits to the file
// FUSELM_RESTART_LOGITS names.
TEST(FusedEngine, DISABLED_WriteLogitsForTheRestartCheck) {
  FUSELM_REQUIRE_GPU();
  const char* path = std::getenv("FUSELM_RESTART_LOGITS");
  if (path == nullptr) GTEST_SKIP() << "run by FusedEngine.RepeatedRunsAndProcessRestartsAreBitwiseEqual";
  const std::vector<float> logits = fresh_engine_run();
  std::FILE* f = std::fopen(path, "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(logits.data(), sizeof(float), logits.size(), f), logits.size());
  ASSERT_EQ(std::fclose(f), 0);
}

// 10 runs in one process (each on a fresh engine: new weights upload, buffers, graphs and cache)
// and 2 runs in new processes of this binary give the same bits at every one of 128 decode steps.
TEST(FusedEngine, RepeatedRunsAndProcessRestartsAreBitwiseEqual) {
  FUSELM_REQUIRE_GPU();
  const std::vector<float> first = fresh_engine_run();
  ASSERT_FALSE(first.empty());
  for (int run = 1; run < 10; ++run) {
    const std::vector<float> again = fresh_engine_run();
    ASSERT_EQ(again.size(), first.size());
    EXPECT_EQ(first_bitwise_difference(first, again), first.size()) << "run " << run + 1 << " of 10 differs";
  }
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) GTEST_SKIP() << "cannot find this test binary (/proc/self/exe) to restart it";
  for (int restart = 1; restart <= 2; ++restart) {
    const std::string path = testing::TempDir() + "fuselm-restart-" + std::to_string(getpid()) + "-" +
                             std::to_string(restart) + ".bin";
    const std::string command = "FUSELM_RESTART_LOGITS='" + path + "' '" + std::string(self, static_cast<size_t>(n)) +
                                "' --gtest_also_run_disabled_tests "
                                "--gtest_filter=FusedEngine.DISABLED_WriteLogitsForTheRestartCheck >/dev/null 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << "the child process failed: " << command;
    std::vector<float> child(first.size());
    std::FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr) << "the child process wrote no logits to " << path;
    const size_t got = std::fread(child.data(), sizeof(float), child.size() + 1, f);
    std::fclose(f);
    std::remove(path.c_str());
    ASSERT_EQ(got, first.size()) << "restart " << restart << " wrote " << got << " logits, expected " << first.size();
    EXPECT_EQ(first_bitwise_difference(first, child), first.size())
        << "process restart " << restart << ": first differing logit at decode step "
        << first_bitwise_difference(first, child) / small_llama().vocab_size;
  }
}

// The target's prompt prefilled in chunks of `chunk` tokens, each step shared with `others` other
// prompts, then `feed` decoded alone. Returns the logits after the prompt and after every step.
std::vector<float> prefill_then_decode(Engine& engine, const std::vector<int32_t>& prompt,
                                       const std::vector<int32_t>& feed, size_t chunk, int others) {
  std::mt19937 gen(77);
  const int vocab = engine.config().vocab_size;
  const int target = engine.add_sequence();
  std::vector<int> other_ids;
  std::vector<std::vector<int32_t>> other_prompts;
  for (int i = 0; i < others; ++i) {
    other_ids.push_back(engine.add_sequence());
    other_prompts.push_back(random_tokens(gen, 3 + 41 * i, vocab));
  }
  std::vector<float> out, logits;
  for (size_t done = 0; done < prompt.size(); done += chunk) {
    const size_t n = std::min(chunk, prompt.size() - done);
    std::vector<SequenceChunk> chunks = {{target, std::span<const int32_t>(prompt.data() + done, n), false}};
    if (done == 0)
      for (int i = 0; i < others; ++i) chunks.push_back({other_ids[i], other_prompts[i], false});
    engine.forward(chunks, logits);
  }
  out.insert(out.end(), logits.begin(), logits.begin() + vocab);
  for (const int32_t& t : feed) {
    SequenceChunk c{target, std::span<const int32_t>(&t, 1), false};
    engine.forward(std::span<const SequenceChunk>(&c, 1), logits);
    out.insert(out.end(), logits.begin(), logits.end());
  }
  engine.remove_sequence(target);
  for (int id : other_ids) engine.remove_sequence(id);
  return out;
}

TEST(FusedEngine, PrefillChunkSizeAndCompanyDoNotChangeResults) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(203);
  const ModelConfig config = small_llama();
  auto model = make_synthetic_model(config, false);
  auto engine = make_cuda_engine(*model, options(ExecutionPath::Fused));
  const std::vector<int32_t> prompt = random_tokens(gen, 600, config.vocab_size);
  const std::vector<int32_t> feed = random_tokens(gen, 32, config.vocab_size);
  const std::vector<float> whole = prefill_then_decode(*engine, prompt, feed, prompt.size(), 0);
  struct Case {
    size_t chunk;
    int others;
  };
  for (const Case& c : {Case{64, 0}, Case{512, 0}, Case{600, 5}, Case{64, 3}}) {
    const std::vector<float> got = prefill_then_decode(*engine, prompt, feed, c.chunk, c.others);
    ASSERT_EQ(got.size(), whole.size());
    const size_t first_diff = first_bitwise_difference(whole, got);
    EXPECT_EQ(first_diff, whole.size()) << "chunks of " << c.chunk << " with " << c.others
                                        << " other prompts: first differing logits row " << first_diff / config.vocab_size
                                        << " (0 = after the prompt)";
  }
}

// submit_sample against forward_sample: the same tokens, step by step, for every sequence, on both
// paths, greedy and sampled. The pipelined run keeps a second step in flight, feeds each step its
// tokens on the device (kPendingToken), and at step 4 prefills another sequence between two steps (so
// the next step takes its tokens from the host), and at step 7 drops a sequence.
TEST(FusedEngine, PipelinedDecodeSamplesWhatOneStepAtATimeDoes) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(204);
  const ModelConfig config = small_llama();
  auto model = make_synthetic_model(config, false);
  const int n = 3, steps = 10;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) prompts.push_back(random_tokens(gen, 20 + 31 * i, config.vocab_size));
  const std::vector<int32_t> extra = random_tokens(gen, 40, config.vocab_size);
  for (ExecutionPath path : {ExecutionPath::Fused, ExecutionPath::Baseline}) {
    for (bool sampled : {false, true}) {
      SCOPED_TRACE(std::string(path == ExecutionPath::Fused ? "fused" : "baseline") + (sampled ? ", sampled" : ", greedy"));
      std::vector<std::vector<int32_t>> streams[2];
      for (int run = 0; run < 2; ++run) {
        const bool pipelined = run == 1;
        auto engine = make_cuda_engine(*model, options(path, 8));
        std::vector<SamplerState> states;
        for (int i = 0; i < n; ++i) {
          SamplingParams p;
          p.temperature = sampled ? 0.9f : 0.0f;
          p.top_k = sampled ? 40 : 0;
          p.seed = 11 + static_cast<uint64_t>(i);
          states.emplace_back(p);
        }
        std::vector<SamplerState*> samplers;
        std::vector<int> seqs;
        std::vector<SequenceChunk> chunks;
        for (int i = 0; i < n; ++i) {
          samplers.push_back(&states[static_cast<size_t>(i)]);
          seqs.push_back(engine->add_sequence());
          chunks.push_back({seqs.back(), prompts[static_cast<size_t>(i)], false});
        }
        std::vector<int32_t> tokens;
        engine->forward_sample(chunks, samplers, tokens);
        streams[run].assign(static_cast<size_t>(n), {});
        for (int i = 0; i < n; ++i) streams[run][static_cast<size_t>(i)].push_back(tokens[static_cast<size_t>(i)]);
        static const int32_t pending = kPendingToken;
        auto live_at = [&](int s) { return s >= 7 ? n - 1 : n; };  // step 7 on runs without the last sequence
        auto step_chunks = [&](int s, bool from_device) {
          std::vector<SequenceChunk> c;
          for (int i = 0; i < live_at(s); ++i)
            c.push_back({seqs[static_cast<size_t>(i)],
                         std::span<const int32_t>(from_device ? &pending : &tokens[static_cast<size_t>(i)], 1), false});
          return c;
        };
        auto step_samplers = [&](int s) { return std::span(samplers.data(), static_cast<size_t>(live_at(s))); };
        if (pipelined) engine->submit_sample(step_chunks(0, false), step_samplers(0));
        for (int s = 0; s < steps; ++s) {
          if (s == 4) {  // another sequence's prompt between two steps
            const int other = engine->add_sequence();
            SequenceChunk c{other, extra, false};
            std::vector<float> logits;
            engine->forward({&c, 1}, logits);
            engine->remove_sequence(other);
          }
          if (pipelined) {
            if (s + 1 < steps) engine->submit_sample(step_chunks(s + 1, true), step_samplers(s + 1));
            engine->wait_sample(tokens);
          } else {
            engine->forward_sample(step_chunks(s, false), step_samplers(s), tokens);
          }
          ASSERT_EQ(tokens.size(), static_cast<size_t>(live_at(s))) << "step " << s;
          for (int i = 0; i < live_at(s); ++i) streams[run][static_cast<size_t>(i)].push_back(tokens[static_cast<size_t>(i)]);
        }
        EXPECT_EQ(engine->steps_in_flight(), 0);
        EXPECT_EQ(engine->sequence_length(seqs[0]), static_cast<int>(prompts[0].size()) + steps);
      }
      EXPECT_EQ(streams[0], streams[1]);
    }
  }
}

// Continuous batching over the fused engine (runtime/batch_runner.h: steps overlapped, decode
// tokens fed on the device, chunked prompts, a stop token, a sampled request): every request gets
// the tokens it gets alone, one step at a time on its own engine.
TEST(FusedEngine, BatchRunnerGivesEachRequestWhatItGetsAlone) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(205);
  const ModelConfig config = small_llama();
  auto model = make_synthetic_model(config, false);
  auto alone_engine = make_cuda_engine(*model, options(ExecutionPath::Fused, 4));
  EngineOptions o = options(ExecutionPath::Fused, 4);
  o.max_prefill_tokens = 64;  // prompts in chunks
  auto engine = make_cuda_engine(*model, o);
  struct Case {
    std::vector<int32_t> prompt;
    int max_new;
    SamplingParams sampling;
    std::vector<int32_t> alone;
  };
  std::vector<Case> cases;
  for (int i = 0; i < 7; ++i) {
    SamplingParams p = BatchRunner::greedy_sampling();
    if (i == 2) {
      p.temperature = 0.8f;
      p.top_k = 30;
      p.seed = 99;
    }
    cases.push_back({random_tokens(gen, 10 + 23 * i, config.vocab_size), 3 + (i * 5) % 9, p, {}});
  }
  for (Case& c : cases) {  // alone: the whole prompt, then one token per call
    const int seq = alone_engine->add_sequence();
    SamplerState sampler(c.sampling);
    SamplerState* samplers[] = {&sampler};
    std::vector<int32_t> sampled;
    SequenceChunk chunk{seq, c.prompt, false};
    for (int k = 0; k < c.max_new; ++k) {
      alone_engine->forward_sample({&chunk, 1}, samplers, sampled);
      c.alone.push_back(sampled[0]);
      chunk.tokens = std::span<const int32_t>(&c.alone.back(), 1);
    }
    alone_engine->remove_sequence(seq);
  }
  BatchRunner runner(*engine, BatchRunner::limits_for(*engine, 4, 64));
  for (size_t i = 0; i < cases.size(); ++i) {
    Request r;
    r.id = static_cast<int64_t>(i);
    r.prompt = cases[i].prompt;
    r.max_new_tokens = cases[i].max_new;
    if (i == 4) r.stop_tokens = {cases[i].alone[1]};  // ends after its second token
    ASSERT_TRUE(runner.submit(std::move(r), cases[i].sampling).ok());
  }
  runner.run_until_idle();
  EXPECT_EQ(engine->steps_in_flight(), 0);
  const std::vector<BatchRunner::Result> results = runner.take_finished();
  ASSERT_EQ(results.size(), cases.size());
  for (const BatchRunner::Result& r : results) {
    const Case& c = cases[static_cast<size_t>(r.id)];
    size_t expected = c.alone.size();
    if (r.id == 4) expected = static_cast<size_t>(std::find(c.alone.begin(), c.alone.end(), c.alone[1]) - c.alone.begin()) + 1;
    EXPECT_EQ(r.tokens, std::vector<int32_t>(c.alone.begin(), c.alone.begin() + static_cast<std::ptrdiff_t>(expected)))
        << "request " << r.id;
  }
  EXPECT_EQ(engine->kv_stats().live_sequences, 0);  // every sequence removed
}

}  // namespace
}  // namespace fuselm
