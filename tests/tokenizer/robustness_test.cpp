// Random text through every tokenizer (no crash, lossless round trips on valid UTF-8), streaming
// edge cases, malformed inputs, and a GGUF "gpt2" vocabulary written by the test itself.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "tokenizer/utf8.h"
#include "test_util.h"

namespace fuselm {
namespace {

using test::write_temp;

// Random valid UTF-8 mixing ASCII, whitespace runs, Latin-1, CJK, emoji and combining marks.
std::string random_text(std::mt19937& gen, int chars) {
  static const uint32_t kPool[] = {'a', 'Z', ' ', ' ', '\n', '\t', '\r', '.', '\'', '3', 0xE9, 0x0301, 0x4E2D,
                                   0x65E5, 0xD55C, 0x1F600, 0x1F468, 0x200D, 0x2581, 0x0120, '<', '|', '>'};
  std::uniform_int_distribution<size_t> pick(0, std::size(kPool) - 1);
  std::string s;
  for (int i = 0; i < chars; ++i) utf8::append(s, kPool[pick(gen)]);
  return s;
}

std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamDecoder stream(tok);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = stream.push(id);
    EXPECT_TRUE(utf8::is_valid(piece));  // never a broken sequence mid-stream
    out += piece;
  }
  return out + stream.flush();
}

TEST(Robustness, RandomTextRoundTripsThroughEveryFormat) {
  const char* paths[] = {"llama3-tokenizer/tokenizer.model", "llama3-tokenizer/tokenizer.json",
                         "llama2-tokenizer/tokenizer.model", "llama2-tokenizer/tokenizer.bin",
                         "llama2-tokenizer/tokenizer.json", "tiny-llama2-gguf/tiny-llama2-q8_0.gguf",
                         "tinyllamas-tok512/tok512.bin", "llama4-tokenizer/tokenizer.model"};
  std::mt19937 gen(42);
  for (const char* rel : paths) {
    if (!std::filesystem::exists(test::model_path(rel))) continue;
    auto tok = load_tokenizer(test::model_path(rel));
    for (int round = 0; round < 30; ++round) {
      std::string text = random_text(gen, 1 + round * 7);
      auto ids = tok->encode(text, false);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size()) << rel;
      // SentencePiece reads U+2581 in the input as a space (it is its space symbol), so the
      // references themselves give it back as a space; llama2.c byte-encodes it and keeps it.
      const std::string kind = tok->kind();
      const bool space_symbol_is_space = kind == "sentencepiece" || kind == "gguf-llama" || kind == "hf-bpe";
      std::string expected;
      for (size_t i = 0; i < text.size(); ++i) {
        if (space_symbol_is_space && text.compare(i, 3, "\xE2\x96\x81") == 0) {
          expected += ' ';
          i += 2;
        } else {
          expected += text[i];
        }
      }
      EXPECT_EQ(tok->decode(ids), expected) << rel << " text=" << text;
      EXPECT_EQ(stream_decode(*tok, ids), expected) << rel << " text=" << text;
    }
  }
}

TEST(Robustness, InvalidUtf8AndRandomIdsNeverCrash) {
  const char* paths[] = {"llama3-tokenizer/tokenizer.model", "llama2-tokenizer/tokenizer.model",
                         "llama2-tokenizer/tokenizer.bin", "tiny-llama2-gguf/tiny-llama2-q8_0.gguf",
                         "llama2-tokenizer/tokenizer.json"};
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const char* rel : paths) {
    if (!std::filesystem::exists(test::model_path(rel))) continue;
    auto tok = load_tokenizer(test::model_path(rel));
    for (int round = 0; round < 20; ++round) {
      std::string junk;
      for (int i = 0; i < 50; ++i) junk += static_cast<char>(byte(gen));
      auto ids = tok->encode(junk, true, round % 2 == 0);
      EXPECT_TRUE(utf8::is_valid(tok->decode(ids))) << rel;
      std::uniform_int_distribution<int32_t> any_id(0, tok->vocab_size() - 1);
      std::vector<int32_t> random_ids;
      for (int i = 0; i < 40; ++i) random_ids.push_back(any_id(gen));
      EXPECT_TRUE(utf8::is_valid(tok->decode(random_ids))) << rel;
      EXPECT_TRUE(utf8::is_valid(stream_decode(*tok, random_ids))) << rel;
    }
  }
}

TEST(StreamDecoder, HoldsBackOnlyWhatCanStillComplete) {
  FUSELM_REQUIRE_MODEL("llama2-tokenizer/tokenizer.bin");
  auto tok = load_tokenizer(test::model_path("llama2-tokenizer/tokenizer.bin"));
  auto byte = [](int b) { return b + 3; };  // <0xXX> ids in the Llama 2 vocabulary
  StreamDecoder s(*tok);
  EXPECT_EQ(s.push(byte(0xE4)), "");
  EXPECT_EQ(s.push(byte(0xB8)), "");
  EXPECT_EQ(s.push(byte(0xAD)), "\xE4\xB8\xAD");  // 中
  EXPECT_EQ(s.push(byte(0xFF)), "\xEF\xBF\xBD");  // can never start a character: replaced at once
  EXPECT_EQ(s.push(byte(0xE4)), "");
  EXPECT_EQ(s.push(byte(0x41)), "\xEF\xBF\xBD" "A");  // the held byte cannot complete any more
  EXPECT_EQ(s.push(byte(0xF0)), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");
}

// --- a GGUF file with a byte-level BPE ("gpt2") vocabulary ---------------------------------------

class GgufWriter {
 public:
  void add_string(const std::string& key, const std::string& v) {
    key_(key);
    u32(8);
    str(v);
    ++count_;
  }
  void add_u32(const std::string& key, uint32_t v) {
    key_(key);
    u32(4);
    u32(v);
    ++count_;
  }
  void add_i64(const std::string& key, int64_t v) {
    key_(key);
    u32(11);
    u64(static_cast<uint64_t>(v));
    ++count_;
  }
  void add_bool(const std::string& key, bool v) {
    key_(key);
    u32(7);
    body_ += static_cast<char>(v ? 1 : 0);
    ++count_;
  }
  void add_strings(const std::string& key, const std::vector<std::string>& v) {
    key_(key);
    u32(9);
    u32(8);
    u64(v.size());
    for (const auto& s : v) str(s);
    ++count_;
  }
  void add_i32s(const std::string& key, const std::vector<int32_t>& v) {
    key_(key);
    u32(9);
    u32(5);
    u64(v.size());
    for (int32_t x : v) u32(static_cast<uint32_t>(x));
    ++count_;
  }
  std::string bytes() const {
    std::string head = "GGUF";
    auto put = [&](uint64_t x, int n) {
      for (int i = 0; i < n; ++i) head += static_cast<char>((x >> (8 * i)) & 0xFF);
    };
    put(3, 4);
    put(0, 8);  // tensors
    put(count_, 8);
    std::string all = head + body_;
    while (all.size() % 32) all += '\0';
    return all;
  }

 private:
  void u32(uint32_t x) {
    for (int i = 0; i < 4; ++i) body_ += static_cast<char>((x >> (8 * i)) & 0xFF);
  }
  void u64(uint64_t x) {
    for (int i = 0; i < 8; ++i) body_ += static_cast<char>((x >> (8 * i)) & 0xFF);
  }
  void str(const std::string& s) {
    u64(s.size());
    body_ += s;
  }
  void key_(const std::string& k) { str(k); }
  std::string body_;
  uint64_t count_ = 0;
};

TEST(GgufGpt2, ByteLevelVocabularyWithMerges) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    std::string t;
    utf8::append(t, tok::byte_to_unicode(static_cast<uint8_t>(b)));
    tokens.push_back(t);
    types.push_back(1);
  }
  const std::string space = tokens[' '];  // "Ġ"
  for (const std::string& t : {space + "t", std::string("he"), space + "the"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  tokens.push_back("<|endoftext|>");
  types.push_back(3);
  GgufWriter w;
  w.add_string("general.architecture", "gpt2");
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "gpt-2");
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_strings("tokenizer.ggml.merges", {space + " t", "h e", space + "t he"});
  w.add_u32("tokenizer.ggml.bos_token_id", 259);
  w.add_u32("tokenizer.ggml.eos_token_id", 259);
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_string("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
  auto tok = load_tokenizer(write_temp("gpt2.gguf", w.bytes()));
  EXPECT_EQ(tok->vocab_size(), 260);
  EXPECT_EQ(tok->eos_ids()[0], 259);
  EXPECT_EQ(tok->encode(" the the", false), (std::vector<int32_t>{258, 258}));
  EXPECT_EQ(tok->encode("the", false), (std::vector<int32_t>{'t', 257}));
  EXPECT_EQ(tok->encode("x<|endoftext|>", false, true), (std::vector<int32_t>{'x', 259}));
  std::vector<int32_t> ids{258, 't', 257};
  EXPECT_EQ(tok->decode(ids), " thethe");
  EXPECT_EQ(tok->chat_template(), "{% for m in messages %}{{ m.content }}{% endfor %}");
}

// Narrowed to int32, this id became 100: past the end of the 3-token list it was then read from.
TEST(GgufGpt2, SpecialTokenIdOutsideTheVocabularyIsAClearError) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_strings("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.add_strings("tokenizer.ggml.merges", {"a b"});
  w.add_i64("tokenizer.ggml.bos_token_id", -(int64_t{1} << 32) + 100);
  try {
    load_tokenizer(write_temp("bad_bos.gguf", w.bytes()));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bos_token_id = -4294967196 is outside the 3-token vocabulary"),
              std::string::npos)
        << e.what();
  }
}

TEST(GgufGpt2, MissingVocabularyIsAClearError) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  try {
    load_tokenizer(write_temp("novocab.gguf", w.bytes()));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model"), std::string::npos) << e.what();
  }
  std::string truncated = w.bytes().substr(0, 20);
  EXPECT_THROW(load_tokenizer(write_temp("truncated.gguf", truncated)), Error);
}

}  // namespace
}  // namespace fuselm
