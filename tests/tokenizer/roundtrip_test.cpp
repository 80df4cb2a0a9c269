// decode(encode(x)) == x for every golden text through every tokenizer that reads the family's
// vocabulary, and streaming decode agrees with whole-sequence decode.
#include <gtest/gtest.h>

#include "tokenizer/goldens.h"
#include "tokenizer/tokenizer.h"

namespace fuselm {
namespace {

using test::stream_decode;

void expect_round_trips(const std::string& rel, const std::vector<test::TokenizerCase>& cases) {
  auto tok = load_tokenizer(test::model_path(rel));
  for (const auto& c : cases) {
    for (bool bos : {false, true}) {
      auto ids = tok->encode(c.text, bos);
      // tiktoken shows special tokens when decoding; the other references hide them.
      std::vector<int32_t> bos_only{tok->bos_id()};
      const std::string expected = (bos ? tok->decode(bos_only) : "") + c.text;
      EXPECT_EQ(tok->decode(ids), expected) << rel << " bos=" << bos << " text=\"" << c.text << "\"";
      EXPECT_EQ(stream_decode(*tok, ids), expected) << rel << " bos=" << bos << " text=\"" << c.text << "\"";
    }
  }
}

std::vector<test::TokenizerCase> llama2_texts() {
  auto cases = test::tokenizer_goldens("llama2");
  auto spm = test::llama_spm_goldens();
  cases.insert(cases.end(), spm.begin(), spm.end());
  return cases;
}

TEST(RoundTrip, Llama2Vocabularies) {
  for (const char* rel : {"llama2-tokenizer/tokenizer.model", "llama2-tokenizer/tokenizer.bin",
                          "llama2-tokenizer/tokenizer.json", "tiny-llama2-gguf/tiny-llama2-bf16.gguf"}) {
    if (!std::filesystem::exists(test::model_path(rel))) GTEST_SKIP() << rel << " not found";
    expect_round_trips(rel, llama2_texts());
  }
}

TEST(RoundTrip, Llama3Vocabularies) {
  for (const char* rel : {"llama3-tokenizer/tokenizer.model", "llama3-tokenizer/tokenizer.json"}) {
    if (!std::filesystem::exists(test::model_path(rel))) GTEST_SKIP() << rel << " not found";
    auto cases = test::tokenizer_goldens("llama3");
    auto spm = test::llama_spm_goldens();
    cases.insert(cases.end(), spm.begin(), spm.end());
    expect_round_trips(rel, cases);
  }
}

}  // namespace
}  // namespace fuselm

namespace fuselm {
namespace {

// Long texts are merged in pieces cut before space runs (exact when no vocabulary piece puts a
// space after another character); the SentencePiece library merges the whole text at once.
TEST(LongText, PiecewiseMergingEqualsSentencePiece) {
  FUSELM_REQUIRE_MODEL("llama2-tokenizer/tokenizer.model");
  std::string text;
  auto cases = llama2_texts();
  for (int round = 0; text.size() < 40000; ++round)
    for (const auto& c : cases) text += c.text + (round % 3 == 0 ? "  " : round % 3 == 1 ? "\n" : " ");
  auto reference = load_tokenizer(test::model_path("llama2-tokenizer/tokenizer.model"))->encode(text, true);
  for (const char* rel : {"llama2-tokenizer/tokenizer.bin", "tiny-llama2-gguf/tiny-llama2-q8_0.gguf"}) {
    auto tok = load_tokenizer(test::model_path(rel));
    EXPECT_EQ(tok->encode(text, true), reference) << rel;
  }
}

}  // namespace
}  // namespace fuselm
