#include "runtime/cpu_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <cstring>

#include "core/error.h"
#include "runtime/tiny_model.h"

namespace fuselm {
namespace {

using test::reference_logits;
using test::tiny_config;
using test::tiny_model;

std::vector<int32_t> prompt(int n, int salt = 0) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + salt * 11 + 5) % 97);
  return ids;
}

// ‖a − b‖ / ‖b‖ over two equally long rows.
double relative_error(const float* a, const double* b, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / norm);
}

// Prefills `tokens` as one chunk with all_logits and returns the logits.
std::vector<float> prefill(Engine& engine, int seq, std::span<const int32_t> tokens, bool all_logits = true) {
  SequenceChunk chunk{seq, tokens, all_logits};
  std::vector<float> logits;
  engine.forward({&chunk, 1}, logits);
  return logits;
}

TEST(CpuEngine, MatchesADoublePrecisionReference) {
  // fp32 accumulation over rows of at most 48 values: agreement to ~1e-6 relative is expected.
  constexpr double kTolerance = 1e-5;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    auto model = tiny_model(tiny_config(), dtype);
    auto engine = make_cpu_engine(*model, {});
    const auto tokens = prompt(20);
    const auto logits = prefill(*engine, engine->add_sequence(), tokens);
    const auto ref = reference_logits(*model, tokens);
    const size_t vocab = 97;
    ASSERT_EQ(logits.size(), tokens.size() * vocab);
    for (size_t t = 0; t < tokens.size(); ++t)
      EXPECT_LE(relative_error(&logits[t * vocab], &ref[t * vocab], vocab), kTolerance)
          << "dtype " << dtype_name(dtype) << " position " << t;
  }
}

TEST(CpuEngine, TiedEmbeddingsAndScaledRope) {
  ModelConfig c = tiny_config();
  c.tie_word_embeddings = true;
  c.rope.theta = 500000.0f;
  auto model = tiny_model(c);
  auto engine = make_cpu_engine(*model, {});
  const auto tokens = prompt(12, 3);
  const auto logits = prefill(*engine, engine->add_sequence(), tokens);
  const auto ref = reference_logits(*model, tokens);
  for (size_t t = 0; t < tokens.size(); ++t) EXPECT_LE(relative_error(&logits[t * 97], &ref[t * 97], 97), 1e-5);
}

TEST(CpuEngine, Bf16RopeFrequenciesAreHonoured) {
  auto exact = tiny_model();
  auto rounded = tiny_model();
  rounded->config.rope.bf16_inv_freq = true;
  const auto tokens = prompt(40, 6);  // late positions make the frequency rounding visible
  auto e_exact = make_cpu_engine(*exact, {});
  auto e_rounded = make_cpu_engine(*rounded, {});
  const auto a = prefill(*e_exact, e_exact->add_sequence(), tokens);
  const auto b = prefill(*e_rounded, e_rounded->add_sequence(), tokens);
  const auto ref_rounded = reference_logits(*rounded, tokens);
  const auto ref_exact = reference_logits(*exact, tokens);
  const size_t last = (tokens.size() - 1) * 97;
  EXPECT_LE(relative_error(&b[last], &ref_rounded[last], 97), 1e-5);
  EXPECT_LE(relative_error(&a[last], &ref_exact[last], 97), 1e-5);
  EXPECT_GT(relative_error(&a[last], &ref_rounded[last], 97), 1e-4);  // the option changes the function
}

TEST(CpuEngine, KvCachedDecodeEqualsFullRecompute) {
  auto model = tiny_model();
  auto engine = make_cpu_engine(*model, {});
  const auto tokens = prompt(30, 1);
  const auto ref = reference_logits(*model, tokens);
  const int seq = engine->add_sequence();
  prefill(*engine, seq, std::span(tokens).first(10), false);
  for (size_t i = 10; i < tokens.size(); ++i) {
    const auto logits = prefill(*engine, seq, std::span(tokens).subspan(i, 1));
    ASSERT_EQ(logits.size(), 97u);
    EXPECT_LE(relative_error(logits.data(), &ref[i * 97], 97), 1e-5) << "decode position " << i;
  }
  EXPECT_EQ(engine->sequence_length(seq), 30);
}

TEST(CpuEngine, ChunkedPrefillEqualsOneShotPrefill) {
  auto model = tiny_model();
  auto engine = make_cpu_engine(*model, {});
  const auto tokens = prompt(25, 2);
  const auto one_shot = prefill(*engine, engine->add_sequence(), tokens);

  const int seq = engine->add_sequence();
  std::vector<float> chunked;
  const std::vector<size_t> bounds = {0, 7, 8, 19, 25};  // chunks of 7, 1, 11 and 6 tokens
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    const auto part = prefill(*engine, seq, std::span(tokens).subspan(bounds[i], bounds[i + 1] - bounds[i]));
    chunked.insert(chunked.end(), part.begin(), part.end());
  }
  ASSERT_EQ(chunked.size(), one_shot.size());
  for (size_t i = 0; i < one_shot.size(); ++i) ASSERT_NEAR(chunked[i], one_shot[i], 1e-5f) << "element " << i;
}

TEST(CpuEngine, RaggedBatchEqualsEachSequenceAlone) {
  auto model = tiny_model();
  const std::vector<std::vector<int32_t>> prompts = {prompt(9, 1), prompt(1, 2), prompt(17, 3), prompt(4, 4)};
  const std::vector<int32_t> next = {3, 50, 96, 0};

  // Alone: prefill each, then one decode step; keep the prefill logits of the last position (or
  // every position for sequence 2) and the decode logits.
  std::vector<std::vector<float>> alone_prefill, alone_decode;
  for (size_t s = 0; s < prompts.size(); ++s) {
    auto engine = make_cpu_engine(*model, {});
    const int seq = engine->add_sequence();
    alone_prefill.push_back(prefill(*engine, seq, prompts[s], s == 2));
    alone_decode.push_back(prefill(*engine, seq, std::span(next).subspan(s, 1)));
  }

  // Batched: step 1 prefills sequences 0 and 2 while sequence 1 and 3 wait; step 2 decodes 0 and 2
  // while 1 and 3 prefill; step 3 decodes 1 and 3.
  auto engine = make_cpu_engine(*model, {});
  std::vector<int> ids;
  for (size_t s = 0; s < prompts.size(); ++s) ids.push_back(engine->add_sequence());
  std::vector<float> logits;
  const size_t v = 97;

  std::vector<SequenceChunk> step1 = {{ids[2], prompts[2], true}, {ids[0], prompts[0], false}};
  engine->forward(step1, logits);
  ASSERT_EQ(logits.size(), (prompts[2].size() + 1) * v);
  for (size_t i = 0; i < alone_prefill[2].size(); ++i) EXPECT_NEAR(logits[i], alone_prefill[2][i], 1e-5f);
  for (size_t i = 0; i < v; ++i) EXPECT_NEAR(logits[prompts[2].size() * v + i], alone_prefill[0][i], 1e-5f);

  std::vector<SequenceChunk> step2 = {{ids[0], std::span(next).subspan(0, 1), false},
                                      {ids[1], prompts[1], false},
                                      {ids[3], prompts[3], false},
                                      {ids[2], std::span(next).subspan(2, 1), true}};
  engine->forward(step2, logits);
  ASSERT_EQ(logits.size(), 4 * v);
  const std::vector<const std::vector<float>*> expected2 = {&alone_decode[0], &alone_prefill[1], &alone_prefill[3],
                                                            &alone_decode[2]};
  for (size_t c = 0; c < 4; ++c)
    for (size_t i = 0; i < v; ++i) EXPECT_NEAR(logits[c * v + i], (*expected2[c])[i], 1e-5f) << "chunk " << c;

  std::vector<SequenceChunk> step3 = {{ids[3], std::span(next).subspan(3, 1), false},
                                      {ids[1], std::span(next).subspan(1, 1), false}};
  engine->forward(step3, logits);
  for (size_t i = 0; i < v; ++i) {
    EXPECT_NEAR(logits[i], alone_decode[3][i], 1e-5f);
    EXPECT_NEAR(logits[v + i], alone_decode[1][i], 1e-5f);
  }
  EXPECT_EQ(engine->sequence_length(ids[2]), 18);
  EXPECT_EQ(engine->sequence_length(ids[1]), 2);
}

TEST(CpuEngine, Q8_0WeightsComputeWithTheirDequantizedValues) {
  // Quantize every matrix of an f32 model to Q8_0; an f32 model holding the dequantized values
  // must give the same logits (only the summation order inside a block differs).
  ModelConfig c = tiny_config();
  c.intermediate_size = 64;  // Q8_0 rows are whole 32-value blocks
  auto q8 = tiny_model(c);
  auto deq = tiny_model(c);
  auto quantize = [&](WeightTensor& t, WeightTensor& d) {
    const float* src = static_cast<const float*>(t.data);
    const int64_t blocks = t.numel() / kQ8_0BlockSize;
    auto* out = reinterpret_cast<uint8_t*>(q8->allocate(static_cast<size_t>(blocks * kQ8_0BlockBytes)));
    for (int64_t b = 0; b < blocks; ++b) {
      float amax = 0;
      for (int i = 0; i < kQ8_0BlockSize; ++i) amax = std::max(amax, std::fabs(src[b * 32 + i]));
      const uint16_t scale_bits = f32_to_f16_bits(amax / 127.0f);
      const float scale = f16_bits_to_f32(scale_bits);
      std::memcpy(out + b * kQ8_0BlockBytes, &scale_bits, 2);
      for (int i = 0; i < kQ8_0BlockSize; ++i)
        reinterpret_cast<int8_t*>(out + b * kQ8_0BlockBytes + 2)[i] =
            static_cast<int8_t>(scale == 0 ? 0 : std::lround(src[b * 32 + i] / scale));
    }
    t.data = out;
    t.dtype = DType::Q8_0;
    auto* values = reinterpret_cast<float*>(deq->allocate(static_cast<size_t>(t.numel()) * 4));
    dequantize_q8_0(out, t.numel(), values);
    d.data = values;
  };
  quantize(q8->weights.token_embedding, deq->weights.token_embedding);
  quantize(q8->weights.lm_head, deq->weights.lm_head);
  for (size_t l = 0; l < q8->weights.layers.size(); ++l) {
    LayerWeights& a = q8->weights.layers[l];
    LayerWeights& b = deq->weights.layers[l];
    quantize(a.wq, b.wq);
    quantize(a.wk, b.wk);
    quantize(a.wv, b.wv);
    quantize(a.wo, b.wo);
    quantize(a.w_gate, b.w_gate);
    quantize(a.w_up, b.w_up);
    quantize(a.w_down, b.w_down);
  }
  const auto tokens = prompt(10, 5);
  auto e1 = make_cpu_engine(*q8, {});
  auto e2 = make_cpu_engine(*deq, {});
  const auto a = prefill(*e1, e1->add_sequence(), tokens);
  const auto b = prefill(*e2, e2->add_sequence(), tokens);
  const auto ref = reference_logits(*deq, tokens);
  for (size_t t = 0; t < tokens.size(); ++t) {
    EXPECT_LE(relative_error(&a[t * 97], &ref[t * 97], 97), 1e-5) << "position " << t;
    EXPECT_LE(relative_error(&b[t * 97], &ref[t * 97], 97), 1e-5) << "position " << t;
  }
}

TEST(CpuEngine, SequencesAreIndependentAndRemovable) {
  auto model = tiny_model();
  auto engine = make_cpu_engine(*model, {});
  const int a = engine->add_sequence();
  const int b = engine->add_sequence();
  EXPECT_NE(a, b);
  const auto tokens = prompt(5);
  const auto la = prefill(*engine, a, tokens, false);
  engine->remove_sequence(a);
  EXPECT_THROW(engine->sequence_length(a), Error);
  EXPECT_EQ(engine->sequence_length(b), 0);
  EXPECT_EQ(prefill(*engine, b, tokens, false), la);
}

TEST(CpuEngine, RejectsBadStepsWithoutChangingAnySequence) {
  auto model = tiny_model();
  EngineOptions options;
  options.max_seq_len = 16;
  options.max_prefill_tokens = 12;
  auto engine = make_cpu_engine(*model, options);
  const int seq = engine->add_sequence();
  const auto ten = prompt(10);
  prefill(*engine, seq, ten, false);
  std::vector<float> logits;
  auto expect_error = [&](std::vector<SequenceChunk> chunks, const std::string& needle) {
    try {
      engine->forward(chunks, logits);
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(engine->sequence_length(seq), 10);
  };
  const auto seven = prompt(7);
  expect_error({{seq, seven, false}}, "would grow to 17 tokens");
  const std::vector<int32_t> bad = {5, 97};
  expect_error({{seq, bad, false}}, "token id 97");
  const std::vector<int32_t> negative = {-1};
  expect_error({{seq, negative, false}}, "token id -1");
  const std::vector<int32_t> one = {4};
  expect_error({{seq, one, false}, {seq, one, false}}, "more than one chunk");
  expect_error({{seq + 100, one, false}}, "no sequence with id");
  expect_error({{seq, std::span<const int32_t>(), false}}, "has no tokens");
  const int other = engine->add_sequence();
  const auto thirteen = prompt(13);
  try {
    engine->forward(std::vector<SequenceChunk>{{other, thirteen, false}}, logits);
    ADD_FAILURE() << "a 13-token step passed a 12-token max_prefill_tokens";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_prefill_tokens"), std::string::npos) << e.what();
  }
}

TEST(CpuEngine, ModelMaxPositionsLimitsSequences) {
  ModelConfig c = tiny_config();
  c.max_position_embeddings = 8;
  auto model = tiny_model(c);
  EngineOptions options;
  options.max_seq_len = 100;  // larger than the model's: the model's limit wins
  auto engine = make_cpu_engine(*model, options);
  const int seq = engine->add_sequence();
  const auto eight = prompt(8);
  prefill(*engine, seq, eight, false);
  const std::vector<int32_t> one = {1};
  EXPECT_THROW(prefill(*engine, seq, one), Error);
}

TEST(CpuEngine, UnmaterializedSyntheticWeightsAreAClearError) {
  auto model = tiny_model(tiny_config(), DType::BF16, /*materialize=*/false);
  try {
    make_cpu_engine(*model, {});
    FAIL() << "engine built on weights without host data";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("materialize_synthetic"), std::string::npos) << e.what();
  }
}

TEST(CpuEngine, WrongTensorShapeIsAClearError) {
  auto model = tiny_model();
  model->weights.layers[1].wk.shape = {8, 32};
  try {
    make_cpu_engine(*model, {});
    FAIL() << "engine accepted a wrong shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer1.wk"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[16, 32]"), std::string::npos) << e.what();
  }
}

TEST(CpuEngine, ForwardSampleGreedyPicksTheArgmax) {
  auto model = tiny_model();
  auto engine = make_cpu_engine(*model, {});
  const int a = engine->add_sequence(), b = engine->add_sequence();
  const auto pa = prompt(6, 1), pb = prompt(3, 2);
  const auto ref_a = reference_logits(*model, pa), ref_b = reference_logits(*model, pb);
  auto argmax_last = [](const std::vector<double>& ref, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < 97; ++i)
      if (ref[(n - 1) * 97 + i] > ref[(n - 1) * 97 + best]) best = i;
    return static_cast<int32_t>(best);
  };
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplerState sa(greedy), sb(greedy);
  std::vector<SamplerState*> samplers = {&sa, &sb};
  std::vector<SequenceChunk> chunks = {{a, pa, true}, {b, pb, false}};
  std::vector<int32_t> out;
  engine->forward_sample(chunks, samplers, out);
  EXPECT_EQ(out, (std::vector<int32_t>{argmax_last(ref_a, 6), argmax_last(ref_b, 3)}));
}

// Decodes `steps` tokens for every sequence from `first` (one token each), one forward_sample at
// a time; returns the tokens step by step.
std::vector<std::vector<int32_t>> decode_one_at_a_time(Engine& engine, std::span<const int> seqs,
                                                       std::vector<int32_t> tokens,
                                                       std::span<SamplerState* const> samplers, int steps) {
  std::vector<std::vector<int32_t>> out;
  for (int s = 0; s < steps; ++s) {
    std::vector<SequenceChunk> chunks;
    for (size_t i = 0; i < seqs.size(); ++i) chunks.push_back({seqs[i], std::span<const int32_t>(&tokens[i], 1), false});
    engine.forward_sample(chunks, samplers, tokens);
    out.push_back(tokens);
  }
  return out;
}

// The same with submit_sample: step s + 1 submitted (taking kPendingToken) before the wait for step s.
std::vector<std::vector<int32_t>> decode_submitted(Engine& engine, std::span<const int> seqs,
                                                   std::vector<int32_t> tokens,
                                                   std::span<SamplerState* const> samplers, int steps) {
  static const int32_t pending = kPendingToken;
  std::vector<SequenceChunk> first, next;
  for (size_t i = 0; i < seqs.size(); ++i) {
    first.push_back({seqs[i], std::span<const int32_t>(&tokens[i], 1), false});
    next.push_back({seqs[i], std::span<const int32_t>(&pending, 1), false});
  }
  std::vector<std::vector<int32_t>> out;
  engine.submit_sample(first, samplers);
  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps) engine.submit_sample(next, samplers);
    EXPECT_EQ(engine.steps_in_flight(), s + 1 < steps ? 2 : 1);
    std::vector<int32_t> t;
    engine.wait_sample(t);
    out.push_back(t);
  }
  EXPECT_EQ(engine.steps_in_flight(), 0);
  return out;
}

TEST(CpuEngine, SubmittedStepsSampleWhatForwardSampleDoes) {
  auto model = tiny_model();
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 20;
  std::vector<std::vector<int32_t>> results[2];
  std::vector<int32_t> histories[2][2];
  for (int run = 0; run < 2; ++run) {
    auto engine = make_cpu_engine(*model, {});
    const int seqs[2] = {engine->add_sequence(), engine->add_sequence()};
    p.seed = 5;
    SamplerState s0(p);
    p.seed = 6;
    SamplerState s1(p);
    std::vector<SamplerState*> samplers = {&s0, &s1};
    const auto p0 = prompt(5, 1), p1 = prompt(8, 2);
    std::vector<SequenceChunk> prefill_chunks = {{seqs[0], p0, false}, {seqs[1], p1, false}};
    std::vector<int32_t> first;
    engine->forward_sample(prefill_chunks, samplers, first);
    results[run] = run == 0 ? decode_one_at_a_time(*engine, seqs, first, samplers, 6)
                            : decode_submitted(*engine, seqs, first, samplers, 6);
    histories[run][0] = s0.history;
    histories[run][1] = s1.history;
    EXPECT_EQ(engine->sequence_length(seqs[0]), 5 + 6);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(histories[0][0], histories[1][0]);
  EXPECT_EQ(histories[0][1], histories[1][1]);
}

TEST(CpuEngine, SubmitSampleRefusesWhatItCannotRun) {
  auto model = tiny_model();
  auto engine = make_cpu_engine(*model, {});
  const int a = engine->add_sequence();
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplerState s(greedy);
  SamplerState* samplers[1] = {&s};
  const int32_t pending = kPendingToken;
  auto expect_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  std::vector<int32_t> out;
  expect_error([&] { engine->wait_sample(out); }, "no step was submitted");
  // A pending token before the sequence has a submitted step, and inside a longer chunk.
  SequenceChunk one{a, std::span<const int32_t>(&pending, 1), false};
  expect_error([&] { engine->submit_sample({&one, 1}, samplers); }, "latest step was not a submitted one");
  const std::vector<int32_t> two = {3, pending};
  SequenceChunk longer{a, two, false};
  expect_error([&] { engine->submit_sample({&longer, 1}, samplers); }, "only a single-token (decode) chunk");
  EXPECT_EQ(engine->steps_in_flight(), 0);
  EXPECT_EQ(engine->sequence_length(a), 0);

  const auto p = prompt(4);
  SequenceChunk first{a, p, false};
  engine->submit_sample({&first, 1}, samplers);
  engine->submit_sample({&one, 1}, samplers);
  expect_error([&] { engine->submit_sample({&one, 1}, samplers); }, "call wait_sample first");
  engine->wait_sample(out);
  engine->wait_sample(out);
  EXPECT_EQ(engine->sequence_length(a), 5);
  // A repetition penalty needs the pending token in its window.
  SamplingParams penalised = greedy;
  penalised.repetition_penalty = 1.2f;
  SamplerState sp(penalised);
  SamplerState* penalised_samplers[1] = {&sp};
  expect_error([&] { engine->submit_sample({&one, 1}, penalised_samplers); }, "repetition penalty");
  // Once another call has fed the sequence, its pending token is stale.
  const int32_t seven = 7;
  SequenceChunk fed{a, std::span<const int32_t>(&seven, 1), false};
  std::vector<float> logits;
  engine->forward({&fed, 1}, logits);
  expect_error([&] { engine->submit_sample({&one, 1}, samplers); }, "latest step was not a submitted one");
  EXPECT_EQ(engine->steps_in_flight(), 0);
}

}  // namespace
}  // namespace fuselm
