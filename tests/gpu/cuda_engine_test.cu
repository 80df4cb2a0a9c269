// The CUDA engine end to end on synthetic models, on both paths (fused decode graphs, baseline
// kernels), against a plain fp32 forward pass of the same (dtype-rounded) weights. Tolerance:
// ||logits - ref|| / ||ref|| per row <= 2e-2 in bf16 and 5e-3 in fp16 (activations are rounded to
// the dtype between kernels); top-1 must agree wherever the reference's top two are at least 0.05
// apart.
#include "runtime/cuda/cuda_engine.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <set>

#include "core/error.h"
#include "gpu_test_util.h"
#include "reference_model.h"
#include "runtime/cuda/device_memory.h"

namespace fuselm {
namespace {

using test::gqa4_config;
using test::make_synthetic_model;
using test::ReferenceModel;

// GQA 8, q_dim != hidden, an FFN width that is not a multiple of 8, an odd vocab, llama3 RoPE.
ModelConfig gqa8_config() {
  ModelConfig c;
  c.hidden_size = 320;
  c.num_layers = 3;
  c.num_heads = 8;
  c.num_kv_heads = 1;
  c.head_dim = 64;
  c.intermediate_size = 500;
  c.vocab_size = 777;
  c.max_position_embeddings = 2048;
  c.rope.theta = 500000.0f;
  c.rope.scaling = RopeScaling::Llama3;
  c.rope.factor = 8.0f;
  c.rope.original_max_position = 1024;
  return c;
}

// GQA 1 with head_dim 128.
ModelConfig mha128_config() {
  ModelConfig c;
  c.hidden_size = 256;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.intermediate_size = 512;
  c.vocab_size = 513;
  c.max_position_embeddings = 1024;
  c.tie_word_embeddings = true;
  return c;
}

constexpr ExecutionPath kPaths[] = {ExecutionPath::Fused, ExecutionPath::Baseline};

EngineOptions small_options(DType dtype, ExecutionPath path = ExecutionPath::Fused) {
  EngineOptions o;
  o.device = DeviceKind::Cuda;
  o.dtype = dtype;
  o.path = path;
  o.max_batch = 64;
  o.max_prefill_tokens = 1024;
  o.max_seq_len = 512;
  return o;
}

double tolerance(DType dtype) { return dtype == DType::BF16 ? 2e-2 : 5e-3; }

std::vector<int32_t> random_tokens(std::mt19937& gen, int n, int vocab) {
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = pick(gen);
  return t;
}

// Compares one engine row with one reference row: relative error and (clear) top-1.
void expect_row_close(const float* got, const float* want, int vocab, double tol, const std::string& where) {
  const double err = test::relative_l2(got, want, static_cast<size_t>(vocab));
  EXPECT_LE(err, tol) << where;
  if (test::top2_gap(want, vocab) >= 0.05f)
    EXPECT_EQ(test::argmax(got, vocab), test::argmax(want, vocab)) << where << " (rel err " << err << ")";
}

std::vector<float> forward_one(Engine& engine, int seq, std::span<const int32_t> tokens, bool all_logits) {
  std::vector<float> logits;
  SequenceChunk chunk{seq, tokens, all_logits};
  engine.forward(std::span<const SequenceChunk>(&chunk, 1), logits);
  return logits;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CudaEngine, ReportsMissingDeviceClearly) {
  if (test::has_cuda_device()) GTEST_SKIP() << "a CUDA device is present; this test covers machines without one";
  auto model = make_synthetic_model(gqa4_config(), false);
  const std::string msg = error_of([&] { make_cuda_engine(*model, small_options(DType::BF16)); });
  EXPECT_NE(msg.find("no CUDA device is usable"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
}

// head_dim 8 is outside the fused kernels: the engine says so and decodes on the baseline path.
TEST(CudaEngine, FusedPathFallsBackForModelsItDoesNotCover) {
  FUSELM_REQUIRE_GPU();
  ModelConfig c = gqa4_config();
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 8;
  c.hidden_size = 64;
  auto model = make_synthetic_model(c, false);
  auto engine = make_cuda_engine(*model, small_options(DType::BF16));
  EXPECT_NE(engine->description().find("(fused decode does not support head_dim 8"), std::string::npos)
      << engine->description();
  const int seq = engine->add_sequence();
  const std::vector<int32_t> prompt = {1, 2, 3};
  forward_one(*engine, seq, prompt, false);
  const int32_t next = 4;
  EXPECT_EQ(forward_one(*engine, seq, {&next, 1}, false).size(), static_cast<size_t>(c.vocab_size));
}

TEST(CudaEngine, RefusesUnsupportedDtype) {
  FUSELM_REQUIRE_GPU();
  auto model = make_synthetic_model(gqa4_config(), false);
  const std::string msg = error_of([&] { make_cuda_engine(*model, small_options(DType::F32)); });
  EXPECT_NE(msg.find("(supported: bf16, fp16)"), std::string::npos) << msg;
}

TEST(CudaEngine, PrefillMatchesReference) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(101);
  for (const ModelConfig& config : {gqa4_config(), gqa8_config(), mha128_config()}) {
    auto model = make_synthetic_model(config, false);
    for (DType dtype : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(testing::Message() << "heads=" << config.num_heads << "/" << config.num_kv_heads
                                      << " dtype=" << dtype_name(dtype));
      const ReferenceModel reference(*model, dtype);
      auto engine = make_cuda_engine(*model, small_options(dtype));
      const std::vector<int32_t> prompt = random_tokens(gen, 37, config.vocab_size);
      const int seq = engine->add_sequence();
      const std::vector<float> got = forward_one(*engine, seq, prompt, true);
      const std::vector<float> want = reference.forward(prompt);
      ASSERT_EQ(got.size(), want.size());
      for (size_t t = 0; t < prompt.size(); ++t)
        expect_row_close(got.data() + t * config.vocab_size, want.data() + t * config.vocab_size, config.vocab_size,
                         tolerance(dtype), "position " + std::to_string(t));
      EXPECT_EQ(engine->sequence_length(seq), 37);
    }
  }
}

// Default options: a step of max_prefill_tokens (8192) tokens, two sequences of the model's full 4096.
TEST(CudaEngine, DefaultLimitsTakeAFullStep) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(109);
  const ModelConfig config = gqa4_config();
  auto model = make_synthetic_model(config, false);
  EngineOptions o;
  o.device = DeviceKind::Cuda;
  auto engine = make_cuda_engine(*model, o);
  EXPECT_EQ(engine->max_sequence_length(), 4096);
  const std::vector<int32_t> a = random_tokens(gen, 4096, config.vocab_size), b = random_tokens(gen, 4096, config.vocab_size);
  const int sa = engine->add_sequence(), sb = engine->add_sequence();
  std::vector<SequenceChunk> chunks = {{sa, a, false}, {sb, b, false}};
  std::vector<float> logits;
  engine->forward(chunks, logits);
  ASSERT_EQ(logits.size(), 2u * config.vocab_size);
  const std::vector<float> want = ReferenceModel(*model, DType::BF16).forward(b);
  expect_row_close(logits.data() + config.vocab_size, want.data() + (b.size() - 1) * config.vocab_size,
                   config.vocab_size, tolerance(DType::BF16), "last token of a 4096-token prompt");
}

TEST(CudaEngine, ChunkedPrefillThenDecodeMatchesReference) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(102);
  const ModelConfig config = gqa8_config();
  auto model = make_synthetic_model(config, false);
  for (DType dtype : {DType::BF16, DType::F16}) {
    for (ExecutionPath path : kPaths) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + execution_path_name(path));
      const ReferenceModel reference(*model, dtype);
      auto engine = make_cuda_engine(*model, small_options(dtype, path));
      const std::vector<int32_t> tokens = random_tokens(gen, 300, config.vocab_size);
      const int seq = engine->add_sequence();
      // Chunks of 5, 11 and 250 (crossing many blocks), then 34 decode steps (crossing a split of 256).
      size_t done = 0;
      std::vector<float> want_all = reference.forward(tokens);
      auto check_last = [&](const std::vector<float>& got, size_t length) {
        expect_row_close(got.data(), want_all.data() + (length - 1) * config.vocab_size, config.vocab_size,
                         tolerance(dtype), "length " + std::to_string(length));
      };
      for (size_t chunk : {5, 11, 250}) {
        const std::vector<float> got =
            forward_one(*engine, seq, std::span<const int32_t>(tokens.data() + done, chunk), false);
        ASSERT_EQ(got.size(), static_cast<size_t>(config.vocab_size));
        done += chunk;
        check_last(got, done);
      }
      for (; done < tokens.size(); ++done) check_last(forward_one(*engine, seq, {tokens.data() + done, 1}, false), done + 1);
      EXPECT_EQ(engine->sequence_length(seq), 300);
    }
  }
}

TEST(CudaEngine, RaggedBatchMatchesRunningAlone) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(103);
  const ModelConfig config = gqa4_config();
  auto model = make_synthetic_model(config, false);
  for (ExecutionPath path : kPaths) {
    SCOPED_TRACE(execution_path_name(path));
    auto engine = make_cuda_engine(*model, small_options(DType::BF16, path));
    const int n_seq = 64, vocab = config.vocab_size;
    // Half the sequences already hold a context (they decode one token), half start with a prompt.
    std::vector<std::vector<int32_t>> context(n_seq), next(n_seq);
    std::uniform_int_distribution<int> len(1, 40);
    for (int i = 0; i < n_seq; ++i) {
      if (i % 2 == 0) context[i] = random_tokens(gen, len(gen), vocab);
      next[i] = random_tokens(gen, i % 2 == 0 ? 1 : len(gen), vocab);
    }
    auto run = [&](bool together) {
      std::vector<int> seqs(n_seq);
      for (int i = 0; i < n_seq; ++i) {
        seqs[i] = engine->add_sequence();
        if (!context[i].empty()) forward_one(*engine, seqs[i], context[i], false);
      }
      std::vector<float> out;
      if (together) {
        std::vector<SequenceChunk> chunks;
        for (int i = 0; i < n_seq; ++i) chunks.push_back({seqs[i], next[i], false});
        engine->forward(chunks, out);
      } else {
        for (int i = 0; i < n_seq; ++i) {
          const std::vector<float> one = forward_one(*engine, seqs[i], next[i], false);
          out.insert(out.end(), one.begin(), one.end());
        }
      }
      for (int s : seqs) engine->remove_sequence(s);
      return out;
    };
    const std::vector<float> alone = run(false), batched = run(true);
    ASSERT_EQ(alone.size(), batched.size());
    for (int i = 0; i < n_seq; ++i) {
      const float* a = alone.data() + static_cast<size_t>(i) * vocab;
      const float* b = batched.data() + static_cast<size_t>(i) * vocab;
      EXPECT_EQ(test::argmax(b, vocab), test::argmax(a, vocab)) << "sequence " << i;
      EXPECT_LE(test::relative_l2(b, a, vocab), 1e-2) << "sequence " << i;
    }
    EXPECT_EQ(engine->kv_stats().free_blocks, engine->kv_stats().total_blocks);
  }
}

TEST(CudaEngine, UploadedAndDeviceGeneratedWeightsAgreeBitwise) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(104);
  const ModelConfig config = gqa4_config();
  auto generated = make_synthetic_model(config, false);
  auto uploaded = make_synthetic_model(config, true);  // the same values in f32 host memory
  const std::vector<int32_t> prompt = random_tokens(gen, 20, config.vocab_size);
  std::vector<std::vector<float>> logits;
  for (const Model* m : {generated.get(), uploaded.get()}) {
    auto engine = make_cuda_engine(*m, small_options(DType::BF16));
    logits.push_back(forward_one(*engine, engine->add_sequence(), prompt, true));
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
}

TEST(CudaEngine, InferenceAllocatesNothing) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(105);
  const ModelConfig config = gqa4_config();
  auto model = make_synthetic_model(config, false);
  for (ExecutionPath path : kPaths) {
    SCOPED_TRACE(execution_path_name(path));
    EngineOptions o = small_options(DType::BF16, path);
    o.max_batch = 4;  // 10 all-logits rows go through the LM head in slabs of 4
    auto engine = make_cuda_engine(*model, o);
    const int64_t before = device_allocation_count();
    const int a = engine->add_sequence(), b = engine->add_sequence();
    std::vector<float> logits;
    const std::vector<int32_t> pa = random_tokens(gen, 10, config.vocab_size), pb = random_tokens(gen, 3, config.vocab_size);
    std::vector<SequenceChunk> prefill = {{a, pa, true}, {b, pb, false}};
    engine->forward(prefill, logits);
    EXPECT_EQ(logits.size(), 11u * config.vocab_size);
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    SamplingParams random;
    random.temperature = 0.8f;
    random.top_p = 0.9f;
    random.repetition_penalty = 1.2f;
    SamplerState sa(greedy), sb(random);
    std::vector<SamplerState*> samplers = {&sa, &sb};
    std::vector<int32_t> next = {1, 2};
    for (int step = 0; step < 20; ++step) {
      std::vector<SequenceChunk> chunks = {{a, std::span<const int32_t>(&next[0], 1), false},
                                           {b, std::span<const int32_t>(&next[1], 1), false}};
      std::vector<int32_t> sampled;
      engine->forward_sample(chunks, samplers, sampled);
      next = sampled;
    }
    engine->remove_sequence(a);
    engine->remove_sequence(b);
    EXPECT_EQ(device_allocation_count(), before);
  }
}

TEST(CudaEngine, GreedySamplingOnDeviceIsTheArgmaxAndSeededSamplingRepeats) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(106);
  const ModelConfig config = gqa4_config();
  auto model = make_synthetic_model(config, false);
  for (ExecutionPath path : kPaths) {
    SCOPED_TRACE(execution_path_name(path));
    auto engine = make_cuda_engine(*model, small_options(DType::BF16, path));
    const std::vector<int32_t> prompt = random_tokens(gen, 12, config.vocab_size);

    // Greedy: the device's token is the argmax of the logits forward() returns for the same step.
    const int s1 = engine->add_sequence(), s2 = engine->add_sequence();
    const std::vector<float> logits = forward_one(*engine, s1, prompt, false);
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    SamplerState state(greedy);
    std::vector<SamplerState*> samplers = {&state};
    SequenceChunk chunk{s2, prompt, false};
    std::vector<int32_t> token;
    engine->forward_sample(std::span<const SequenceChunk>(&chunk, 1), samplers, token);
    ASSERT_EQ(token.size(), 1u);
    EXPECT_EQ(token[0], test::argmax(logits.data(), config.vocab_size));
    EXPECT_EQ(state.history, std::vector<int32_t>{token[0]});
    // Decode steps (on the fused path the LM head picks greedy tokens itself): the same, step by step.
    for (int step = 0; step < 6; ++step) {
      const std::vector<int32_t> feed = {token[0]};
      const std::vector<float> step_logits = forward_one(*engine, s1, feed, false);
      SequenceChunk next{s2, feed, false};
      engine->forward_sample(std::span<const SequenceChunk>(&next, 1), samplers, token);
      ASSERT_EQ(token.size(), 1u);
      EXPECT_EQ(token[0], test::argmax(step_logits.data(), config.vocab_size)) << "decode step " << step;
    }

    // Seeded: the same seed gives the same stream, whether alone or next to another sequence.
    SamplingParams p;
    p.temperature = 10.0f;  // the synthetic model's logits spread ~9: flatten them so that draws vary
    p.top_k = 50;
    p.top_p = 0.95f;
    p.seed = 1234;
    auto generate = [&](bool with_neighbour) {
      const int s = engine->add_sequence(), other = engine->add_sequence();
      SamplerState st(p), other_state(p);
      other_state.rng = Rng(999);
      std::vector<int32_t> out, cur(prompt), other_cur = random_tokens(gen, 7, config.vocab_size);
      for (int i = 0; i < 16; ++i) {
        std::vector<SequenceChunk> chunks = {{s, cur, false}};
        std::vector<SamplerState*> ss = {&st};
        if (with_neighbour) {
          chunks.push_back({other, other_cur, false});
          ss.push_back(&other_state);
        }
        std::vector<int32_t> t;
        engine->forward_sample(chunks, ss, t);
        out.push_back(t[0]);
        cur = {t[0]};
        if (with_neighbour) other_cur = {t[1]};
      }
      EXPECT_EQ(st.rng.state(), p.seed + 16);  // one draw per sampled token
      engine->remove_sequence(s);
      engine->remove_sequence(other);
      return out;
    };
    const std::vector<int32_t> alone = generate(false), beside = generate(true);
    EXPECT_EQ(alone, beside);
    EXPECT_GT(std::set<int32_t>(alone.begin(), alone.end()).size(), 1u) << "sampling should not be greedy here";
  }
}

// Greedy sampling with a repetition penalty over a window shorter than the history: the device's
// token (the fused path samples inside its decode graph, reading each row's window at a fixed row
// stride) is what the host sampler picks from the logits of the same step, row by row.
TEST(CudaEngine, PenalizedGreedySamplingMatchesTheHostSampler) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(108);
  const ModelConfig config = gqa4_config();
  auto model = make_synthetic_model(config, false);
  for (ExecutionPath path : kPaths) {
    SCOPED_TRACE(execution_path_name(path));
    auto engine = make_cuda_engine(*model, small_options(DType::BF16, path));
    SamplingParams p;
    p.temperature = 0.0f;
    p.repetition_penalty = 4.0f;  // strong enough to move the argmax off recent tokens
    p.penalty_window = 6;
    constexpr int kRows = 3;
    // Row r: one sequence whose logits come back (forward) and a twin that samples on the device
    // (forward_sample), fed the same tokens.
    std::vector<int> logit_seqs, sample_seqs;
    std::vector<SamplerState> states;
    std::vector<std::vector<int32_t>> next;
    for (int r = 0; r < kRows; ++r) {
      logit_seqs.push_back(engine->add_sequence());
      sample_seqs.push_back(engine->add_sequence());
      states.emplace_back(p);
      const std::vector<int32_t> prompt = random_tokens(gen, 9 + 2 * r, config.vocab_size);
      forward_one(*engine, logit_seqs[r], prompt, false);
      states[r].history = prompt;
      next.push_back(prompt);
    }
    int moved = 0;  // steps where the penalty changed the pick
    for (int step = 0; step < 12; ++step) {
      std::vector<SequenceChunk> logit_chunks, sample_chunks;
      std::vector<SamplerState*> samplers;
      std::vector<SamplerState> before;
      for (int r = 0; r < kRows; ++r) {
        const std::span<const int32_t> feed = step == 0 ? std::span<const int32_t>(next[r])
                                                        : std::span<const int32_t>(next[r]).last(1);
        if (step > 0) logit_chunks.push_back({logit_seqs[r], feed, false});
        sample_chunks.push_back({sample_seqs[r], feed, false});
        samplers.push_back(&states[r]);
        before.push_back(states[r]);
      }
      std::vector<float> logits;
      if (step > 0) engine->forward(logit_chunks, logits);
      std::vector<int32_t> sampled;
      engine->forward_sample(sample_chunks, samplers, sampled);
      ASSERT_EQ(sampled.size(), static_cast<size_t>(kRows));
      if (step == 0) {
        // The prompts' logits came from the prefill; the twins now start decoding in step.
        for (int r = 0; r < kRows; ++r) next[r] = {sampled[r]};
        continue;
      }
      for (int r = 0; r < kRows; ++r) {
        std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(r) * config.vocab_size,
                               logits.begin() + static_cast<std::ptrdiff_t>(r + 1) * config.vocab_size);
        if (test::argmax(row.data(), config.vocab_size) != sampled[r]) ++moved;
        const int32_t want = sample_token(row, before[r]);
        EXPECT_EQ(sampled[r], want) << "step " << step << " row " << r;
        next[r] = {sampled[r]};
      }
    }
    EXPECT_GT(moved, 0) << "the penalty never changed the greedy pick: the test does not cover it";
    for (int r = 0; r < kRows; ++r) {
      engine->remove_sequence(logit_seqs[r]);
      engine->remove_sequence(sample_seqs[r]);
    }
  }
}

TEST(CudaEngine, OutOfBlocksIsAnErrorNamingTheNumbersAndRemovalFreesBlocks) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(107);
  const ModelConfig config = gqa4_config();
  auto model = make_synthetic_model(config, false);
  CudaEngineTuning tuning;
  tuning.max_kv_blocks = 4;  // 64 tokens of 16
  for (ExecutionPath path : kPaths) {
    SCOPED_TRACE(execution_path_name(path));
    auto engine = make_cuda_engine(*model, small_options(DType::BF16, path), tuning);
    EXPECT_EQ(engine->kv_stats().total_blocks, 4);
    EXPECT_EQ(engine->max_sequence_length(), 64);
    const int a = engine->add_sequence(), b = engine->add_sequence();
    forward_one(*engine, a, random_tokens(gen, 40, config.vocab_size), false);  // 3 blocks
    EXPECT_EQ(engine->kv_stats().free_blocks, 1);
    const std::vector<int32_t> pb = random_tokens(gen, 30, config.vocab_size);
    const std::string msg = error_of([&] { forward_one(*engine, b, pb, false); });
    EXPECT_NE(msg.find("needs 2 more blocks of 16 tokens, 1 are free of 4 in total"), std::string::npos) << msg;
    EXPECT_EQ(engine->sequence_length(b), 0);
    EXPECT_EQ(engine->sequence_length(a), 40);
    EXPECT_EQ(engine->kv_stats().free_blocks, 1);
    engine->remove_sequence(a);
    EXPECT_EQ(engine->kv_stats().free_blocks, 4);
    forward_one(*engine, b, pb, false);
    EXPECT_EQ(engine->sequence_length(b), 30);
    const std::string too_long = error_of([&] { forward_one(*engine, b, random_tokens(gen, 35, config.vocab_size), false); });
    EXPECT_NE(too_long.find("would grow to 65 tokens, over the longest this engine holds (64"), std::string::npos)
        << too_long;
  }
}

TEST(CudaEngine, StepErrorsAreClear) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(108);
  const ModelConfig config = gqa4_config();
  auto model = make_synthetic_model(config, false);
  EngineOptions o = small_options(DType::BF16);
  o.max_batch = 2;
  o.max_prefill_tokens = 16;
  o.max_seq_len = 20;
  auto engine = make_cuda_engine(*model, o);
  const int a = engine->add_sequence(), b = engine->add_sequence(), c = engine->add_sequence();
  const std::vector<int32_t> one = {5}, many = random_tokens(gen, 17, config.vocab_size);
  const std::vector<int32_t> bad = {static_cast<int32_t>(config.vocab_size)};
  std::vector<float> logits;
  auto step = [&](std::vector<SequenceChunk> chunks) { return error_of([&] { engine->forward(chunks, logits); }); };
  EXPECT_NE(step({{a, one}, {b, one}, {c, one}}).find("3 chunks, over max_batch 2"), std::string::npos);
  EXPECT_NE(step({{a, many}}).find("17 tokens, over the 16 planned per step"), std::string::npos);
  EXPECT_NE(step({{a, one}, {a, one}}).find("appears twice in one step"), std::string::npos);
  EXPECT_NE(step({{12345, one}}).find("unknown sequence id 12345"), std::string::npos);
  EXPECT_NE(step({{a, bad}}).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(step({{a, {}}}).find("has no tokens"), std::string::npos);
  EXPECT_EQ(engine->sequence_length(a), 0);
  forward_one(*engine, a, std::span<const int32_t>(many.data(), 15), false);
  forward_one(*engine, a, std::span<const int32_t>(many.data(), 5), false);
  EXPECT_NE(step({{a, one}}).find("would grow to 21 tokens"), std::string::npos);
  EXPECT_EQ(engine->sequence_length(a), 20);
}

TEST(CudaEngine, VerbosePrintsTheKvBudget) {
  FUSELM_REQUIRE_GPU();
  auto model = make_synthetic_model(gqa4_config(), false);
  EngineOptions o = small_options(DType::BF16);
  o.verbose = true;
  CudaEngineTuning tuning;
  tuning.max_kv_blocks = 100;
  testing::internal::CaptureStderr();
  auto engine = make_cuda_engine(*model, o, tuning);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("KV cache: 100 blocks × 16 tokens = 1600 tokens; longest sequence that fits: 512"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("fused decode: packed weights"), std::string::npos) << err;
  EXPECT_NE(engine->description().find("cuda fused bf16"), std::string::npos) << engine->description();
}

}  // namespace
}  // namespace fuselm
