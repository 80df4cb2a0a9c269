#pragma once
// Unicode NFC normalization (canonical decomposition, canonical ordering, canonical composition),
// for tokenizer.json files whose normalizer is NFC (Qwen2 and others). Tables are generated into
// unicode_nfc_data.cpp by tools/gen_unicode_nfc.py.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fuselm::unicode {

struct CombiningClass {
  uint32_t code_point;
  uint8_t combining_class;
};
struct Decomposition {
  uint32_t code_point, first, second;  // second = 0 for a singleton
};
struct Composition {
  uint32_t first, second, composite;
};

extern const CombiningClass kCombiningClasses[];
extern const size_t kCombiningClassCount;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const Composition kCompositions[];
extern const size_t kCompositionCount;

// NFC of valid UTF-8 (invalid bytes are passed through unchanged).
std::string nfc(std::string_view text);

}  // namespace fuselm::unicode
