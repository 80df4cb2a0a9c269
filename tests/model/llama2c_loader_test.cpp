// llama2.c legacy checkpoints: the trained aidreams260K model (config, greedy output of run.c) and
// small crafted files whose q/k permutation and classifier placement are known.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/loader.h"
#include "model_test_util.h"
#include "test_util.h"

namespace fuselm {
namespace {

using test::expect_error;
using test::TempDir;

TEST(Llama2cLoader, Aidreams260KConfig) {
  FUSELM_REQUIRE_MODEL("aidreams260K/aidreams260K.bin");
  auto m = load_model(test::model_path("aidreams260K/aidreams260K.bin"));
  const ModelConfig& c = m->config;
  EXPECT_EQ(m->format, ModelFormat::Llama2c);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_FLOAT_EQ(c.rope.theta, 10000.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(m->weights.tied());
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{2}));
  EXPECT_EQ(std::filesystem::path(m->tokenizer_hint).filename(), "tok512.bin");
  // 233024 floats after the header, less the two RoPE tables (2 x 128 x 8).
  EXPECT_EQ(m->parameter_count(), 233024 - 2 * 128 * 8);
  // Everything but the permuted q/k is used in place.
  const auto& map = *m->mappings.at(0);
  auto in_map = [&](const void* p) {
    auto* b = static_cast<const std::byte*>(p);
    return b >= map.data() && b < map.data() + map.size();
  };
  EXPECT_TRUE(in_map(m->weights.token_embedding.data));
  EXPECT_TRUE(in_map(m->weights.layers[3].w_down.data));
  EXPECT_FALSE(in_map(m->weights.layers[0].wq.data));
}

// llama2.c's run.c prints this greedy continuation from BOS (SOURCES.md); matching it proves the
// weights, including the q/k permutation to rotate-half RoPE, end to end.
TEST(Llama2cLoader, Aidreams260KGreedyMatchesRunC) {
  FUSELM_REQUIRE_MODEL("aidreams260K/aidreams260K.bin");
  auto m = load_model(test::model_path("aidreams260K/aidreams260K.bin"));
  const std::vector<int32_t> expected = {1,   319, 459, 355, 260, 275, 429, 339, 315, 374, 327,
                                         446, 262, 421, 392, 275, 280, 269, 440, 270, 283, 446,
                                         299, 303, 266, 358, 430, 312, 379, 441, 260, 446, 262};
  std::vector<int32_t> ids = {1};
  while (ids.size() < expected.size()) {
    const std::vector<float> logits = test::reference_logits(*m, ids);
    ids.push_back(test::argmax(logits.data() + (ids.size() - 1) * 512, 512));
  }
  EXPECT_EQ(ids, expected);
}

// A llama2.c file: dim 16, hidden 8, 2 layers, 2 heads (head_dim 8), 1 KV head, vocab 10,
// seq_len 4. Float k of the file (after the header) has value k, so positions are visible.
struct Crafted {
  int dim = 16, hidden = 8, layers = 2, heads = 2, kv_heads = 1, vocab = 10, seq_len = 4;
  bool shared = true;

  int64_t floats() const {
    const int64_t kv_dim = dim / heads * kv_heads, head = dim / heads;
    return vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden) + dim +
           seq_len * head + (shared ? 0 : vocab * dim);
  }
  std::string bytes() const {
    std::string out;
    for (int32_t v : {dim, hidden, layers, heads, kv_heads, shared ? vocab : -vocab, seq_len}) test::append_pod(out, v);
    for (int64_t k = 0; k < floats(); ++k) test::append_pod(out, static_cast<float>(k));
    return out;
  }
};

TEST(Llama2cLoader, CraftedPermutesQkToRotateHalf) {
  TempDir tmp;
  const Crafted f;
  test::write_bytes(tmp.file("model.bin"), f.bytes());
  test::write_bytes(tmp.file("tok10.bin"), "x");
  auto m = load_model(tmp.file("model.bin"));
  EXPECT_EQ(m->config.head_dim, 8);
  EXPECT_EQ(m->tokenizer_hint, tmp.file("tok10.bin"));

  const int64_t dim = 16, kv_dim = 8, vocab = 10, L = 2;
  const int64_t wq0 = vocab * dim + L * dim;  // offset of wq in floats
  const int64_t wk0 = wq0 + L * dim * dim;
  // HF's converter: w.view(heads, rows/heads/2, 2, cols).transpose(1, 2): within a head of 8 rows,
  // HF row r comes from Meta row kFrom[r].
  const int kFrom[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const auto& l1 = m->weights.layers[1];
  for (int64_t r = 0; r < dim; ++r) {
    const int64_t head = r / 8, src_row = head * 8 + kFrom[r % 8];
    for (int64_t col = 0; col < dim; ++col) {
      ASSERT_EQ(load_as_f32(l1.wq.data, DType::F32, r * dim + col), wq0 + dim * dim + src_row * dim + col)
          << "wq row " << r << " col " << col;
    }
  }
  for (int64_t r = 0; r < kv_dim; ++r) {
    for (int64_t col = 0; col < dim; ++col) {
      ASSERT_EQ(load_as_f32(l1.wk.data, DType::F32, r * dim + col), wk0 + kv_dim * dim + kFrom[r] * dim + col)
          << "wk row " << r;
    }
  }
  // v is not permuted; w1 = gate, w3 = up, w2 = down.
  const int64_t wv0 = wk0 + L * kv_dim * dim, wo0 = wv0 + L * kv_dim * dim, ffn_norm0 = wo0 + L * dim * dim;
  const int64_t w1 = ffn_norm0 + L * dim, w2 = w1 + L * 8 * dim, w3 = w2 + L * dim * 8, final_norm = w3 + L * 8 * dim;
  EXPECT_EQ(load_as_f32(l1.wv.data, DType::F32, 0), wv0 + kv_dim * dim);
  EXPECT_EQ(load_as_f32(l1.w_gate.data, DType::F32, 0), w1 + 8 * dim);
  EXPECT_EQ(load_as_f32(l1.w_down.data, DType::F32, 0), w2 + dim * 8);
  EXPECT_EQ(load_as_f32(l1.w_up.data, DType::F32, 0), w3 + 8 * dim);
  EXPECT_EQ(load_as_f32(l1.ffn_norm.data, DType::F32, 0), ffn_norm0 + dim);
  EXPECT_EQ(load_as_f32(m->weights.final_norm.data, DType::F32, 0), final_norm);
  EXPECT_EQ(m->weights.lm_head.data, m->weights.token_embedding.data);
}

TEST(Llama2cLoader, CraftedUnsharedClassifier) {
  TempDir tmp;
  Crafted f;
  f.shared = false;
  test::write_bytes(tmp.file("model.bin"), f.bytes());
  auto m = load_model(tmp.file("model.bin"));
  EXPECT_FALSE(m->weights.tied());
  EXPECT_FALSE(m->config.tie_word_embeddings);
  EXPECT_EQ(m->config.vocab_size, 10);
  EXPECT_EQ(load_as_f32(m->weights.lm_head.data, DType::F32, 0), f.floats() - 10 * 16);
  EXPECT_EQ(m->tokenizer_hint, "");
}

TEST(Llama2cLoader, SizeMismatchesAreExplained) {
  TempDir tmp;
  Crafted f;
  const std::string good = f.bytes();

  test::write_bytes(tmp.file("truncated.bin"), good.substr(0, good.size() - 100));
  expect_error([&] { load_model(tmp.file("truncated.bin")); },
               {"truncated.bin", "dim=16 hidden_dim=8 n_layers=2", "100 bytes are missing", "truncated",
                std::to_string(good.size()) + " bytes"});

  test::write_bytes(tmp.file("extra.bin"), good + std::string(12, '\0'));
  expect_error([&] { load_model(tmp.file("extra.bin")); }, {"12 bytes more than the header implies"});

  // Header says "unshared classifier at the end" but the file stops before it.
  Crafted unshared = f;
  unshared.shared = false;
  std::string missing = unshared.bytes().substr(0, good.size());
  test::write_bytes(tmp.file("missing-classifier.bin"), missing);
  expect_error([&] { load_model(tmp.file("missing-classifier.bin")); }, {"the classifier is missing"});

  std::string bad_header = good;
  const int32_t zero_heads = 0;
  std::memcpy(bad_header.data() + 12, &zero_heads, 4);
  test::write_bytes(tmp.file("bad-header.bin"), bad_header);
  expect_error([&] { load_model(tmp.file("bad-header.bin")); }, {"n_heads = 0", "out of range"});

  test::write_bytes(tmp.file("tiny.bin"), std::string("\x01\x02\x03", 3));
  expect_error([&] { load_model(tmp.file("tiny.bin")); }, {"fewer than the 28-byte header"});

  test::write_bytes(tmp.file("v1.bin"), std::string("ak42\x01\0\0\0", 8) + std::string(300, '\0'));
  expect_error([&] { load_model(tmp.file("v1.bin")); }, {"magic \"ak42\"", "--version 0"});
}

}  // namespace
}  // namespace fuselm
