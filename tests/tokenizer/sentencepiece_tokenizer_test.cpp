#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "tokenizer/goldens.h"
#include "tokenizer/tokenizer.h"

namespace fuselm {
namespace {

using test::stream_decode;

class Llama2SentencePiece : public testing::Test {
 protected:
  void SetUp() override {
    FUSELM_REQUIRE_MODEL("llama2-tokenizer/tokenizer.model");
    tok_ = load_tokenizer(test::model_path("llama2-tokenizer/tokenizer.model"));
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(Llama2SentencePiece, MatchesGoldens) {
  EXPECT_EQ(tok_->kind(), "sentencepiece");
  EXPECT_EQ(tok_->vocab_size(), 32000);
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_ids(), std::vector<int32_t>{2});
  for (const auto& c : test::tokenizer_goldens("llama2")) {
    EXPECT_EQ(tok_->encode(c.text, false), c.ids) << c.text;
    EXPECT_EQ(tok_->decode(c.ids), c.text) << c.text;
    EXPECT_EQ(stream_decode(*tok_, c.ids), c.text) << c.text;
    auto with_bos = c.ids;
    with_bos.insert(with_bos.begin(), 1);
    EXPECT_EQ(tok_->encode(c.text, true), with_bos) << c.text;
    EXPECT_EQ(stream_decode(*tok_, with_bos), tok_->decode(with_bos)) << c.text;
  }
}

TEST_F(Llama2SentencePiece, MatchesLlamaCppSpmGoldens) {
  auto cases = test::llama_spm_goldens();
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& c : cases) {
    auto ids = tok_->encode(c.text, false);
    EXPECT_EQ(ids, c.ids) << c.text;
    EXPECT_EQ(stream_decode(*tok_, ids), tok_->decode(ids)) << c.text;
  }
}

TEST_F(Llama2SentencePiece, ParseSpecialSplitsControlTokens) {
  EXPECT_EQ(tok_->encode("<s>Hello", false, true), (std::vector<int32_t>{1, 15043}));
  EXPECT_NE(tok_->encode("<s>Hello", false, false)[0], 1);
  EXPECT_EQ(tok_->token_id("</s>"), 2);
  EXPECT_TRUE(tok_->is_special(2));
}

TEST(Tok512SentencePiece, SamePiecesAsLlama2cFile) {
  FUSELM_REQUIRE_MODEL("tinyllamas-tok512/tok512.model");
  auto spm = load_tokenizer(test::model_path("tinyllamas-tok512/tok512.model"));
  auto bin = load_tokenizer(test::model_path("tinyllamas-tok512/tok512.bin"));
  const std::string text = "Once upon a time, there was a little girl named Lily.";
  EXPECT_EQ(spm->encode(text, true), bin->encode(text, true));
}

TEST(SentencePieceFile, TruncatedModelIsAClearError) {
  FUSELM_REQUIRE_MODEL("tinyllamas-tok512/tok512.model");
  std::string bytes = read_text_file(test::model_path("tinyllamas-tok512/tok512.model"));
  std::string path = testing::TempDir() + "truncated.model";
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_THROW(load_tokenizer(path), Error);
}

}  // namespace
}  // namespace fuselm
