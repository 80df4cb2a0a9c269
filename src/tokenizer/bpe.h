#pragma once
// The BPE merge loop shared by the tiktoken, HF tokenizer.json and GGUF gpt2 tokenizers, the
// GPT-2 byte <-> character mapping, and a per-word result cache.
#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/internal.h"

namespace fuselm::tok {

// A symbol of a word being merged: a token id covering bytes [begin, end) of the word.
struct BpeSymbol {
  int32_t id;
  uint32_t begin, end;
};

struct BpeMerge {
  int32_t rank;  // lower merges first
  int32_t id;    // the merged token
};

// Greedy BPE: repeatedly merges the adjacent pair of lowest rank, leftmost on ties, until no pair
// merges. This is tiktoken's byte_pair_merge and HF tokenizers' Word::merge_all; a heap with
// stale-entry checks makes it O(n log n) for long words. `lookup(left, right)` returns the merge
// of two adjacent symbols or std::nullopt. Calls emit(symbol) for the final symbols in order.
template <class Lookup, class Emit>
void bpe_merge_symbols(std::vector<BpeSymbol>& symbols, Lookup lookup, Emit emit) {
  const int n = static_cast<int>(symbols.size());
  if (n == 0) return;
  if (n == 1) {
    emit(symbols[0]);
    return;
  }
  std::vector<int> next(n), prev(n);
  std::vector<uint32_t> version(n, 0);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int left;
    int32_t id;
    uint32_t left_version, right_version;
    bool operator<(const Candidate& o) const {  // priority_queue pops the largest: invert
      if (rank != o.rank) return rank > o.rank;
      return left > o.left;
    }
  };
  std::vector<Candidate> storage;
  storage.reserve(n);
  std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(storage));
  auto consider = [&](int left) {
    if (left < 0) return;
    int right = next[left];
    if (right < 0) return;
    std::optional<BpeMerge> m = lookup(symbols[left], symbols[right]);
    if (m) queue.push({m->rank, left, m->id, version[left], version[right]});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  constexpr uint32_t kRemoved = ~0u;
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    int right = next[c.left];
    if (right < 0 || version[c.left] != c.left_version || version[right] != c.right_version) continue;
    symbols[c.left].id = c.id;
    symbols[c.left].end = symbols[right].end;
    ++version[c.left];
    version[right] = kRemoved;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    consider(prev[c.left]);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = next[i]) emit(symbols[i]);
}

// As bpe_merge_symbols, appending the final ids to `out`.
template <class Lookup>
void bpe_merge(std::vector<BpeSymbol>& symbols, Lookup lookup, std::vector<int32_t>& out) {
  bpe_merge_symbols(symbols, lookup, [&](const BpeSymbol& s) { out.push_back(s.id); });
}

// GPT-2's reversible byte -> printable character map used by byte-level BPE vocabularies:
// printable Latin-1 bytes map to themselves, the rest to U+0100 onwards.
uint32_t byte_to_unicode(uint8_t byte);
// The byte a byte-level character stands for, or -1 when `code_point` is not one of the 256.
int unicode_to_byte(uint32_t code_point);
// Converts a byte-level vocabulary string ("Ġworld") to the raw bytes (" world"); false when it
// contains a character outside the byte-level alphabet.
bool byte_level_to_bytes(std::string_view text, std::string& bytes);
std::string bytes_to_byte_level(std::string_view bytes);

// Caches the ids of pre-tokenized words; shared by concurrent encode() calls.
class WordCache {
 public:
  bool find(std::string_view word, std::vector<int32_t>& out) const;
  void insert(std::string_view word, std::span<const int32_t> ids) const;

 private:
  static constexpr size_t kMaxEntries = 1 << 18;
  static constexpr size_t kMaxWordBytes = 256;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map_;
};

}  // namespace fuselm::tok
