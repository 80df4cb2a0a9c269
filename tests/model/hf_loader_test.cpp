// HF directories: the shared tiny checkpoints (config styles, shards, dtypes, golden logits) and
// small crafted directories for the config variants.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "model/loader.h"
#include "model_test_util.h"
#include "test_util.h"

namespace fuselm {
namespace {

using test::expect_error;
using test::TempDir;
using ::testing::HasSubstr;

bool points_into(const Model& m, const void* p) {
  for (const auto& f : m.mappings) {
    auto* b = reinterpret_cast<const std::byte*>(p);
    if (b >= f->data() && b < f->data() + f->size()) return true;
  }
  return false;
}

TEST(HfLoader, TinyLlama2RopeParametersStyle) {
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  auto m = load_model(test::model_path("tiny-llama2"));
  const ModelConfig& c = m->config;
  EXPECT_EQ(m->format, ModelFormat::HfDirectory);
  test::expect_tiny_llama2_config(c);

  EXPECT_TRUE(m->weights.tied());
  EXPECT_EQ(m->weights.lm_head.data, m->weights.token_embedding.data);
  EXPECT_EQ(m->mappings.size(), 2u);  // two shards
  EXPECT_EQ(m->parameter_count(), 4489856);  // as the index's metadata says
  for (const WeightTensor* t : m->weights.all()) {
    EXPECT_EQ(t->dtype, DType::F32) << t->name;
    EXPECT_TRUE(points_into(*m, t->data)) << t->name << " was copied, expected in place";
  }
  EXPECT_EQ(m->weights.layers[1].wk.shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(m->weights.layers[1].wk.name, "model.layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(m->weights.layers[0].w_down.shape, (std::vector<int64_t>{128, 384}));
  EXPECT_EQ(std::filesystem::path(m->tokenizer_hint).filename(), "llama2-tokenizer");
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(m->tokenizer_hint) / "tokenizer.model"));
}

TEST(HfLoader, TinyLlama3ClassicRopeScalingBf16) {
  FUSELM_REQUIRE_MODEL("tiny-llama3");
  auto m = load_model(test::model_path("tiny-llama3") + "/");
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_heads, 1);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FLOAT_EQ(c.rope.theta, 500000.0f);
  EXPECT_EQ(c.rope.scaling, RopeScaling::Llama3);
  EXPECT_FLOAT_EQ(c.rope.factor, 32.0f);
  EXPECT_FLOAT_EQ(c.rope.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.rope.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope.original_max_position, 8192);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128009}));
  EXPECT_TRUE(m->weights.tied());
  for (const WeightTensor* t : m->weights.all()) {
    EXPECT_EQ(t->dtype, DType::BF16) << t->name;
    EXPECT_TRUE(points_into(*m, t->data)) << t->name;
  }
  EXPECT_EQ(std::filesystem::path(m->tokenizer_hint).filename(), "llama3-tokenizer");
}

TEST(HfLoader, TinyLlama2MatchesGoldenLogits) {
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  auto m = load_model(test::model_path("tiny-llama2"));
  test::expect_matches_golden(*m, test::model_path("tiny-llama2/golden.json"), 1e-5);
}

TEST(HfLoader, TinyLlama3MatchesGoldenLogits) {
  FUSELM_REQUIRE_MODEL("tiny-llama3");
  auto m = load_model(test::model_path("tiny-llama3"));
  test::expect_matches_golden(*m, test::model_path("tiny-llama3/golden.json"), 1e-5);
}

TEST(HfLoader, CraftedSingleFileUntied) {
  TempDir tmp;
  const auto dir = tmp.path() / "model";
  test::write_hf_model(dir, test::tiny_config(), test::tiny_tensors());
  auto m = load_model(dir.string());
  EXPECT_FALSE(m->weights.tied());
  EXPECT_EQ(m->weights.lm_head.name, "lm_head.weight");
  EXPECT_EQ(m->weights.layers[0].wk.shape, (std::vector<int64_t>{4, 8}));
  // Values come through untouched (q_proj was the third tensor written: k = 2).
  EXPECT_EQ(load_as_f32(m->weights.layers[0].wq.data, DType::F32, 5), 2.0f + 5.0f / 1024);
  EXPECT_EQ(load_as_f32(m->weights.lm_head.data, DType::F32, 79), 11.0f + 79.0f / 1024);
  EXPECT_FLOAT_EQ(m->config.rms_norm_eps, 1e-6f);
  EXPECT_EQ(m->tokenizer_hint, "");
}

TEST(HfLoader, ConfigVariants) {
  TempDir tmp;
  auto load_with = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& name) {
    nlohmann::json cfg = test::tiny_config();
    edit(cfg);
    const auto dir = tmp.path() / name;
    test::write_hf_model(dir, cfg, test::tiny_tensors());
    return load_model(dir.string());
  };
  // Classic rope_scaling with "type", eos as a list, null head_dim -> hidden / heads.
  auto linear = load_with(
      [](auto& c) {
        c["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
        c["eos_token_id"] = {2, 7};
        c["head_dim"] = nullptr;
      },
      "linear");
  EXPECT_EQ(linear->config.rope.scaling, RopeScaling::Linear);
  EXPECT_FLOAT_EQ(linear->config.rope.factor, 4.0f);
  EXPECT_EQ(linear->config.eos_token_ids, (std::vector<int>{2, 7}));
  EXPECT_EQ(linear->config.head_dim, 4);

  auto params = load_with(
      [](auto& c) {
        c.erase("rope_theta");
        c["rope_parameters"] = {{"rope_type", "llama3"},       {"rope_theta", 123.0},
                                {"factor", 8.0},               {"low_freq_factor", 1.0},
                                {"high_freq_factor", 4.0},     {"original_max_position_embeddings", 32}};
      },
      "params");
  EXPECT_EQ(params->config.rope.scaling, RopeScaling::Llama3);
  EXPECT_FLOAT_EQ(params->config.rope.theta, 123.0f);
  EXPECT_EQ(params->config.rope.original_max_position, 32);

  auto mistral = load_with(
      [](auto& c) {
        c["architectures"] = {"MistralForCausalLM"};
        c["model_type"] = "mistral";
        c["sliding_window"] = nullptr;
      },
      "mistral");
  EXPECT_EQ(mistral->config.num_layers, 1);
  auto mistral_wide = load_with(
      [](auto& c) {
        c["architectures"] = {"MistralForCausalLM"};
        c["model_type"] = "mistral";
        c["sliding_window"] = 64;
      },
      "mistral-wide");
  EXPECT_EQ(mistral_wide->config.max_position_embeddings, 64);
  expect_error(
      [&] {
        load_with(
            [](auto& c) {
              c["architectures"] = {"MistralForCausalLM"};
              c["model_type"] = "mistral";
              c["sliding_window"] = 16;
            },
            "mistral-window");
      },
      {"sliding_window = 16", "max_position_embeddings = 64", "not implemented"});
  expect_error([&] { load_with([](auto& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; }, "yarn"); },
               {"rope type 'yarn' is not supported", "default, linear, llama3"});
  expect_error([&] { load_with([](auto& c) { c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; }, "l3"); },
               {"needs 'rope_scaling.low_freq_factor'"});
  expect_error([&] { load_with([](auto& c) { c["hidden_act"] = "gelu"; }, "gelu"); }, {"hidden_act \"gelu\""});
  expect_error([&] { load_with([](auto& c) { c["attention_bias"] = true; }, "bias"); }, {"'attention_bias' is true"});
  expect_error([&] { load_with([](auto& c) { c["num_hidden_layers"] = "two"; }, "str"); },
               {"'num_hidden_layers' must be an integer", "\"two\""});
  expect_error([&] { load_with([](auto& c) { c["num_key_value_heads"] = 3; }, "kv3"); },
               {"multiple of num_key_value_heads"});
}

TEST(HfLoader, ShardedWithIndex) {
  TempDir tmp;
  const auto dir = tmp.path() / "sharded";
  std::filesystem::create_directories(dir);
  test::write_bytes((dir / "config.json").string(), test::tiny_config().dump());
  auto tensors = test::tiny_tensors();
  std::vector<test::StEntry> a(tensors.begin(), tensors.begin() + 5), b(tensors.begin() + 5, tensors.end());
  test::write_bytes((dir / "a.safetensors").string(), test::safetensors_bytes(a));
  test::write_bytes((dir / "b.safetensors").string(), test::safetensors_bytes(b));
  nlohmann::json index;
  for (const auto& t : a) index["weight_map"][t.name] = "a.safetensors";
  for (const auto& t : b) index["weight_map"][t.name] = "b.safetensors";
  test::write_bytes((dir / "model.safetensors.index.json").string(), index.dump());
  auto m = load_model(dir.string());
  EXPECT_EQ(m->mappings.size(), 2u);
  EXPECT_EQ(load_as_f32(m->weights.layers[0].wo.data, DType::F32, 0), 5.0f);

  // A shard named by the index but not downloaded.
  std::filesystem::remove(dir / "b.safetensors");
  expect_error([&] { load_model(dir.string()); }, {"shard 'b.safetensors'", "is missing"});
}

TEST(HfLoader, TokenizerLocationFile) {
  TempDir tmp;
  const auto dir = tmp.path() / "model";
  test::write_hf_model(dir, test::tiny_config(), test::tiny_tensors());
  std::filesystem::create_directories(tmp.path() / "shared-tok");
  test::write_bytes((tmp.path() / "shared-tok" / "tokenizer.json").string(), "{}");
  test::write_bytes((dir / "tokenizer-location.json").string(), R"({"tokenizer": "shared-tok"})");
  auto m = load_model(dir.string());
  EXPECT_EQ(std::filesystem::path(m->tokenizer_hint), tmp.path() / "shared-tok");
  // A tokenizer in the model folder itself wins.
  test::write_bytes((dir / "tokenizer.json").string(), "{}");
  EXPECT_EQ(load_model(dir.string())->tokenizer_hint, dir.string());
}

}  // namespace
}  // namespace fuselm
