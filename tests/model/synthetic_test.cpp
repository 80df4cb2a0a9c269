#include "model/synthetic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/loader.h"
#include "model_test_util.h"

namespace fuselm {
namespace {

using test::expect_error;

LoadOptions lazy() { return LoadOptions{.materialize_synthetic = false}; }

void expect_synthetic_shapes(const Model& m) {
  const ModelConfig& c = m.config;
  EXPECT_EQ(m.weights.token_embedding.shape, (std::vector<int64_t>{c.vocab_size, c.hidden_size}));
  ASSERT_EQ(static_cast<int>(m.weights.layers.size()), c.num_layers);
  for (const LayerWeights& l : m.weights.layers) {
    EXPECT_EQ(l.wq.shape, (std::vector<int64_t>{c.q_dim(), c.hidden_size}));
    EXPECT_EQ(l.wk.shape, (std::vector<int64_t>{c.kv_dim(), c.hidden_size}));
    EXPECT_EQ(l.wv.shape, (std::vector<int64_t>{c.kv_dim(), c.hidden_size}));
    EXPECT_EQ(l.wo.shape, (std::vector<int64_t>{c.hidden_size, c.q_dim()}));
    EXPECT_EQ(l.w_gate.shape, (std::vector<int64_t>{c.intermediate_size, c.hidden_size}));
    EXPECT_EQ(l.w_up.shape, (std::vector<int64_t>{c.intermediate_size, c.hidden_size}));
    EXPECT_EQ(l.w_down.shape, (std::vector<int64_t>{c.hidden_size, c.intermediate_size}));
    EXPECT_EQ(l.attn_norm.shape, (std::vector<int64_t>{c.hidden_size}));
    EXPECT_EQ(l.ffn_norm.shape, (std::vector<int64_t>{c.hidden_size}));
  }
  EXPECT_EQ(m.weights.lm_head.shape, (std::vector<int64_t>{c.vocab_size, c.hidden_size}));
  EXPECT_EQ(m.weights.tied(), c.tie_word_embeddings);
  for (const WeightTensor* t : m.weights.all()) {
    EXPECT_TRUE(t->synthetic.active) << t->name;
    EXPECT_FALSE(t->has_data()) << t->name;
  }
}

TEST(Synthetic, Llama31_8B) {
  auto m = load_model("synthetic:llama-3.1-8b", lazy());
  const ModelConfig& c = m->config;
  EXPECT_EQ(m->format, ModelFormat::Synthetic);
  EXPECT_EQ(m->source, "synthetic:llama-3.1-8b");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope.theta, 500000.0f);
  EXPECT_EQ(c.rope.scaling, RopeScaling::Llama3);
  EXPECT_FLOAT_EQ(c.rope.factor, 8.0f);
  EXPECT_FLOAT_EQ(c.rope.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.rope.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope.original_max_position, 8192);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128009}));
  expect_synthetic_shapes(*m);
  EXPECT_EQ(m->parameter_count(), 8030261248);  // the published 8.03B
  EXPECT_EQ(m->weight_bytes(), 2 * 8030261248ull);
}

TEST(Synthetic, Llama32_1B) {
  auto m = load_model("synthetic:llama-3.2-1b", lazy());
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_layers, 16);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_FLOAT_EQ(c.rope.factor, 32.0f);
  EXPECT_EQ(c.rope.scaling, RopeScaling::Llama3);
  EXPECT_TRUE(c.tie_word_embeddings);
  expect_synthetic_shapes(*m);
  EXPECT_EQ(m->weights.lm_head.name, m->weights.token_embedding.name);
  EXPECT_EQ(m->weights.lm_head.synthetic.seed, m->weights.token_embedding.synthetic.seed);
  EXPECT_EQ(m->parameter_count(), 1235814400);  // the published 1.24B
}

TEST(Synthetic, Llama2_7B) {
  auto m = load_model("synthetic:llama-2-7b", lazy());
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 11008);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.rope.scaling, RopeScaling::None);
  EXPECT_FLOAT_EQ(c.rope.theta, 10000.0f);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{2}));
  expect_synthetic_shapes(*m);
  EXPECT_EQ(m->parameter_count(), 6738415616);  // the published 6.74B
}

TEST(Synthetic, PresetOverrides) {
  auto m = load_model("synthetic:llama-3.1-8b?vocab=32000&layers=2", lazy());
  EXPECT_EQ(m->config.vocab_size, 32000);
  EXPECT_EQ(m->config.num_layers, 2);
  EXPECT_EQ(m->config.hidden_size, 4096);
  // The preset's special ids do not fit a 32000 vocab.
  EXPECT_EQ(m->config.bos_token_id, -1);
  EXPECT_TRUE(m->config.eos_token_ids.empty());
  expect_synthetic_shapes(*m);

  // head_dim follows hidden / heads unless given.
  auto small = load_model("synthetic:llama-3.1-8b?hidden=1024&layers=1", lazy());
  EXPECT_EQ(small->config.head_dim, 32);
  auto explicit_hd = load_model("synthetic:llama-3.1-8b?hidden=1024&layers=1&head_dim=64", lazy());
  EXPECT_EQ(explicit_hd->config.head_dim, 64);
  EXPECT_EQ(explicit_hd->config.q_dim(), 2048);
  expect_synthetic_shapes(*explicit_hd);
}

TEST(Synthetic, FreeFormMaterialized) {
  const std::string spec =
      "synthetic:llama?hidden=64&layers=2&heads=4&kv_heads=2&ffn=96&vocab=50&max_pos=128&theta=20000&eps=1e-6&tied=1";
  auto m = load_model(spec);
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_FLOAT_EQ(c.rope.theta, 20000.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_TRUE(m->weights.tied());
  for (const WeightTensor* t : m->weights.all()) {
    ASSERT_TRUE(t->has_data()) << t->name;
    EXPECT_EQ(t->dtype, DType::BF16);
    const SyntheticInit& init = t->synthetic;
    for (int64_t i = 0; i < t->numel(); ++i) {
      const float v = load_as_f32(t->data, t->dtype, i);
      // bf16 keeps 8 significant bits.
      const float bound = init.scale + (std::fabs(init.offset) + init.scale) / 128;
      EXPECT_LE(std::fabs(v - init.offset), bound) << t->name << "[" << i << "]";
    }
  }
  EXPECT_EQ(m->weights.lm_head.data, m->weights.token_embedding.data);

  // Deterministic: the same spec gives the same bytes; another seed gives others.
  auto again = load_model(spec);
  auto reseeded = load_model(spec + "&seed=7");
  const WeightTensor& a = m->weights.layers[1].w_down;
  EXPECT_EQ(std::memcmp(a.data, again->weights.layers[1].w_down.data, a.nbytes()), 0);
  EXPECT_NE(std::memcmp(a.data, reseeded->weights.layers[1].w_down.data, a.nbytes()), 0);
  // Distinct tensors of the same shape differ.
  EXPECT_NE(m->weights.layers[0].w_gate.synthetic.seed, m->weights.layers[0].w_up.synthetic.seed);
  EXPECT_NE(m->weights.layers[0].w_gate.synthetic.seed, m->weights.layers[1].w_gate.synthetic.seed);
  EXPECT_NE(std::memcmp(m->weights.layers[0].w_gate.data, m->weights.layers[0].w_up.data,
                        m->weights.layers[0].w_up.nbytes()),
            0);
}

// The init scales keep the residual stream and the logits in a sane range through many layers.
TEST(Synthetic, ActivationsStaySaneThroughManyLayers) {
  auto m = load_model("synthetic:llama?hidden=256&layers=24&heads=8&kv_heads=2&ffn=688&vocab=300");
  std::vector<int32_t> ids;
  for (int i = 0; i < 12; ++i) ids.push_back((i * 37) % 300);
  const std::vector<float> logits = test::reference_logits(*m, ids);
  double ss = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    ss += static_cast<double>(v) * v;
  }
  const double rms = std::sqrt(ss / logits.size());
  EXPECT_GT(rms, 0.05);
  EXPECT_LT(rms, 20.0);
}

TEST(Synthetic, ErrorsListWhatIsValid) {
  expect_error([] { load_model("synthetic:llama-9b", lazy()); },
               {"unknown synthetic preset 'llama-9b'", "llama-3.1-8b", "llama-3.2-1b", "llama-2-7b", "llama ("});
  expect_error([] { load_model("synthetic:llama-3.2-1b?layerz=3", lazy()); },
               {"unknown key 'layerz'", "valid keys: hidden, layers"});
  expect_error([] { load_model("synthetic:llama-3.2-1b?layers=abc", lazy()); },
               {"key 'layers' expects an integer", "'abc'"});
  expect_error([] { load_model("synthetic:llama-3.2-1b?layers=0", lazy()); }, {"key 'layers'", "'0'"});
  expect_error([] { load_model("synthetic:llama-3.2-1b?theta=-5", lazy()); }, {"key 'theta' expects a positive"});
  expect_error([] { load_model("synthetic:llama-3.2-1b?tied=maybe", lazy()); }, {"key 'tied' expects true or false"});
  expect_error([] { load_model("synthetic:llama-3.2-1b?layers", lazy()); }, {"expected key=value", "'layers'"});
  expect_error([] { load_model("synthetic:llama-3.2-1b?layers=1&layers=2", lazy()); }, {"'layers' given twice"});
  expect_error([] { load_model("synthetic:llama?hidden=64&layers=1&heads=4&ffn=32", lazy()); },
               {"needs key 'vocab'"});
  expect_error([] { load_model("synthetic:llama?hidden=64&layers=1&heads=4&kv_heads=3&ffn=32&vocab=9", lazy()); },
               {"multiple of num_key_value_heads"});
  expect_error([] { load_model("synthetic:llama?hidden=60&layers=1&heads=8&ffn=32&vocab=9", lazy()); },
               {"not a multiple of heads", "head_dim"});
}

}  // namespace
}  // namespace fuselm
