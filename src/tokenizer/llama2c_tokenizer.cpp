// llama2.c tokenizer.bin: int32 max_token_length, then per token {float32 score, int32 length,
// bytes}, until the end of the file. Encoding and decoding follow llama2.c's run.c exactly; the
// O(n^2) merge loop there is replaced by a priority queue that picks the same pair every step.
#include <cstring>
#include <queue>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/internal.h"
#include "tokenizer/utf8.h"

namespace fuselm::tok {
namespace {

constexpr int32_t kUnkId = 0;
constexpr int32_t kBosId = 1;
constexpr int32_t kEosId = 2;
constexpr int32_t kFirstByteId = 3;  // <0x00> .. <0xFF> are ids 3..258

class Llama2cTokenizer final : public Tokenizer {
 public:
  Llama2cTokenizer(std::vector<std::string> pieces, std::vector<float> scores)
      : pieces_(std::move(pieces)), scores_(std::move(scores)) {
    piece_ids_.reserve(pieces_.size());
    for (size_t i = 0; i < pieces_.size(); ++i) piece_ids_.emplace(pieces_[i], static_cast<int32_t>(i));
    byte_of_.assign(pieces_.size(), -1);
    for (size_t i = 0; i < pieces_.size(); ++i) byte_of_[i] = static_cast<int16_t>(parse_byte_piece(pieces_[i]));
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool /*parse_special*/) const override {
    // The format has no special-token text to parse: "\n<s>\n" is not something users type.
    std::vector<int32_t> ids;
    ids.reserve(text.size() + 2);
    if (!text.empty()) push_piece(" ", ids);  // SentencePiece's dummy prefix
    // Group bytes as run.c does: a non-continuation byte starts a group of at most 4 bytes.
    size_t start = 0;
    while (start < text.size()) {
      size_t end = start + 1;
      while (end < text.size() && end - start < 4 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) ++end;
      push_piece(text.substr(start, end - start), ids);
      start = end;
    }
    merge(ids);
    if (add_bos) ids.insert(ids.begin(), kBosId);
    return ids;
  }

  std::string token_bytes(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    if (byte_of_[id] >= 0) return std::string(1, static_cast<char>(byte_of_[id]));
    return pieces_[id];
  }

  std::string stream_bytes(int32_t id, bool& at_start) const override {
    check_token_id(id, vocab_size(), kind());
    if (id == kBosId || id == kEosId) {
      // run.c strips the leading space of the token after BOS; EOS ends a text. Neither is shown.
      if (id == kBosId) at_start = true;
      return {};
    }
    std::string bytes = token_bytes(id);
    if (at_start && byte_of_[id] < 0 && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    at_start = false;
    return bytes;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    bool at_start = true;
    for (int32_t id : ids) out += stream_bytes(id, at_start);
    return utf8::sanitize(out);
  }

  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int32_t bos_id() const override { return vocab_size() > kBosId ? kBosId : -1; }
  std::vector<int32_t> eos_ids() const override {
    if (vocab_size() > kEosId) return {kEosId};
    return {};
  }
  std::string kind() const override { return "llama2c"; }

  int32_t token_id(std::string_view piece) const override {
    auto it = piece_ids_.find(piece);
    return it == piece_ids_.end() ? -1 : it->second;
  }
  std::string token_text(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    return pieces_[id];
  }
  bool is_special(int32_t id) const override { return id == kUnkId || id == kBosId || id == kEosId; }

 private:
  // One code point (or stray bytes): its own piece when the vocabulary has it, else one byte
  // token per byte.
  void push_piece(std::string_view bytes, std::vector<int32_t>& ids) const {
    int32_t id = token_id(bytes);
    if (id >= 0) {
      ids.push_back(id);
      return;
    }
    for (char c : bytes) {
      int32_t byte_id = static_cast<uint8_t>(c) + kFirstByteId;
      ids.push_back(byte_id < vocab_size() ? byte_id : kUnkId);
    }
  }

  // Repeatedly merges the adjacent pair whose concatenated pieces form the best-scoring piece,
  // the leftmost one on ties (run.c scans left to right and keeps the first strict maximum).
  void merge(std::vector<int32_t>& ids) const {
    const int n = static_cast<int>(ids.size());
    if (n < 2) return;
    std::vector<int> prev(n), next(n), version(n, 0);
    for (int i = 0; i < n; ++i) {
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Candidate {
      float score;
      int left;
      int32_t merged;
      int left_version, right_version;
      bool operator<(const Candidate& o) const {  // priority_queue pops the largest
        if (score != o.score) return score < o.score;
        return left > o.left;
      }
    };
    std::priority_queue<Candidate> queue;
    std::string joined;
    auto consider = [&](int left) {
      int right = next[left];
      if (left < 0 || right < 0) return;
      joined.assign(pieces_[ids[left]]);
      joined += pieces_[ids[right]];
      int32_t merged = token_id(joined);
      if (merged < 0) return;
      queue.push({scores_[merged], left, merged, version[left], version[right]});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i);
    while (!queue.empty()) {
      Candidate c = queue.top();
      queue.pop();
      int right = next[c.left];
      if (version[c.left] < 0 || right < 0 || version[c.left] != c.left_version ||
          version[right] != c.right_version)
        continue;  // a neighbour changed since this pair was scored
      ids[c.left] = c.merged;
      ++version[c.left];
      version[right] = -1;  // gone
      next[c.left] = next[right];
      if (next[right] >= 0) prev[next[right]] = c.left;
      if (prev[c.left] >= 0) consider(prev[c.left]);
      consider(c.left);
    }
    int out = 0;
    for (int i = 0; i >= 0; i = next[i]) ids[out++] = ids[i];
    ids.resize(out);
  }

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int16_t> byte_of_;  // byte value of "<0xXX>" pieces, else -1
  PieceMap piece_ids_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path) {
  auto file = MappedFile::open(path);
  const auto* data = reinterpret_cast<const uint8_t*>(file->data());
  const size_t size = file->size();
  auto read_i32 = [&](size_t at) {
    int32_t v;
    std::memcpy(&v, data + at, 4);
    return v;
  };
  FUSELM_CHECK(size >= 4, "llama2.c tokenizer '", path, "' is ", size,
               " bytes: expected at least a 4-byte max_token_length header; the file is empty or truncated");
  const int32_t max_len = read_i32(0);
  FUSELM_CHECK(max_len > 0 && max_len <= 1 << 16, "llama2.c tokenizer '", path, "': max_token_length is ",
               max_len, ", expected 1..65536; this is not a llama2.c tokenizer.bin");
  std::vector<std::string> pieces;
  std::vector<float> scores;
  size_t at = 4;
  while (at < size) {
    const size_t token = pieces.size();
    FUSELM_CHECK(size - at >= 8, "llama2.c tokenizer '", path, "' is truncated: token ", token, " at byte ", at,
                 " needs an 8-byte {score, length} record but only ", size - at,
                 " bytes remain; re-download the file");
    float score;
    std::memcpy(&score, data + at, 4);
    const int32_t len = read_i32(at + 4);
    FUSELM_CHECK(len >= 0 && len <= max_len, "llama2.c tokenizer '", path, "': token ", token, " at byte ", at,
                 " has length ", len, ", expected 0..", max_len, " (max_token_length); the file is corrupt or not a llama2.c tokenizer");
    at += 8;
    FUSELM_CHECK(size - at >= static_cast<size_t>(len), "llama2.c tokenizer '", path, "' is truncated: token ",
                 token, " needs ", len, " bytes at byte ", at, " but the file ends at ", size, "; re-download the file");
    pieces.emplace_back(reinterpret_cast<const char*>(data + at), static_cast<size_t>(len));
    scores.push_back(score);
    at += static_cast<size_t>(len);
  }
  FUSELM_CHECK(!pieces.empty(), "llama2.c tokenizer '", path, "' has a header but no tokens");
  return std::make_unique<Llama2cTokenizer>(std::move(pieces), std::move(scores));
}

}  // namespace fuselm::tok
