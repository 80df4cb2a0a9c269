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

TEST(HfLlama3, MatchesTiktokenGoldens) {
  FUSELM_REQUIRE_MODEL("llama3-tokenizer/tokenizer.json");
  auto tok = load_tokenizer(test::model_path("llama3-tokenizer/tokenizer.json"));
  EXPECT_EQ(tok->kind(), "hf-bpe-bytelevel");
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eos_ids()[0], 128009);  // tokenizer_config.json's eos_token
  for (const auto& c : test::tokenizer_goldens("llama3")) {
    EXPECT_EQ(tok->encode(c.text, false), c.ids) << c.text;
    EXPECT_EQ(tok->decode(c.ids), c.text) << c.text;
    EXPECT_EQ(stream_decode(*tok, c.ids), c.text) << c.text;
  }
}

TEST(HfLlama3, SpecialTokensAndTemplate) {
  FUSELM_REQUIRE_MODEL("llama3-tokenizer/tokenizer.json");
  auto tok = load_tokenizer(test::model_path("llama3-tokenizer"));
  EXPECT_EQ(tok->encode("Hello world", true), (std::vector<int32_t>{128000, 9906, 1917}));
  EXPECT_EQ(tok->encode("<|eot_id|>x", false, true), (std::vector<int32_t>{128009, 87}));
  EXPECT_NE(tok->encode("<|eot_id|>x", false, false)[0], 128009);
  std::vector<int32_t> ids{128000, 9906, 128009};
  EXPECT_EQ(tok->decode(ids), "Hello");  // tokenizers' decode skips special tokens
  EXPECT_EQ(tok->token_text(1917), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(tok->token_id("\xC4\xA0world"), 1917);
  EXPECT_FALSE(tok->chat_template().empty());
}

// tokenizer.json for Llama 2 reproduces SentencePiece except where the two BPE formulations part:
// the HF file merges by merge rank while SentencePiece merges by piece score, and the converted
// merge list ranks some whitespace runs differently (see the report in the test output).
TEST(HfLlama2, AgreesWithSentencePieceOnTwentyOneGoldens) {
  FUSELM_REQUIRE_MODEL("llama2-tokenizer/tokenizer.json");
  auto tok = load_tokenizer(test::model_path("llama2-tokenizer/tokenizer.json"));
  EXPECT_EQ(tok->kind(), "hf-bpe");
  EXPECT_EQ(tok->bos_id(), 1);
  int agree = 0;
  for (const auto& c : test::tokenizer_goldens("llama2")) {
    auto ids = tok->encode(c.text, false);
    if (ids == c.ids) {
      ++agree;
    } else {
      std::string pieces;
      for (int32_t id : ids) pieces += tok->token_text(id) + "|";
      std::cout << "differs from SentencePiece: \"" << c.text << "\" -> " << pieces << "\n";
    }
    EXPECT_EQ(tok->decode(ids), c.text) << c.text;
    EXPECT_EQ(stream_decode(*tok, ids), c.text) << c.text;
  }
  EXPECT_EQ(agree, 21);
}

TEST(HfTokenizerFile, MalformedFilesGiveClearErrors) {
  expect_load_error(write_temp("bad.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {"), "not valid JSON");
  expect_load_error(write_temp("nomodel.json", "{\"version\": \"1.0\"}"), "no \"model\"");
  expect_load_error(write_temp("unigram.json", R"({"model": {"type": "Unigram", "vocab": []}})"), "Unigram");
  expect_load_error(write_temp("badmerge.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})"),
               "merge 0");
  expect_load_error(write_temp("badpre.json",
                          R"({"pre_tokenizer": {"type": "BertPreTokenizer"}, "model": {"type": "BPE", "vocab": {}, "merges": []}})"),
               "BertPreTokenizer");
  FUSELM_REQUIRE_MODEL("llama3-tokenizer/tokenizer.json");
  std::string bytes = read_text_file(test::model_path("llama3-tokenizer/tokenizer.json"));
  expect_load_error(write_temp("truncated.json", bytes.substr(0, bytes.size() / 2)), "not valid JSON");
}

TEST(HfTokenizerFile, HostileFilesGiveClearErrors) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
  // An empty Metaspace replacement split the text at the same position forever (unbounded memory);
  // an empty Strip content looped `start` times for every token decoded.
  expect_load_error(write_temp("metaspace.json", R"({"pre_tokenizer": {"type": "Metaspace", "replacement": ""}, )" + model + "}"),
               "empty replacement");
  expect_load_error(write_temp("strip.json",
                          R"({"decoder": {"type": "Strip", "content": "", "start": 2147483647, "stop": 0}, )" + model + "}"),
               "empty content");
  // The tables are sized by the largest id: 2^31 strings (64 GB) from a 100-byte file.
  expect_load_error(write_temp("added.json", R"({"added_tokens": [{"id": 2147483647, "content": "x"}], )" + model + "}"),
               "added token \"x\"'s id must be an integer in 0..16777215, found 2147483647");
  expect_load_error(write_temp("added_float.json", R"({"added_tokens": [{"id": 1e30, "content": "x"}], )" + model + "}"),
               "added token \"x\"'s id must be an integer in 0..16777215, found 1e+30");
  // Copying a sub-tree of the document recursed once per level.
  expect_load_error(write_temp("deep.json", "{\"normalizer\": " + std::string(100000, '[') + std::string(100000, ']') + ", " +
                                           model + "}"),
               "nested more than 512 levels deep");
}

// The id tables were sized by the largest id, whatever the number of tokens: one token with id
// 2^24-1 allocated 1 GB. Ids may leave gaps, as long as most of the table is used.
TEST(HfTokenizerFile, SparseIdsAreAnErrorBeforeTheTablesAreAllocated) {
  const double before = test::peak_resident_mib();
  expect_load_error(write_temp("sparse_vocab.json", R"({"model": {"type": "BPE", "vocab": {"a": 16777215}, "merges": []}})"),
               "token \"a\" has id 16777215, but the file holds 1 tokens (model.vocab and added_tokens), which allow "
               "ids up to 1025");
  EXPECT_LT(test::peak_resident_mib() - before, 64.0);
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}, "merges": []})";
  expect_load_error(write_temp("sparse_added.json",
                          R"({"added_tokens": [{"id": 1032, "content": "<x>"}], )" + model + "}"),
               "token \"<x>\" has id 1032, but the file holds 4 tokens (model.vocab and added_tokens), which allow ids "
               "up to 1031");
  // Added tokens past a gap after the model's vocabulary are fine.
  auto tok = load_tokenizer(write_temp("gap_added.json", R"({"added_tokens": [{"id": 100, "content": "<x>",
                                                                            "special": true}], )" + model + "}"));
  EXPECT_EQ(tok->vocab_size(), 101);
  EXPECT_EQ(tok->token_id("<x>"), 100);
  EXPECT_EQ(tok->token_text(50), "");
}

// Integer fields were read with get<int>(): undefined for 1e30, and 2^64-1 wrapped to -1.
TEST(HfTokenizerFile, IntegerFieldsAreCheckedOnLoad) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1}, "merges": []})";
  expect_load_error(write_temp("huge_id.json", R"({"model": {"type": "BPE", "vocab": {"a": 18446744073709551615},
                                              "merges": []}})"),
               "token \"a\"'s id must be an integer in 0..16777215, found 18446744073709551615");
  expect_load_error(write_temp("strip_float.json",
                          R"({"decoder": {"type": "Strip", "content": " ", "start": 1e30, "stop": 0}, )" + model + "}"),
               "the Strip decoder's 'start' must be an integer in 0..2147483647, found 1e+30");
  expect_load_error(write_temp("strip_negative.json",
                          R"({"decoder": {"type": "Strip", "content": " ", "start": 1, "stop": -1}, )" + model + "}"),
               "the Strip decoder's 'stop' must be an integer in 0..2147483647, found -1");
  auto post = [&](const std::string& ids) {
    return R"({"post_processor": {"type": "TemplateProcessing",
               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
               "special_tokens": {"<s>": {"id": "<s>", "ids": )" + ids + R"(, "tokens": ["<s>"]}}}, )" + model + "}";
  };
  // Outside the vocabulary, the ids were found only when a prompt was encoded with them.
  expect_load_error(write_temp("template_id.json", post("[2]")),
               "post_processor special token \"<s>\"'s id (the vocabulary has 2 tokens) must be an integer in 0..1, "
               "found 2");
  expect_load_error(write_temp("template_float.json", post("[1e30]")), "must be an integer in 0..1, found 1e+30");
  expect_load_error(write_temp("template_string.json", post("[\"1\"]")), "must be an integer in 0..1, found \"1\"");
  EXPECT_EQ(load_tokenizer(write_temp("template_ok.json", post("[1]")))->encode("a", true),
            (std::vector<int32_t>{1, 0}));
  expect_load_error(write_temp("bert.json", R"({"post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 101],
                                          "sep": ["[SEP]", 1]}, )" + model + "}"),
               "post_processor special token \"[CLS]\"'s id (the vocabulary has 2 tokens) must be an integer in 0..1, "
               "found 101");
}

TEST(HfTokenizerFile, SmallByteLevelTokenizerWithMetaspaceAndAddedTokens) {
  // A GPT-2 style file: ByteLevel with its own regex and a prefix space, merges as pairs.
  const std::string json = R"({
    "added_tokens": [{"id": 7, "content": "<|end|>", "special": true, "lstrip": true, "rstrip": false,
                      "normalized": false, "single_word": false}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "Ġ": 2, "ab": 3, "Ġab": 4, "c": 5, "abc": 6},
              "merges": [["a", "b"], ["Ġ", "ab"], ["ab", "c"]]}
  })";
  auto tok = load_tokenizer(write_temp("gpt2ish.json", json));
  EXPECT_EQ(tok->encode("ab abc", false), (std::vector<int32_t>{4, 4, 5}));
  EXPECT_EQ(tok->encode("abc <|end|>", false, true), (std::vector<int32_t>{4, 5, 7}));
  std::vector<int32_t> ids{4, 4, 5};
  EXPECT_EQ(tok->decode(ids), " ab abc");
}

TEST(HfTokenizerFile, NormalizedAddedTokensAreFoundAfterNormalization) {
  // A SentencePiece-style file: spaces become "▁" before a normalized added token is looked for.
  const std::string json = R"({
    "added_tokens": [{"id": 5, "content": "\u2581hi\u2581there", "special": false, "normalized": true,
                      "lstrip": false, "rstrip": false, "single_word": false},
                     {"id": 6, "content": "<s>", "special": true, "normalized": false,
                      "lstrip": false, "rstrip": false, "single_word": false}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "model": {"type": "BPE", "byte_fallback": false, "unk_token": "<unk>", "fuse_unk": true,
              "vocab": {"<unk>": 0, "\u2581": 1, "h": 2, "i": 3, "x": 4},
              "merges": []}
  })";
  auto tok = load_tokenizer(write_temp("normalized_added.json", json));
  EXPECT_EQ(tok->encode("hi there x", false), (std::vector<int32_t>{5, 1, 4}));
  EXPECT_EQ(tok->encode("<s>x", false, true), (std::vector<int32_t>{6, 1, 4}));
}

}  // namespace
}  // namespace fuselm
