#include "tokenizer/unicode_nfc.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tokenizer/tokenizer.h"

namespace fuselm {
namespace {

// Expected values from Python's unicodedata.normalize("NFC", ...).
TEST(UnicodeNfc, MatchesPythonUnicodedata) {
  const std::pair<const char*, const char*> cases[] = {
      {"e\xCC\x81", "\xC3\xA9"},                                            // e + acute -> é
      {"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"},              // Hangul L V T -> 각
      {"\xEF\xA4\x80", "\xE8\xB1\x88"},                                      // CJK compatibility singleton
      {"\xE2\x84\xAB", "\xC3\x85"},                                          // Angstrom sign -> Å
      {"d\xCC\x87\xCC\xA3", "\xE1\xB8\x8D\xCC\x87"},                         // reordering, then composition
      {"a\xCC\x88\xCC\x81" "b", "\xC3\xA4\xCC\x81" "b"},                     // second mark is blocked
      {"\xCD\x84", "\xCC\x88\xCC\x81"},                                      // non-starter decomposition
      {"\xE0\xA4\x95\xE0\xA4\xBC", "\xE0\xA4\x95\xE0\xA4\xBC"},              // composition exclusion
      {"\xD7\x90\xD6\xB7\xD6\xBC", "\xD7\x90\xD6\xB7\xD6\xBC"},              // Hebrew marks stay
      {"\xE1\xBA\x9B\xCC\xA3", "\xE1\xBA\x9B\xCC\xA3"},
      {"\xF0\x9D\x85\x9E", "\xF0\x9D\x85\x97\xF0\x9D\x85\xA5"},              // excluded musical symbol
      {"plain ASCII stays", "plain ASCII stays"},
  };
  for (auto [in, want] : cases) EXPECT_EQ(unicode::nfc(in), want) << in;
}

TEST(UnicodeNfc, NormalizerInTokenizerJson) {
  const std::string json = R"({
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"\u00c3": 0, "\u00a9": 1, "e": 2, "\u00cc": 3, "\u0123": 4, "\u00c3\u00a9": 5},
              "merges": [["\u00c3", "\u00a9"]]}
  })";
  std::string path = testing::TempDir() + "nfc_tokenizer.json";
  std::ofstream(path, std::ios::binary) << json;
  auto tok = load_tokenizer(path);
  // "e" + U+0301 normalizes to "é" (C3 A9), one merged token.
  EXPECT_EQ(tok->encode("e\xCC\x81", false), std::vector<int32_t>{5});
}

}  // namespace
}  // namespace fuselm
