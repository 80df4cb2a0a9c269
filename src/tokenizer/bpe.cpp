#include "tokenizer/bpe.h"

#include <array>

#include "tokenizer/utf8.h"

namespace fuselm::tok {
namespace {

struct ByteLevelTables {
  std::array<uint32_t, 256> to_unicode{};
  std::array<int16_t, 512> to_byte{};  // every mapped code point is below 0x144
  ByteLevelTables() {
    to_byte.fill(-1);
    auto printable = [](int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); };
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? b : 256 + extra++;
      to_unicode[b] = cp;
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

uint32_t byte_to_unicode(uint8_t byte) { return tables().to_unicode[byte]; }

int unicode_to_byte(uint32_t code_point) {
  return code_point < tables().to_byte.size() ? tables().to_byte[code_point] : -1;
}

bool byte_level_to_bytes(std::string_view text, std::string& bytes) {
  bytes.clear();
  for (size_t i = 0; i < text.size();) {
    int len;
    uint32_t cp = utf8::decode_at(text, i, &len);
    int b = unicode_to_byte(cp);
    if (b < 0 || !utf8::well_formed_prefix(text, i).complete) return false;
    bytes += static_cast<char>(b);
    i += len;
  }
  return true;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(out, byte_to_unicode(static_cast<uint8_t>(c)));
  return out;
}

bool WordCache::find(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxWordBytes) return false;
  std::lock_guard lock(mutex_);
  auto it = map_.find(word);
  if (it == map_.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view word, std::span<const int32_t> ids) const {
  if (word.size() > kMaxWordBytes) return;
  std::lock_guard lock(mutex_);
  if (map_.size() >= kMaxEntries) map_.clear();  // bounded memory; a simple reset is enough
  map_.emplace(std::string(word), std::vector<int32_t>(ids.begin(), ids.end()));
}

}  // namespace fuselm::tok
