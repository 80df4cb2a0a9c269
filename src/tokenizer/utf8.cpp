#include "tokenizer/utf8.h"

namespace fuselm::utf8 {

Prefix well_formed_prefix(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t lead = byte(i);
  if (lead < 0x80) return {1, true};
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;  // surrogates are not scalar values
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {1, false};
  }
  int length = 1;
  for (int k = 0; k < need; ++k) {
    size_t at = i + 1 + k;
    if (at >= s.size()) return {length, false, true};
    uint8_t b = byte(at);
    bool ok = k == 0 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {length, false};
    ++length;
  }
  return {length, true};
}

uint32_t decode_at(std::string_view s, size_t i, int* length) {
  Prefix p = well_formed_prefix(s, i);
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  if (!p.complete) {
    *length = 1;
    return byte(i);
  }
  *length = p.length;
  uint32_t lead = byte(i);
  switch (p.length) {
    case 1: return lead;
    case 2: return ((lead & 0x1F) << 6) | (byte(i + 1) & 0x3F);
    case 3: return ((lead & 0x0F) << 12) | ((byte(i + 1) & 0x3F) << 6) | (byte(i + 2) & 0x3F);
    default:
      return ((lead & 0x07) << 18) | ((byte(i + 1) & 0x3F) << 12) | ((byte(i + 2) & 0x3F) << 6) |
             (byte(i + 3) & 0x3F);
  }
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    Prefix p = well_formed_prefix(s, i);
    if (p.complete) {
      out.append(s.substr(i, p.length));
    } else {
      out += kReplacement;
    }
    i += p.length;
  }
  return out;
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    Prefix p = well_formed_prefix(s, i);
    if (!p.complete) return false;
    i += p.length;
  }
  return true;
}

std::string take_complete(std::string_view s, std::string& tail) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  tail.clear();
  while (i < s.size()) {
    Prefix p = well_formed_prefix(s, i);
    if (p.complete) {
      out.append(s.substr(i, p.length));
    } else if (p.truncated) {
      tail.assign(s.substr(i));  // may still be completed by the next token
      break;
    } else {
      out += kReplacement;
    }
    i += p.length;
  }
  return out;
}

}  // namespace fuselm::utf8
