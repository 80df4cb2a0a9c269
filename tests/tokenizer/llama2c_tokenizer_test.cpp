#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/goldens.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace fuselm {
namespace {

using test::stream_decode;
using test::write_temp;

TEST(Llama2cTokenizer, MatchesSentencePieceGoldens) {
  FUSELM_REQUIRE_MODEL("llama2-tokenizer/tokenizer.bin");
  auto tok = load_tokenizer(test::model_path("llama2-tokenizer/tokenizer.bin"));
  EXPECT_EQ(tok->kind(), "llama2c");
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
  for (const auto& c : test::tokenizer_goldens("llama2")) {
    EXPECT_EQ(tok->encode(c.text, false), c.ids) << c.text;
    EXPECT_EQ(tok->decode(c.ids), c.text) << c.text;
    EXPECT_EQ(stream_decode(*tok, c.ids), c.text) << c.text;
  }
}

TEST(Llama2cTokenizer, MatchesLlamaCppSpmGoldens) {
  FUSELM_REQUIRE_MODEL("llama2-tokenizer/tokenizer.bin");
  auto tok = load_tokenizer(test::model_path("llama2-tokenizer/tokenizer.bin"));
  auto cases = test::llama_spm_goldens();
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& c : cases) EXPECT_EQ(tok->encode(c.text, false), c.ids) << c.text;
}

TEST(Llama2cTokenizer, BosAndLeadingSpaceAsRunC) {
  FUSELM_REQUIRE_MODEL("llama2-tokenizer/tokenizer.bin");
  auto tok = load_tokenizer(test::model_path("llama2-tokenizer/tokenizer.bin"));
  EXPECT_EQ(tok->encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(tok->encode("", true), (std::vector<int32_t>{1}));
  // run.c drops the space of the token after BOS; later tokens keep theirs.
  std::vector<int32_t> ids{1, 15043, 3186};
  EXPECT_EQ(tok->decode(ids), "Hello world");
  EXPECT_EQ(tok->token_bytes(3186), " world");
  EXPECT_EQ(tok->token_bytes(13), "\n");  // <0x0A>
  EXPECT_EQ(tok->token_text(13), "<0x0A>");
}

TEST(Llama2cTokenizer, Tok512PieceSequence) {
  FUSELM_REQUIRE_MODEL("tinyllamas-tok512/tok512.bin");
  auto tok = load_tokenizer(test::model_path("tinyllamas-tok512/tok512.bin"));
  EXPECT_EQ(tok->vocab_size(), 512);
  const std::string text = "Once upon a time, there was a little girl named Lily.";
  auto ids = tok->encode(text, false);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(tok->token_text(id));
  // SOURCES.md: ▁Once|▁upon|▁a|▁time|,|▁there|▁was|▁a|▁little|▁g|ir|l|▁named|▁Lily|. (llama2.c
  // stores ▁ as a space).
  std::vector<std::string> expected{" Once", " upon", " a", " time", ",", " there", " was", " a",
                                    " little", " g", "ir", "l", " named", " Lily", "."};
  EXPECT_EQ(pieces, expected);
  EXPECT_EQ(tok->token_text(259), " t");
  EXPECT_EQ(tok->token_text(317), " Lily");
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(Llama2cTokenizer, AidreamsVocabDecodesReferenceGeneration) {
  FUSELM_REQUIRE_MODEL("aidreams260K/tok512.bin");
  auto tok = load_tokenizer(test::model_path("aidreams260K/tok512.bin"));
  EXPECT_EQ(tok->vocab_size(), 512);
  // The reference greedy ids from SOURCES.md, BOS first.
  std::vector<int32_t> ids{1,   319, 459, 355, 260, 275, 429, 339, 315, 374, 327, 446, 262, 421, 392, 275, 280,
                           269, 440, 270, 283, 446, 299, 303, 266, 358, 430, 312, 379, 441, 260, 446, 262};
  const std::string text = "\"Echoes of vectors unfold, a gentle hum of precision, as I sense the nodes, a";
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_EQ(stream_decode(*tok, ids), text);
  EXPECT_EQ(tok->decode(tok->encode(text, true)), text);
}

TEST(Llama2cTokenizer, ByteFallbackForUnknownCharacters) {
  FUSELM_REQUIRE_MODEL("tinyllamas-tok512/tok512.bin");
  auto tok = load_tokenizer(test::model_path("tinyllamas-tok512/tok512.bin"));
  // "中" is not a tok512 piece: its UTF-8 bytes E4 B8 AD become <0xE4><0xB8><0xAD> (id = byte + 3).
  auto ids = tok->encode("中", false);
  ASSERT_EQ(ids.size(), 4u);  // dummy-prefix space first
  EXPECT_EQ(ids[1], 0xE4 + 3);
  EXPECT_EQ(ids[2], 0xB8 + 3);
  EXPECT_EQ(ids[3], 0xAD + 3);
  EXPECT_EQ(tok->decode(ids), "中");
  // A stream never emits part of "中".
  StreamDecoder stream(*tok);
  std::string out;
  for (size_t i = 0; i + 1 < ids.size(); ++i) out += stream.push(ids[i]);
  EXPECT_EQ(out.find('\xE4'), std::string::npos);
  out += stream.push(ids.back());
  EXPECT_EQ(out, "中");
}

TEST(Llama2cTokenizer, TruncatedFileIsAClearError) {
  FUSELM_REQUIRE_MODEL("tinyllamas-tok512/tok512.bin");
  std::string bytes = read_text_file(test::model_path("tinyllamas-tok512/tok512.bin"));
  std::string path = write_temp("truncated_tok512.bin", bytes.substr(0, bytes.size() - 3));
  try {
    load_tokenizer(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_tokenizer(write_temp("empty.bin", "")), Error);
  EXPECT_THROW(load_tokenizer(write_temp("lfs.bin", "version https://git-lfs.github.com/spec/v1\noid sha256:abc\n")),
               Error);
}

TEST(Llama2cTokenizer, RejectsOutOfRangeIds) {
  FUSELM_REQUIRE_MODEL("tinyllamas-tok512/tok512.bin");
  auto tok = load_tokenizer(test::model_path("tinyllamas-tok512/tok512.bin"));
  std::vector<int32_t> ids{5, 512};
  EXPECT_THROW(tok->decode(ids), Error);
  EXPECT_THROW(tok->token_bytes(-1), Error);
}

}  // namespace
}  // namespace fuselm
