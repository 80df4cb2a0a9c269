// GGUF: the shared tiny-llama2 conversions against the HF checkpoint they came from, and crafted
// files for the RoPE row permutation, dtypes, Llama 3 frequency factors and malformed input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "model/gguf_file.h"
#include "model/loader.h"
#include "model_test_util.h"
#include "test_util.h"

namespace fuselm {
namespace {

using test::expect_error;
using test::TempDir;

// The same slot of two models, in order.
std::vector<std::pair<const WeightTensor*, const WeightTensor*>> paired(const Model& a, const Model& b) {
  std::vector<const WeightTensor*> x = a.weights.all(), y = b.weights.all();
  EXPECT_EQ(x.size(), y.size());
  std::vector<std::pair<const WeightTensor*, const WeightTensor*>> out;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) out.emplace_back(x[i], y[i]);
  return out;
}

TEST(GgufLoader, TinyLlama2Bf16Config) {
  FUSELM_REQUIRE_MODEL("tiny-llama2-gguf/tiny-llama2-bf16.gguf");
  const std::string path = test::model_path("tiny-llama2-gguf/tiny-llama2-bf16.gguf");
  auto m = load_model(path);
  const ModelConfig& c = m->config;
  EXPECT_EQ(m->format, ModelFormat::Gguf);
  test::expect_tiny_llama2_config(c);
  EXPECT_TRUE(m->weights.tied());
  EXPECT_EQ(m->tokenizer_hint, path);
  EXPECT_EQ(m->weights.token_embedding.dtype, DType::BF16);
  EXPECT_EQ(m->weights.layers[0].attn_norm.dtype, DType::F32);  // the converter keeps norms in F32
  EXPECT_EQ(m->weights.layers[1].wq.name, "blk.1.attn_q.weight");
  // Unpermuted tensors are used in place.
  const auto& map = *m->mappings.at(0);
  auto in_map = [&](const void* p) {
    auto* b = static_cast<const std::byte*>(p);
    return b >= map.data() && b < map.data() + map.size();
  };
  EXPECT_TRUE(in_map(m->weights.layers[0].wv.data));
  EXPECT_TRUE(in_map(m->weights.token_embedding.data));
  EXPECT_FALSE(in_map(m->weights.layers[0].wq.data));
}

// Every tensor equals the HF F32 tensor rounded to bf16: proves names, shapes, the GGML dimension
// order and the undoing of the converter's q/k permutation.
TEST(GgufLoader, TinyLlama2Bf16EqualsHfRoundedToBf16) {
  FUSELM_REQUIRE_MODEL("tiny-llama2-gguf/tiny-llama2-bf16.gguf");
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  auto gguf = load_model(test::model_path("tiny-llama2-gguf/tiny-llama2-bf16.gguf"));
  auto hf = load_model(test::model_path("tiny-llama2"));
  for (auto [g, h] : paired(*gguf, *hf)) {
    ASSERT_EQ(g->shape, h->shape) << g->name << " vs " << h->name;
    int64_t mismatches = 0;
    for (int64_t i = 0; i < g->numel(); ++i) {
      const float expected = round_to(g->dtype, load_as_f32(h->data, h->dtype, i));
      if (load_as_f32(g->data, g->dtype, i) != expected) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0) << g->name << " differs from " << h->name;
  }
}

TEST(GgufLoader, TinyLlama2Q8_0WithinQuantizationError) {
  FUSELM_REQUIRE_MODEL("tiny-llama2-gguf/tiny-llama2-q8_0.gguf");
  FUSELM_REQUIRE_MODEL("tiny-llama2");
  auto gguf = load_model(test::model_path("tiny-llama2-gguf/tiny-llama2-q8_0.gguf"));
  auto hf = load_model(test::model_path("tiny-llama2"));
  for (auto [g, h] : paired(*gguf, *hf)) {
    ASSERT_EQ(g->shape, h->shape) << g->name;
    EXPECT_EQ(g->dtype, DType::F32) << g->name << " should be dequantized on load";
    // Q8_0 block: scale d = amax/127 stored as f16, values round(x/d): error <= d/2 + 127 * |f16(d) - d|.
    int64_t violations = 0;
    double worst = 0;
    for (int64_t b = 0; b < g->numel(); b += 32) {
      const int64_t end = std::min(g->numel(), b + 32);
      float amax = 0;
      for (int64_t i = b; i < end; ++i) amax = std::max(amax, std::fabs(load_as_f32(h->data, h->dtype, i)));
      const double bound = amax * (1.0 / 254 + 1.0 / 2048) + 1e-12;
      for (int64_t i = b; i < end; ++i) {
        const double err = std::fabs(load_as_f32(g->data, g->dtype, i) - load_as_f32(h->data, h->dtype, i));
        worst = std::max(worst, err / (amax + 1e-30));
        if (err > bound) ++violations;
      }
    }
    EXPECT_EQ(violations, 0) << g->name << " (worst error " << worst << " x block max)";
  }
}

TEST(GgufLoader, TinyLlama2Bf16MatchesGoldenLogits) {
  FUSELM_REQUIRE_MODEL("tiny-llama2-gguf/tiny-llama2-bf16.gguf");
  auto m = load_model(test::model_path("tiny-llama2-gguf/tiny-llama2-bf16.gguf"));
  // The HF weights are bf16-exact, so the bf16 file computes the same function.
  test::expect_matches_golden(*m, test::model_path("tiny-llama2/golden.json"), 1e-5);
}

TEST(GgufLoader, TinyLlama2Q8_0CloseToGoldenLogits) {
  FUSELM_REQUIRE_MODEL("tiny-llama2-gguf/tiny-llama2-q8_0.gguf");
  auto m = load_model(test::model_path("tiny-llama2-gguf/tiny-llama2-q8_0.gguf"));
  // Per-tensor bounds are checked above; here the quantization error carried through the model.
  test::expect_matches_golden(*m, test::model_path("tiny-llama2/golden.json"), 5e-2, 0.8);
}

// ---------------------------------------------------------------- crafted files

// A tiny llama GGUF: hidden 32, 1 layer, 2 heads of 16, 1 KV head, ffn 64, vocab 8. Row r of a
// matrix holds r + (tensor number) * 1000 in every column unless stated.
struct CraftedGguf {
  uint32_t matrix_type = 0;  // 0 F32, 1 F16, 30 BF16, 8 Q8_0
  bool tied = true;
  std::string arch = "llama";
  bool with_rope_freqs = false;
  std::vector<float> rope_freqs;
  std::string skip_tensor;
  std::string skip_key;
  std::vector<uint64_t> ffn_up_ne = {32, 64};
  uint32_t version = 3;

  static constexpr int kHidden = 32, kHeads = 2, kKvHeads = 1, kHeadDim = 16, kFfn = 64, kVocab = 8;

  // Rows as the HF model has them, before the converter's permutation.
  static std::vector<float> hf_matrix(int64_t rows, int64_t cols, int tensor) {
    std::vector<float> v(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = static_cast<float>(r + 1000 * tensor) + 0.5f * (c % 2);
    return v;
  }
  // llama.cpp: w.reshape(n_head, 2, rows/n_head/2, cols).swapaxes(1, 2).reshape(rows, cols).
  static std::vector<float> converter_permute(const std::vector<float>& w, int64_t rows, int64_t cols, int n_head) {
    const int64_t half = rows / n_head / 2;
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t t = 0; t < 2; ++t)
        for (int64_t j = 0; j < half; ++j)
          for (int64_t c = 0; c < cols; ++c)
            out[((h * half + j) * 2 + t) * cols + c] = w[((h * 2 + t) * half + j) * cols + c];
    return out;
  }
  std::string encode(const std::vector<float>& v, uint32_t type) const {
    std::string out;
    if (type == 0) return test::f32_bytes(v);
    if (type == 1 || type == 30) {
      for (float f : v) test::append_pod<uint16_t>(out, type == 1 ? f32_to_f16_bits(f) : f32_to_bf16_bits(f));
      return out;
    }
    // Q8_0: per 32 values a scale of 1/2 (exact in f16) and int8 quants: values must be k/2, |k| <= 127.
    for (size_t b = 0; b < v.size(); b += 32) {
      test::append_pod<uint16_t>(out, f32_to_f16_bits(0.5f));
      for (size_t i = b; i < b + 32; ++i) test::append_pod<int8_t>(out, static_cast<int8_t>(std::lround(v[i] * 2)));
    }
    return out;
  }

  std::string bytes() const {
    test::GgufWriter w;
    w.add_string("general.architecture", arch);
    auto key = [&](const std::string& k, uint32_t v) {
      if (k != skip_key) w.add_u32(k, v);
    };
    key("llama.embedding_length", kHidden);
    key("llama.block_count", 1);
    key("llama.attention.head_count", kHeads);
    key("llama.attention.head_count_kv", kKvHeads);
    key("llama.feed_forward_length", kFfn);
    key("llama.context_length", 256);
    key("llama.rope.dimension_count", kHeadDim);
    w.add_f32("llama.rope.freq_base", 500000.0f);
    w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
    w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "b", "c", "d", "e"});
    key("tokenizer.ggml.bos_token_id", 1);
    key("tokenizer.ggml.eos_token_id", 2);

    int tensor_no = 0;
    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, int permute_heads = 0) {
      std::vector<float> v = hf_matrix(rows, cols, tensor_no++);
      if (matrix_type == 8) {  // keep values representable as k/2
        for (float& f : v) f = std::fmod(f, 60.0f);
      }
      if (permute_heads) v = converter_permute(v, rows, cols, permute_heads);
      std::vector<uint64_t> ne = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
      if (name == "blk.0.ffn_up.weight") ne = ffn_up_ne;
      if (name != skip_tensor) w.add_tensor(name, ne, matrix_type, encode(v, matrix_type));
    };
    auto vector = [&](const std::string& name) {
      if (name != skip_tensor)
        w.add_tensor(name, {kHidden}, 0, test::f32_bytes(test::pattern_values(kHidden, static_cast<float>(tensor_no++))));
    };
    matrix("token_embd.weight", kVocab, kHidden);
    vector("blk.0.attn_norm.weight");
    matrix("blk.0.attn_q.weight", kHeads * kHeadDim, kHidden, kHeads);
    matrix("blk.0.attn_k.weight", kKvHeads * kHeadDim, kHidden, kKvHeads);
    matrix("blk.0.attn_v.weight", kKvHeads * kHeadDim, kHidden);
    matrix("blk.0.attn_output.weight", kHidden, kHeads * kHeadDim);
    vector("blk.0.ffn_norm.weight");
    matrix("blk.0.ffn_gate.weight", kFfn, kHidden);
    matrix("blk.0.ffn_up.weight", kFfn, kHidden);
    matrix("blk.0.ffn_down.weight", kHidden, kFfn);
    vector("output_norm.weight");
    if (!tied) matrix("output.weight", kVocab, kHidden);
    if (with_rope_freqs) w.add_tensor("rope_freqs.weight", {kHeadDim / 2}, 0, test::f32_bytes(rope_freqs));
    return w.bytes(version);
  }
};

void expect_hf_layout(const Model& m, bool q8) {
  const auto& l = m.weights.layers[0];
  auto check = [&](const WeightTensor& t, int tensor_no) {
    std::vector<float> expected = CraftedGguf::hf_matrix(t.rows(), t.cols(), tensor_no);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float e = q8 ? std::fmod(expected[i], 60.0f) : round_to(t.dtype, expected[i]);
      ASSERT_EQ(load_as_f32(t.data, t.dtype, i), e) << t.name << " element " << i;
    }
  };
  // Tensor numbers in file order (norms are numbered too).
  check(m.weights.token_embedding, 0);
  check(l.wq, 2);
  check(l.wk, 3);
  check(l.wv, 4);
  check(l.wo, 5);
  check(l.w_gate, 7);
  check(l.w_up, 8);
  check(l.w_down, 9);
}

TEST(GgufLoader, CraftedUndoesConverterPermutationForEveryDtype) {
  TempDir tmp;
  for (uint32_t type : {0u, 1u, 30u, 8u}) {
    SCOPED_TRACE(testing::Message() << "GGML type " << type);
    CraftedGguf f;
    f.matrix_type = type;
    test::write_bytes(tmp.file("m.gguf"), f.bytes());
    auto m = load_model(tmp.file("m.gguf"));
    const DType expected = type == 0 ? DType::F32 : type == 1 ? DType::F16 : type == 30 ? DType::BF16 : DType::F32;
    EXPECT_EQ(m->weights.layers[0].wq.dtype, expected);
    EXPECT_EQ(m->weights.layers[0].w_up.dtype, expected);
    EXPECT_EQ(m->config.head_dim, 16);
    EXPECT_FLOAT_EQ(m->config.rms_norm_eps, 1e-6f);
    EXPECT_EQ(m->config.vocab_size, 8);
    EXPECT_TRUE(m->weights.tied());
    expect_hf_layout(*m, type == 8);
  }
}

TEST(GgufLoader, CraftedUntiedOutput) {
  TempDir tmp;
  CraftedGguf f;
  f.tied = false;
  test::write_bytes(tmp.file("m.gguf"), f.bytes());
  auto m = load_model(tmp.file("m.gguf"));
  EXPECT_FALSE(m->config.tie_word_embeddings);
  EXPECT_EQ(m->weights.lm_head.name, "output.weight");
  EXPECT_EQ(load_as_f32(m->weights.lm_head.data, DType::F32, 32), 1000.0f * 11 + 1);  // row 1 of tensor 11
}

TEST(GgufLoader, CraftedLlama3RopeFreqs) {
  TempDir tmp;
  CraftedGguf f;
  f.with_rope_freqs = true;
  // What llama.cpp's converter writes for factor 8, low 1, high 4, original context 8192.
  RopeConfig plain{.theta = 500000.0f};
  RopeConfig llama3{.theta = 500000.0f, .scaling = RopeScaling::Llama3, .factor = 8.0f};
  const auto base = rope_inv_freq(plain, 16), scaled = rope_inv_freq(llama3, 16);
  for (int i = 0; i < 8; ++i) f.rope_freqs.push_back(base[i] / scaled[i]);
  test::write_bytes(tmp.file("m.gguf"), f.bytes());
  auto m = load_model(tmp.file("m.gguf"));
  EXPECT_EQ(m->config.rope.scaling, RopeScaling::Llama3);
  EXPECT_FLOAT_EQ(m->config.rope.factor, 8.0f);
  EXPECT_EQ(m->config.rope.original_max_position, 8192);

  f.rope_freqs.assign(8, 1.0f);
  f.rope_freqs[7] = 3.0f;  // not a Llama 3 curve
  test::write_bytes(tmp.file("odd.gguf"), f.bytes());
  expect_error([&] { load_model(tmp.file("odd.gguf")); }, {"rope_freqs.weight", "not Llama 3 scaling"});
}

TEST(GgufLoader, GgufFileApi) {
  TempDir tmp;
  test::write_bytes(tmp.file("m.gguf"), CraftedGguf{}.bytes());
  auto g = GgufFile::open(tmp.file("m.gguf"));
  EXPECT_EQ(g->version(), 3u);
  ASSERT_NE(g->find("general.architecture"), nullptr);
  EXPECT_EQ(g->find("general.architecture")->string(), "llama");
  EXPECT_EQ(g->find("llama.block_count")->as_int(), 1);
  EXPECT_DOUBLE_EQ(g->find("llama.attention.layer_norm_rms_epsilon")->as_double(), static_cast<double>(1e-6f));
  EXPECT_EQ(g->find("tokenizer.ggml.tokens")->array().size(), 8u);
  EXPECT_EQ(g->find("tokenizer.ggml.tokens")->array()[3].string(), "a");
  EXPECT_EQ(g->find("no.such.key"), nullptr);
  EXPECT_THROW(g->find("general.architecture")->as_int(), Error);
  EXPECT_THROW(g->find("llama.block_count")->string(), Error);
  const GgufTensorInfo* t = g->find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{32, 64}));  // rows first
  EXPECT_EQ(t->ggml_type, 0u);
  EXPECT_EQ(t->nbytes, 32u * 64 * 4);
  EXPECT_EQ(t->offset % 32, 0u);
  EXPECT_EQ(g->find_tensor("nope"), nullptr);
}

TEST(GgufLoader, CraftedErrors) {
  TempDir tmp;
  auto load_crafted = [&](const CraftedGguf& f) {
    test::write_bytes(tmp.file("e.gguf"), f.bytes());
    return load_model(tmp.file("e.gguf"));
  };
  {
    CraftedGguf f;
    f.arch = "qwen2";
    expect_error([&] { load_crafted(f); }, {"unsupported GGUF architecture 'qwen2'", "supported: llama"});
  }
  {
    CraftedGguf f;
    f.skip_key = "llama.embedding_length";
    expect_error([&] { load_crafted(f); }, {"required metadata key 'llama.embedding_length' is missing"});
  }
  {
    CraftedGguf f;
    f.skip_tensor = "blk.0.ffn_gate.weight";
    expect_error([&] { load_crafted(f); }, {"tensor 'blk.0.ffn_gate.weight' is missing"});
  }
  {
    CraftedGguf f;
    f.ffn_up_ne = {32, 32};
    expect_error([&] { load_crafted(f); },
                 {"e.gguf", "tensor 'blk.0.ffn_up.weight' has shape [32, 32], expected [64, 32]"});
  }
  {
    CraftedGguf f;
    f.version = 7;
    expect_error([&] { load_crafted(f); }, {"unsupported GGUF version 7", "supported: 3"});
  }
  {
    test::GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 1);
    w.add_u32("llama.block_count", 2);
    test::write_bytes(tmp.file("dup.gguf"), w.bytes());
    expect_error([&] { load_model(tmp.file("dup.gguf")); }, {"metadata key 'llama.block_count' appears twice"});
  }
}

TEST(GgufLoader, UnsupportedTensorType) {
  TempDir tmp;
  test::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.embedding_length", 256);
  w.add_u32("llama.block_count", 1);
  w.add_u32("llama.attention.head_count", 2);
  w.add_u32("llama.feed_forward_length", 256);
  w.add_u32("llama.vocab_size", 2);
  w.add_tensor("token_embd.weight", {256, 2}, 12, std::string(2 * 144, '\0'));
  test::write_bytes(tmp.file("q4k.gguf"), w.bytes());
  expect_error([&] { load_model(tmp.file("q4k.gguf")); },
               {"tensor 'token_embd.weight' has GGML type Q4_K (id 12)", "supported: F32, F16, BF16, Q8_0"});
}

TEST(GgufLoader, TruncatedAndCorruptFiles) {
  TempDir tmp;
  const std::string good = CraftedGguf{}.bytes();
  // Cut inside the last tensor's data.
  test::write_bytes(tmp.file("cut.gguf"), good.substr(0, good.size() - 40));
  expect_error([&] { load_model(tmp.file("cut.gguf")); },
               {"tensor 'output_norm.weight'", "lies outside the file", std::to_string(good.size() - 40) + " bytes",
                "truncated"});
  // Cut inside the tensor descriptors, and so early that the counts cannot fit.
  const size_t cut = good.find("output_norm.weight") + 5;
  test::write_bytes(tmp.file("header.gguf"), good.substr(0, cut));
  expect_error([&] { load_model(tmp.file("header.gguf")); },
               {"truncated GGUF file", "name of tensor", "byte offset", std::to_string(cut) + " bytes"});
  test::write_bytes(tmp.file("short.gguf"), good.substr(0, 100));
  expect_error([&] { load_model(tmp.file("short.gguf")); }, {"more than the file's 100 bytes can hold", "truncated"});

  std::string bad_magic = good;
  bad_magic.replace(0, 4, "GGJT");
  test::write_bytes(tmp.file("magic.gguf"), bad_magic);
  expect_error([&] { load_model(tmp.file("magic.gguf")); }, {"not a GGUF file", "\"GGJT\"", "\"GGUF\""});

  std::string legacy = good;
  legacy.replace(0, 4, "tjgg");
  test::write_bytes(tmp.file("legacy.gguf"), legacy);
  expect_error([&] { load_model(tmp.file("legacy.gguf")); }, {"pre-GGUF llama.cpp file"});

  // An array that claims more elements than the file holds.
  std::string huge = good;
  const std::string key = "tokenizer.ggml.tokens";
  const size_t at = huge.find(key) + key.size() + 4 + 4;  // past the value type and element type
  const uint64_t count = 1ull << 40;
  std::memcpy(huge.data() + at, &count, 8);
  test::write_bytes(tmp.file("huge.gguf"), huge);
  expect_error([&] { load_model(tmp.file("huge.gguf")); }, {"'tokenizer.ggml.tokens' claims 1099511627776 elements"});
}

}  // namespace
}  // namespace fuselm
