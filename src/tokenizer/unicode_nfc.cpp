#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "tokenizer/utf8.h"

namespace fuselm::unicode {
namespace {

// Hangul syllables compose and decompose algorithmically (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  const CombiningClass* end = kCombiningClasses + kCombiningClassCount;
  auto it = std::lower_bound(kCombiningClasses, end, cp,
                             [](const CombiningClass& c, uint32_t v) { return c.code_point < v; });
  return it != end && it->code_point == cp ? it->combining_class : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xC0) {
    const Decomposition* end = kDecompositions + kDecompositionCount;
    auto it = std::lower_bound(kDecompositions, end, cp,
                               [](const Decomposition& d, uint32_t v) { return d.code_point < v; });
    if (it != end && it->code_point == cp) {
      decompose(it->first, out);
      if (it->second != 0) decompose(it->second, out);
      return;
    }
  }
  out.push_back(cp);
}

// The primary composite of a pair, or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const Composition* end = kCompositions + kCompositionCount;
  auto it = std::lower_bound(kCompositions, end, std::pair{a, b}, [](const Composition& c, std::pair<uint32_t, uint32_t> v) {
    return c.first < v.first || (c.first == v.first && c.second < v.second);
  });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

std::string nfc(std::string_view text) {
  // Text below U+00C0 has nothing to decompose, reorder or compose (the first composable
  // character, À, is U+00C0; combining marks start at U+0300).
  bool trivial = true;
  for (unsigned char c : text)
    if (c >= 0xC3) {  // lead bytes of U+00C0 and above
      trivial = false;
      break;
    }
  if (trivial) return std::string(text);

  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  std::vector<std::pair<size_t, char>> invalid;  // invalid bytes pass through, marked in cps
  for (size_t i = 0; i < text.size();) {
    int len;
    if (!utf8::well_formed_prefix(text, i).complete) {
      invalid.push_back({cps.size(), text[i]});
      cps.push_back(0xFFFFFFFFu);
      ++i;
      continue;
    }
    uint32_t cp = utf8::decode_at(text, i, &len);
    decompose(cp, cps);
    i += len;
  }
  // Canonical ordering: a stable sort of each run of non-starters by combining class.
  for (size_t i = 1; i < cps.size(); ++i) {
    uint8_t c = cps[i] == 0xFFFFFFFFu ? 0 : combining_class(cps[i]);
    if (c == 0) continue;
    for (size_t j = i; j > 0; --j) {
      uint8_t p = cps[j - 1] == 0xFFFFFFFFu ? 0 : combining_class(cps[j - 1]);
      if (p <= c) break;
      std::swap(cps[j - 1], cps[j]);
    }
  }
  // Canonical composition (UAX #15): combine with the last starter unless blocked.
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  size_t starter = SIZE_MAX;
  int last_class = -1;
  for (uint32_t cp : cps) {
    int cls = cp == 0xFFFFFFFFu ? 0 : combining_class(cp);
    if (starter != SIZE_MAX && cp != 0xFFFFFFFFu && out[starter] != 0xFFFFFFFFu &&
        (last_class < cls || last_class == 0)) {
      if (uint32_t composite = compose(out[starter], cp)) {
        out[starter] = composite;
        continue;
      }
    }
    if (cls == 0) starter = out.size();
    last_class = cls;
    out.push_back(cp);
  }
  std::string result;
  result.reserve(text.size());
  size_t next_invalid = 0;
  for (uint32_t cp : out) {
    if (cp == 0xFFFFFFFFu) {
      result += invalid[next_invalid++].second;
    } else {
      utf8::append(result, cp);
    }
  }
  return result;
}

}  // namespace fuselm::unicode
