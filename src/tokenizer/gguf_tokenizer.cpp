// Vocabularies embedded in GGUF files, read as llama.cpp reads them:
//  - tokenizer.ggml.model = "llama": SentencePiece pieces with scores and token types; encoding is
//    llama.cpp's SPM tokenizer (score-ordered merges over the whole text, byte fallback).
//  - tokenizer.ggml.model = "gpt2": byte-level BPE with tokenizer.ggml.merges; translated into a
//    tokenizer.json document and served by the HF tokenizer.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/gguf_file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/internal.h"
#include "tokenizer/utf8.h"

namespace fuselm::tok {
namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum TokenType : int { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";         // ▁
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";    // " ⁇ ", as SentencePiece decodes <unk>

struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int> types;
  int32_t bos = -1, eos = -1, unk = -1, eot = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = true;
  std::string chat_template;
};

std::string escape_whitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == ' ')
      out += kSpaceSymbol;
    else
      out += c;
  }
  return out;
}

std::string unescape_whitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, 3) == kSpaceSymbol) {
      out += ' ';
      i += 3;
    } else {
      out += s[i++];
    }
  }
  return out;
}

class GgufSpmTokenizer final : public Tokenizer {
 public:
  explicit GgufSpmTokenizer(GgufVocab v) : v_(std::move(v)) {
    const int n = vocab_size();
    piece_ids_.reserve(n);
    for (int id = 0; id < n; ++id) piece_ids_.emplace(v_.tokens[id], id);
    byte_of_.assign(n, -1);
    for (int id = 0; id < n; ++id)
      if (v_.types[id] == kByte) byte_of_[id] = static_cast<int16_t>(parse_byte_piece(v_.tokens[id]));
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_ids_[b] = token_id(name);
    }
    // Dense ranks of the scores (higher score = lower rank), so the generic merge loop orders
    // merges exactly as comparing the float scores does.
    std::vector<float> sorted(v_.scores);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    rank_.resize(n);
    for (int id = 0; id < n; ++id)
      rank_[id] = static_cast<int32_t>(std::lower_bound(sorted.begin(), sorted.end(), v_.scores[id], std::greater<>()) -
                                       sorted.begin());
    cut_at_spaces_ = space_runs_are_word_starts(v_.tokens, kSpaceSymbol);
    // llama.cpp matches user-defined tokens always, control and unknown ones only with parse_special.
    for (int id = 0; id < n; ++id) {
      int t = v_.types[id];
      if (t == kControl || t == kUnknown || t == kUserDefined) all_specials_.add(v_.tokens[id], {id});
      if (t == kUserDefined) user_defined_.add(v_.tokens[id], {id});
    }
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    std::vector<int32_t> ids;
    if (add_bos && v_.add_bos && v_.bos >= 0) ids.push_back(v_.bos);
    bool previous_special = true;  // the first fragment gets the dummy-prefix space
    const SpecialMatcher& matcher = parse_special ? all_specials_ : user_defined_;
    matcher.split(
        text,
        [&](std::string_view fragment) {
          std::string s;
          if (v_.add_space_prefix && previous_special) s = " ";
          s.append(fragment);
          std::string escaped = escape_whitespace(s);
          if (cut_at_spaces_) {
            for_each_space_segment(escaped, kSpaceSymbol, [&](std::string_view seg) { encode_cached(seg, ids); });
          } else {
            encode_cached(escaped, ids);
          }
          previous_special = false;
        },
        [&](int32_t id) {
          ids.push_back(id);
          previous_special = true;
        });
    if (add_bos && v_.add_eos && v_.eos >= 0) ids.push_back(v_.eos);
    return ids;
  }

  std::string token_bytes(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    switch (v_.types[id]) {
      case kControl: return {};
      case kUnknown: return std::string(kUnknownSurface);
      case kByte: return byte_of_[id] >= 0 ? std::string(1, static_cast<char>(byte_of_[id])) : v_.tokens[id];
      case kUserDefined: return v_.tokens[id];
      default: return unescape_whitespace(v_.tokens[id]);
    }
  }

  // SentencePiece's decoder rules: control tokens are invisible; the first visible piece loses
  // its dummy-prefix space.
  std::string stream_bytes(int32_t id, bool& at_start) const override {
    std::string bytes = token_bytes(id);
    if (v_.types[id] == kControl) return bytes;
    if (at_start && v_.add_space_prefix && v_.types[id] == kNormal && bytes.starts_with(' ')) bytes.erase(0, 1);
    at_start = false;
    return bytes;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    bool at_start = true;
    for (int32_t id : ids) {
      check_token_id(id, vocab_size(), kind());
      out += stream_bytes(id, at_start);
    }
    return utf8::sanitize(out);
  }

  int vocab_size() const override { return static_cast<int>(v_.tokens.size()); }
  int32_t bos_id() const override { return v_.bos; }
  std::vector<int32_t> eos_ids() const override {
    std::vector<int32_t> e;
    if (v_.eos >= 0) e.push_back(v_.eos);
    if (v_.eot >= 0 && v_.eot != v_.eos) e.push_back(v_.eot);
    return e;
  }
  std::string kind() const override { return "gguf-llama"; }
  int32_t token_id(std::string_view piece) const override {
    auto it = piece_ids_.find(piece);
    return it == piece_ids_.end() ? -1 : it->second;
  }
  std::string token_text(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    return v_.tokens[id];
  }
  bool is_special(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    return v_.types[id] == kControl || v_.types[id] == kUnknown;
  }

 private:
  // llama.cpp's llm_tokenizer_spm: one symbol per UTF-8 character, merge the adjacent pair whose
  // concatenation is a vocabulary token of highest score (leftmost on ties), then emit each symbol
  // as its token or, when the vocabulary lacks it, as byte tokens.
  void encode_cached(std::string_view text, std::vector<int32_t>& ids) const {
    if (cache_.find(text, ids)) return;
    size_t first = ids.size();
    encode_spm(text, ids);
    cache_.insert(text, std::span<const int32_t>(ids).subspan(first));
  }

  void encode_spm(std::string_view text, std::vector<int32_t>& ids) const {
    std::vector<BpeSymbol> symbols;
    for (uint32_t i = 0; i < text.size();) {
      uint32_t len = std::min<uint32_t>(lead_length(static_cast<uint8_t>(text[i])), text.size() - i);
      symbols.push_back({token_id(text.substr(i, len)), i, i + len});
      i += len;
    }
    bpe_merge_symbols(
        symbols,
        [&](const BpeSymbol& l, const BpeSymbol& r) -> std::optional<BpeMerge> {
          int32_t id = token_id(text.substr(l.begin, r.end - l.begin));
          if (id < 0) return std::nullopt;
          return BpeMerge{rank_[id], id};
        },
        [&](const BpeSymbol& s) {
          if (s.id >= 0) {
            ids.push_back(s.id);
            return;
          }
          for (uint32_t k = s.begin; k < s.end; ++k) {
            int32_t b = byte_ids_[static_cast<uint8_t>(text[k])];
            ids.push_back(b >= 0 ? b : v_.unk);
          }
        });
  }

  // llama.cpp's unicode_len_utf8: the length a lead byte announces (1 for a stray byte).
  static uint32_t lead_length(uint8_t lead) {
    if (lead < 0x80 || lead < 0xC0) return 1;
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    return 4;
  }

  GgufVocab v_;
  PieceMap piece_ids_;
  std::vector<int16_t> byte_of_;
  std::vector<int32_t> rank_;
  int32_t byte_ids_[256];
  SpecialMatcher all_specials_, user_defined_;
  bool cut_at_spaces_ = false;
  WordCache cache_;
};

const GgufValue& require(const GgufFile& f, const std::string& key, std::string_view why) {
  const GgufValue* v = f.find(key);
  FUSELM_CHECK(v != nullptr, "GGUF file '", f.path(), "' has no '", key, "' (", why,
               "); it carries no usable vocabulary: pass the model's tokenizer.json or tokenizer.model instead");
  return *v;
}

int64_t optional_int(const GgufFile& f, const std::string& key, int64_t fallback) {
  const GgufValue* v = f.find(key);
  return v ? v->as_int() : fallback;
}

bool optional_bool(const GgufFile& f, const std::string& key, bool fallback) {
  const GgufValue* v = f.find(key);
  if (!v) return fallback;
  if (const bool* b = std::get_if<bool>(&v->value)) return *b;
  return v->as_int() != 0;
}

// The pre-tokenizer regex llama.cpp uses for tokenizer.ggml.pre.
std::string pre_tokenizer_pattern(const std::string& pre, const std::string& path) {
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "smaug-bpe") return kLlama3Pattern;
  if (pre == "qwen2") return kQwen2Pattern;
  if (pre == "gpt-2" || pre == "default" || pre.empty()) return kGpt2Pattern;
  fail("GGUF file '", path, "': tokenizer.ggml.pre = \"", pre,
       "\" is not supported (supported: llama-bpe/llama3, qwen2, gpt-2/default); use the model's tokenizer.json");
}

std::unique_ptr<Tokenizer> gpt2_from_gguf(const GgufFile& f, const GgufVocab& v) {
  using nlohmann::json;
  const auto& merges = require(f, "tokenizer.ggml.merges", "BPE merges").array();
  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    int type = v.types.empty() ? kNormal : v.types[id];
    if (type == kControl || type == kUserDefined || type == kUnknown) {
      added.push_back({{"id", id}, {"content", v.tokens[id]}, {"special", type != kUserDefined},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"single_word", false}});
    }
    vocab[v.tokens[id]] = id;
  }
  json merge_list = json::array();
  for (const auto& m : merges) merge_list.push_back(m.string());
  std::string pre;
  if (const GgufValue* p = f.find("tokenizer.ggml.pre")) pre = p->string();
  json root = {
      {"added_tokens", added},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"},
                       {"pattern", {{"Regex", pre_tokenizer_pattern(pre, f.path())}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}, {"ignore_merges", pre != "gpt-2" && pre != "default"}}}};
  if (v.add_bos && v.bos >= 0) {
    const std::string& bos = v.tokens.at(v.bos);
    root["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", bos}}}}, {{"Sequence", {{"id", "A"}}}}})},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {v.bos}}, {"tokens", {bos}}}}}}};
  }
  json config = json::object();
  if (v.bos >= 0) config["bos_token"] = v.tokens[v.bos];
  if (v.eos >= 0) config["eos_token"] = v.tokens[v.eos];
  return make_hf_tokenizer(root, f.path(), config);
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  auto file = GgufFile::open(path);
  const GgufFile& f = *file;
  const std::string model = require(f, "tokenizer.ggml.model", "the vocabulary type").string();
  GgufVocab v;
  const auto& tokens = require(f, "tokenizer.ggml.tokens", "the token texts").array();
  v.tokens.reserve(tokens.size());
  for (const auto& t : tokens) v.tokens.push_back(t.string());
  FUSELM_CHECK(!v.tokens.empty(), "GGUF file '", path, "': tokenizer.ggml.tokens is empty");
  const size_t n = v.tokens.size();
  if (const GgufValue* s = f.find("tokenizer.ggml.scores")) {
    for (const auto& x : s->array()) v.scores.push_back(static_cast<float>(x.as_double()));
    FUSELM_CHECK(v.scores.size() == n, "GGUF file '", path, "': ", v.scores.size(), " scores for ", n, " tokens");
  }
  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    for (const auto& x : t->array()) v.types.push_back(static_cast<int>(x.as_int()));
    FUSELM_CHECK(v.types.size() == n, "GGUF file '", path, "': ", v.types.size(), " token types for ", n, " tokens");
  }
  auto id_key = [&](const std::string& key) {
    int64_t id = optional_int(f, key, -1);
    // -1 means "none"; any other negative value would wrap into a token id when narrowed to int32.
    FUSELM_CHECK(id >= -1 && id < static_cast<int64_t>(n), "GGUF file '", path, "': ", key, " = ", id,
                 " is outside the ", n, "-token vocabulary");
    return static_cast<int32_t>(id);
  };
  v.bos = id_key("tokenizer.ggml.bos_token_id");
  v.eos = id_key("tokenizer.ggml.eos_token_id");
  v.unk = id_key("tokenizer.ggml.unknown_token_id");
  v.eot = id_key("tokenizer.ggml.eot_token_id");
  if (const GgufValue* t = f.find("tokenizer.chat_template")) v.chat_template = t->string();
  std::unique_ptr<Tokenizer> tok;
  if (model == "llama") {
    FUSELM_CHECK(!v.scores.empty(), "GGUF file '", path, "': a \"llama\" vocabulary needs tokenizer.ggml.scores");
    if (v.types.empty()) v.types.assign(n, kNormal);
    v.add_bos = optional_bool(f, "tokenizer.ggml.add_bos_token", true);
    v.add_eos = optional_bool(f, "tokenizer.ggml.add_eos_token", false);
    v.add_space_prefix = optional_bool(f, "tokenizer.ggml.add_space_prefix", true);
    std::string chat_template = v.chat_template;
    tok = std::make_unique<GgufSpmTokenizer>(std::move(v));
    tok->set_chat_template(chat_template);
  } else if (model == "gpt2") {
    v.add_bos = optional_bool(f, "tokenizer.ggml.add_bos_token", false);
    tok = gpt2_from_gguf(f, v);
    tok->set_chat_template(v.chat_template);
  } else {
    fail("GGUF file '", path, "': tokenizer.ggml.model = \"", model,
         "\" is not supported (supported: llama, gpt2); use the model's tokenizer.json");
  }
  return tok;
}

}  // namespace fuselm::tok
