#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/goldens.h"
#include "tokenizer/tokenizer.h"

namespace fuselm {
namespace {

using test::stream_decode;

class GgufLlama2Vocab : public testing::TestWithParam<std::string> {};

TEST_P(GgufLlama2Vocab, MatchesSentencePieceGoldens) {
  const std::string rel = "tiny-llama2-gguf/" + GetParam();
  FUSELM_REQUIRE_MODEL(rel);
  auto tok = load_tokenizer(test::model_path(rel));
  EXPECT_EQ(tok->kind(), "gguf-llama");
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
  for (const auto& c : test::tokenizer_goldens("llama2")) {
    EXPECT_EQ(tok->encode(c.text, false), c.ids) << c.text;
    EXPECT_EQ(tok->decode(c.ids), c.text) << c.text;
    EXPECT_EQ(stream_decode(*tok, c.ids), c.text) << c.text;
    auto with_bos = c.ids;
    with_bos.insert(with_bos.begin(), 1);
    EXPECT_EQ(tok->encode(c.text, true), with_bos) << c.text;  // tokenizer.ggml.add_bos_token
    EXPECT_EQ(tok->decode(with_bos), c.text) << c.text;
  }
  auto cases = test::llama_spm_goldens();
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& c : cases) EXPECT_EQ(tok->encode(c.text, false), c.ids) << c.text;
}

INSTANTIATE_TEST_SUITE_P(BothFiles, GgufLlama2Vocab, testing::Values("tiny-llama2-bf16.gguf", "tiny-llama2-q8_0.gguf"));

TEST(GgufLlama2, ParseSpecialAndAgreementWithSentencePiece) {
  FUSELM_REQUIRE_MODEL("tiny-llama2-gguf/tiny-llama2-q8_0.gguf");
  FUSELM_REQUIRE_MODEL("llama2-tokenizer/tokenizer.model");
  auto gguf = load_tokenizer(test::model_path("tiny-llama2-gguf/tiny-llama2-q8_0.gguf"));
  auto spm = load_tokenizer(test::model_path("llama2-tokenizer/tokenizer.model"));
  EXPECT_EQ(gguf->encode("<s>Hi</s> there", false, true), spm->encode("<s>Hi</s> there", false, true));
  EXPECT_EQ(gguf->encode("<s>Hi", false, false), spm->encode("<s>Hi", false, false));
  for (int32_t id = 0; id < 32000; id += 7) EXPECT_EQ(gguf->token_bytes(id), spm->token_bytes(id)) << id;
}

TEST(GgufFileErrors, ConfigJsonIsNotATokenizer) {
  FUSELM_REQUIRE_MODEL("tiny-llama2/config.json");
  EXPECT_THROW(load_tokenizer(test::model_path("tiny-llama2/config.json")), Error);
}

}  // namespace
}  // namespace fuselm
