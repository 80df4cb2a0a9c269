#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/goldens.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace fuselm {
namespace {

using test::expect_load_error;
using test::stream_decode;
using test::write_temp;

class Llama3Tiktoken : public testing::Test {
 protected:
  void SetUp() override {
    FUSELM_REQUIRE_MODEL("llama3-tokenizer/tokenizer.model");
    tok_ = load_tokenizer(test::model_path("llama3-tokenizer/tokenizer.model"));
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(Llama3Tiktoken, MatchesTiktokenGoldens) {
  EXPECT_EQ(tok_->kind(), "tiktoken");
  EXPECT_EQ(tok_->vocab_size(), 128256);
  EXPECT_EQ(tok_->bos_id(), 128000);
  EXPECT_EQ(tok_->eos_ids(), (std::vector<int32_t>{128001, 128008, 128009}));
  auto cases = test::tokenizer_goldens("llama3");
  ASSERT_EQ(cases.size(), 25u);
  for (const auto& c : cases) {
    EXPECT_EQ(tok_->encode(c.text, false), c.ids) << c.text;
    EXPECT_EQ(tok_->decode(c.ids), c.text) << c.text;
    EXPECT_EQ(stream_decode(*tok_, c.ids), c.text) << c.text;
  }
}

TEST_F(Llama3Tiktoken, SpecialTokens) {
  EXPECT_EQ(tok_->token_id("<|eot_id|>"), 128009);
  EXPECT_EQ(tok_->token_id("<|start_header_id|>"), 128006);
  EXPECT_EQ(tok_->token_id("<|reserved_special_token_247|>"), 128255);
  EXPECT_TRUE(tok_->is_special(128009));
  EXPECT_FALSE(tok_->is_special(9906));
  // Plain text by default; parsed when asked.
  auto plain = tok_->encode("<|eot_id|>", false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok_->decode(plain), "<|eot_id|>");
  EXPECT_EQ(tok_->encode("hi<|eot_id|>", true, true), (std::vector<int32_t>{128000, 6151, 128009}));
  std::vector<int32_t> ids{128000, 9906, 128009};
  EXPECT_EQ(tok_->decode(ids), "<|begin_of_text|>Hello<|eot_id|>");  // tiktoken shows specials
}

TEST_F(Llama3Tiktoken, LongInputsAndInvalidUtf8) {
  std::string spaces(100000, ' ');
  auto ids = tok_->encode(spaces + "x", false);
  EXPECT_EQ(tok_->decode(ids), spaces + "x");
  std::string as(20000, 'a');
  EXPECT_EQ(tok_->decode(tok_->encode(as, false)), as);
  EXPECT_EQ(tok_->decode(tok_->encode("a\xFF" "b", false)), "a\xEF\xBF\xBD" "b");
}

TEST_F(Llama3Tiktoken, StreamHoldsBackSplitCharacters) {
  // 🤗 is split over ids 11410, 97, 245 (bytes F0 9F / A4 / 97): nothing shows until complete.
  StreamDecoder stream(*tok_);
  EXPECT_EQ(stream.push(38623), "emoji");
  EXPECT_EQ(stream.push(11410), " ");
  EXPECT_EQ(stream.push(97), "");
  EXPECT_EQ(stream.push(245), "\xF0\x9F\xA4\x97");
  EXPECT_EQ(stream.push(9468), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");  // an unfinished character at the end
}

TEST(Llama4Tiktoken, LoadsWithFamilySpecialsAndPattern) {
  FUSELM_REQUIRE_MODEL("llama4-tokenizer/tokenizer.model");
  auto tok = load_tokenizer(test::model_path("llama4-tokenizer/tokenizer.model"));
  EXPECT_EQ(tok->vocab_size(), 202048);
  EXPECT_EQ(tok->bos_id(), 200000);
  EXPECT_EQ(tok->token_id("<|header_start|>"), 200005);
  EXPECT_EQ(tok->token_id("<|eot|>"), 200008);
  EXPECT_EQ(tok->token_id("<|image_start|>"), 200080);
  EXPECT_EQ(tok->token_id("<|reasoning_thinking_end|>"), 201143);
  EXPECT_EQ(tok->token_id("<|reserved_special_token_903|>"), 202047);
  for (const auto& c : test::tokenizer_goldens("llama3")) {
    auto ids = tok->encode(c.text, false);
    EXPECT_EQ(tok->decode(ids), c.text) << c.text;
  }
}

TEST(TiktokenFile, MalformedFilesGiveClearErrors) {
  expect_load_error(write_temp("bad_line.tiktoken", "IQ== 0\nIg== 1\nnot base64!! x\n"), "line 3");
  expect_load_error(write_temp("small.tiktoken", "IQ== 0\nIg== 1\n"), "known only for Llama 3");
  expect_load_error(write_temp("gap.tiktoken", "IQ== 0\nIg== 2\n\n"), "not contiguous");
}

// The rank table was sized by the largest rank before the ranks were found to have gaps: one line
// of 14 bytes allocated 512 MB.
TEST(TiktokenFile, ARankPastTheLineCountIsAnErrorBeforeAnyAllocation) {
  const double before = test::peak_resident_mib();
  expect_load_error(write_temp("one_line.tiktoken", "IQ== 16777215\n"),
               "line 1: rank 16777215, but the file has only 1 line(s)");
  EXPECT_LT(test::peak_resident_mib() - before, 64.0);
  expect_load_error(write_temp("past_end.tiktoken", "IQ== 0\nIg== 1\nIw== 3\n"),
               "line 3: rank 3, but the file has only 3 line(s)");
}

}  // namespace
}  // namespace fuselm
