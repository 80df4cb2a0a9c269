// tiktoken rank files ("base64(token) rank" per line), as Meta ships them for Llama 3 and Llama 4
// under the name tokenizer.model. The file holds only the mergeable ranks: the split regex and the
// special tokens live in Meta's tokenizer.py and are reproduced here per family.
#include <algorithm>
#include <charconv>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/internal.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace fuselm::tok {

// meta-llama/llama-models models/llama3/tokenizer.py (pat_str).
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's tokenizer.json Split regex: Llama 3's with single digits.
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-2's ByteLevel pre-tokenizer regex.
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// meta-llama/llama-models models/llama4/tokenizer.py (O200K_PATTERN).
constexpr const char* kLlama4Pattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Family {
  std::string name;
  std::string pattern;
  std::vector<std::string> specials;  // ids follow the ranks, in this order
  std::vector<std::string> stop_tokens;
};

// Llama 3.1's names (the ones its tokenizer.json carries): 256 specials from id 128000.
Family llama3_family() {
  std::vector<std::string> specials{"<|begin_of_text|>",        "<|end_of_text|>",   "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
                                    "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
                                    "<|eom_id|>",               "<|eot_id|>",        "<|python_tag|>"};
  for (int i = 3; specials.size() < 256; ++i) specials.push_back(str_cat("<|reserved_special_token_", i, "|>"));
  return {"llama3", kLlama3Pattern, std::move(specials), {"<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"}};
}

// 2048 specials from id 200000, in the order of models/llama4/tokenizer.py.
Family llama4_family() {
  std::vector<std::string> s{"<|begin_of_text|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>",
                             "<|fim_suffix|>",    "<|header_start|>", "<|header_end|>", "<|eom|>",
                             "<|eot|>",           "<|step|>"};
  for (int i = 0; i <= 5; ++i) s.push_back(str_cat("<|text_post_train_reserved_special_token_", i, "|>"));
  for (const char* t : {"<|python_start|>", "<|python_end|>", "<|finetune_right_pad|>"}) s.push_back(t);
  for (int i = 8; i < 8 + 61; ++i) s.push_back(str_cat("<|text_post_train_reserved_special_token_", i, "|>"));
  for (const char* t : {"<|image_start|>", "<|image_end|>", "<|vision_reserved_special_token_0|>",
                        "<|vision_reserved_special_token_1|>", "<|tile_x_separator|>", "<|tile_y_separator|>",
                        "<|vision_reserved_special_token_2|>", "<|vision_reserved_special_token_3|>",
                        "<|vision_reserved_special_token_4|>", "<|vision_reserved_special_token_5|>", "<|image|>",
                        "<|vision_reserved_special_token_6|>", "<|patch|>"})
    s.push_back(t);
  for (int i = 7; i < 7 + 1041; ++i) s.push_back(str_cat("<|vision_reserved_special_token_", i, "|>"));
  for (int i = 0; i <= 7; ++i) s.push_back(str_cat("<|reasoning_reserved_special_token_", i, "|>"));
  s.push_back("<|reasoning_thinking_start|>");
  s.push_back("<|reasoning_thinking_end|>");
  for (int i = 0; s.size() < 2048; ++i) s.push_back(str_cat("<|reserved_special_token_", i, "|>"));
  return {"llama4", kLlama4Pattern, std::move(s), {"<|end_of_text|>", "<|eom|>", "<|eot|>"}};
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < in.size() && in[i] != '='; ++i) {
    int v = base64_value(in[i]);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  for (; i < in.size(); ++i)
    if (in[i] != '=') return false;
  return !out.empty();
}

class TiktokenTokenizer final : public Tokenizer {
 public:
  TiktokenTokenizer(std::vector<std::string> id_to_bytes, PieceMap ranks, const Family& family)
      : id_to_bytes_(std::move(id_to_bytes)), ranks_(std::move(ranks)), family_name_(family.name),
        regex_(family.pattern) {
    const int32_t first_special = static_cast<int32_t>(id_to_bytes_.size());
    for (size_t i = 0; i < family.specials.size(); ++i) {
      int32_t id = first_special + static_cast<int32_t>(i);
      special_ids_.emplace(family.specials[i], id);
      specials_.add(family.specials[i], {id});
      id_to_bytes_.push_back(family.specials[i]);
    }
    bos_ = special_ids_.at("<|begin_of_text|>");
    for (const auto& s : family.stop_tokens) eos_.push_back(special_ids_.at(s));
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(bos_);
    std::string checked;
    if (!utf8::is_valid(text)) {
      checked = utf8::sanitize(text);  // tiktoken only sees valid text (a Python str)
      text = checked;
    }
    auto plain = [&](std::string_view fragment) { encode_ordinary(fragment, ids); };
    if (parse_special) {
      specials_.split(text, plain, [&](int32_t id) { ids.push_back(id); });
    } else {
      plain(text);
    }
    return ids;
  }

  std::string token_bytes(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    return id_to_bytes_[id];
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string bytes;
    for (int32_t id : ids) bytes += token_bytes(id);
    return utf8::sanitize(bytes);  // Python's bytes.decode("utf-8", errors="replace")
  }

  int vocab_size() const override { return static_cast<int>(id_to_bytes_.size()); }
  int32_t bos_id() const override { return bos_; }
  std::vector<int32_t> eos_ids() const override { return eos_; }
  std::string kind() const override { return "tiktoken"; }

  int32_t token_id(std::string_view piece) const override {
    if (auto it = special_ids_.find(piece); it != special_ids_.end()) return it->second;
    auto it = ranks_.find(piece);
    return it == ranks_.end() ? -1 : it->second;
  }
  std::string token_text(int32_t id) const override { return token_bytes(id); }
  bool is_special(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    return id >= vocab_size() - static_cast<int>(special_ids_.size());
  }

 private:
  void encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const {
    std::vector<BpeSymbol> symbols;
    regex_.for_each_match(text, [&](size_t begin, size_t end) {
      std::string_view piece = text.substr(begin, end - begin);
      if (auto it = ranks_.find(piece); it != ranks_.end()) {
        ids.push_back(it->second);
        return;
      }
      if (cache_.find(piece, ids)) return;
      symbols.clear();
      for (uint32_t i = 0; i < piece.size(); ++i) symbols.push_back({rank_of(piece.substr(i, 1)), i, i + 1});
      size_t first = ids.size();
      bpe_merge(
          symbols,
          [&](const BpeSymbol& left, const BpeSymbol& right) -> std::optional<BpeMerge> {
            auto it = ranks_.find(piece.substr(left.begin, right.end - left.begin));
            if (it == ranks_.end()) return std::nullopt;
            return BpeMerge{it->second, it->second};
          },
          ids);
      cache_.insert(piece, std::span<const int32_t>(ids).subspan(first));
    });
  }

  int32_t rank_of(std::string_view bytes) const {
    auto it = ranks_.find(bytes);
    FUSELM_CHECK(it != ranks_.end(), "tiktoken vocabulary has no rank for byte 0x", std::hex,
                 static_cast<int>(static_cast<uint8_t>(bytes[0])), "; the rank file is incomplete");
    return it->second;
  }

  std::vector<std::string> id_to_bytes_;
  PieceMap ranks_;
  PieceMap special_ids_;
  std::string family_name_;
  Regex regex_;
  SpecialMatcher specials_;
  int32_t bos_ = -1;
  std::vector<int32_t> eos_;
  WordCache cache_;
};

}  // namespace

bool looks_like_tiktoken(std::string_view head) {
  size_t eol = head.find('\n');
  std::string_view line = head.substr(0, eol);
  size_t space = line.find(' ');
  if (space == 0 || space == std::string_view::npos || space + 1 >= line.size()) return false;
  for (char c : line.substr(0, space))
    if (base64_value(c) < 0 && c != '=') return false;
  for (char c : line.substr(space + 1))
    if ((c < '0' || c > '9') && c != '\r') return false;
  return true;
}

std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const std::string& path) {
  auto file = MappedFile::open(path);
  std::string_view text(reinterpret_cast<const char*>(file->data()), file->size());
  std::vector<std::string> id_to_bytes;
  PieceMap ranks;
  ranks.reserve(text.size() / 16);
  // Ranks index id_to_bytes and must run from 0 without a gap, so none can reach the number of
  // lines. Checked as each line is read: sized by the rank alone, a one-line file cost 512 MB.
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) +
                       (!text.empty() && text.back() != '\n');
  std::string bytes;
  size_t line_number = 0;
  for (size_t at = 0; at < text.size();) {
    size_t eol = text.find('\n', at);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(at, eol - at);
    at = eol + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    size_t space = line.find(' ');
    int64_t rank = -1;
    bool ok = space != std::string_view::npos && base64_decode(line.substr(0, space), bytes);
    if (ok) {
      auto digits = line.substr(space + 1);
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
      ok = ec == std::errc() && end == digits.data() + digits.size() && rank >= 0 && rank < (1 << 24);
    }
    FUSELM_CHECK(ok, "tiktoken file '", path, "' line ", line_number, ": expected \"<base64 token> <rank>\", found \"",
                 line.substr(0, 80), "\"; the file is corrupt or not a tiktoken rank file");
    FUSELM_CHECK(static_cast<size_t>(rank) < lines, "tiktoken file '", path, "' line ", line_number, ": rank ", rank,
                 ", but the file has only ", lines, " line(s); ranks run from 0 without gaps, so the largest possible "
                 "is ", lines - 1, "; the file is corrupt or truncated");
    if (static_cast<size_t>(rank) >= id_to_bytes.size()) id_to_bytes.resize(rank + 1);
    id_to_bytes[rank] = bytes;
    FUSELM_CHECK(ranks.emplace(bytes, static_cast<int32_t>(rank)).second, "tiktoken file '", path, "' line ",
                 line_number, ": token with rank ", rank, " appears twice");
  }
  FUSELM_CHECK(ranks.size() == id_to_bytes.size(), "tiktoken file '", path, "' has ", ranks.size(),
               " ranks but they are not contiguous from 0 (largest is ", id_to_bytes.size() - 1, ")");
  Family family;
  if (ranks.size() == 128000) {
    family = llama3_family();
  } else if (ranks.size() == 200000) {
    family = llama4_family();
  } else {
    fail("tiktoken file '", path, "' has ", ranks.size(),
         " ranks; the split regex and special tokens are known only for Llama 3 (128000 ranks) and Llama 4 "
         "(200000 ranks). Use the model's tokenizer.json instead");
  }
  for (int b = 0; b < 256; ++b)
    FUSELM_CHECK(ranks.count(std::string(1, static_cast<char>(b))), "tiktoken file '", path,
                 "' has no rank for the single byte ", b, "; every byte needs one");
  return std::make_unique<TiktokenTokenizer>(std::move(id_to_bytes), std::move(ranks), family);
}

}  // namespace fuselm::tok
