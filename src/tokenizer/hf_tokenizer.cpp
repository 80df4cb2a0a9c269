// HF tokenizer.json with a BPE model, following the `tokenizers` library: added tokens are split
// off first, then normalizer -> pre-tokenizer -> BPE per word, then the post-processor template.
// Byte-level vocabularies ("Ġworld") are converted to raw bytes at load, so the ByteLevel steps
// cost nothing at encode time. decode() skips special tokens, as tokenizers' decode does by default.
#include <array>
#include <deque>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "model/json_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/internal.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

namespace fuselm::tok {
namespace {

using nlohmann::json;

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // ▁

// Ids index the token tables, so they are bounded twice: absolutely (no real vocabulary comes near
// 2^24 tokens), and by the number of tokens the file holds. Real vocabularies number their tokens
// from 0 with few gaps (added tokens follow the model's, sometimes after a small one); sized by the
// largest id alone, a file holding one token with id 2^24-1 cost 1 GB.
constexpr int64_t kMaxTokenId = (1 << 24) - 1;
int64_t id_table_limit(size_t tokens) { return 2 * static_cast<int64_t>(tokens) + 1024; }

// A {"String": s} or {"Regex": r} pattern of Split / Replace.
struct Pattern {
  std::string literal;
  std::shared_ptr<Regex> regex;

  static Pattern parse(const json& j, std::string_view where) {
    Pattern p;
    if (j.contains("String")) {
      p.literal = j.at("String").get<std::string>();
    } else if (j.contains("Regex")) {
      p.regex = std::make_shared<Regex>(j.at("Regex").get<std::string>());
    } else {
      fail(where, ": pattern must be {\"String\": ...} or {\"Regex\": ...}, found ", j.dump());
    }
    return p;
  }

  // Calls on_match(begin, end) for each non-overlapping match.
  template <class F>
  void for_each_match(std::string_view text, F on_match) const {
    if (regex) {
      regex->for_each_match(text, on_match);
      return;
    }
    if (literal.empty()) return;
    for (size_t at = 0; (at = text.find(literal, at)) != std::string_view::npos; at += literal.size())
      on_match(at, at + literal.size());
  }

  std::string replace(std::string_view text, std::string_view content) const {
    if (!regex) return replace_all(text, literal, content);
    std::string out;
    size_t last = 0;
    regex->for_each_match(text, [&](size_t b, size_t e) {
      out.append(text.substr(last, b - last));
      out.append(content);
      last = e;
    });
    out.append(text.substr(last));
    return out;
  }
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

SplitBehavior parse_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  fail("tokenizer.json: unknown Split behavior \"", name,
       "\" (supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
}

// Splits `text` by the [begin, end) `matches` as HF's NormalizedString::split does.
void split_by_matches(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<std::string_view>& out) {
  // (span, is_match) covering the text.
  std::vector<std::pair<std::string_view, bool>> parts;
  size_t last = 0;
  for (auto [b, e] : matches) {
    if (b > last) parts.push_back({text.substr(last, b - last), invert});
    parts.push_back({text.substr(b, e - b), !invert});
    last = e;
  }
  if (last < text.size()) parts.push_back({text.substr(last), invert});
  auto join = [&](std::string_view a, std::string_view b) {  // adjacent spans of `text`
    return std::string_view(a.data(), a.size() + b.size());
  };
  std::vector<std::string_view> pieces;
  bool previous_was_match = false;
  std::string_view pending_next;  // a MergedWithNext match waiting for its next part
  for (auto [span, is_match] : parts) {
    switch (behavior) {
      case SplitBehavior::kRemoved:
        if (!is_match) pieces.push_back(span);
        break;
      case SplitBehavior::kIsolated: pieces.push_back(span); break;
      case SplitBehavior::kMergedWithPrevious:
        if (is_match && !pieces.empty() && !previous_was_match)
          pieces.back() = join(pieces.back(), span);
        else
          pieces.push_back(span);
        break;
      case SplitBehavior::kMergedWithNext:
        if (is_match) {
          if (!pending_next.empty()) pieces.push_back(pending_next);
          pending_next = span;
        } else if (!pending_next.empty()) {
          pieces.push_back(join(pending_next, span));
          pending_next = {};
        } else {
          pieces.push_back(span);
        }
        break;
      case SplitBehavior::kContiguous:
        if (is_match && previous_was_match && !pieces.empty())
          pieces.back() = join(pieces.back(), span);
        else
          pieces.push_back(span);
        break;
    }
    previous_was_match = is_match;
  }
  if (!pending_next.empty()) pieces.push_back(pending_next);
  for (auto p : pieces)
    if (!p.empty()) out.push_back(p);
}

struct Normalizer {
  enum class Type { kPrepend, kReplace, kNfc, kLowercase, kStrip } type;
  std::string text;  // Prepend: the prefix; Replace: the content
  Pattern pattern;
  bool strip_left = false, strip_right = false;
};

struct PreTokenizer {
  enum class Type { kSplit, kByteLevel, kMetaspace, kDigits } type;
  Pattern pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel
  std::shared_ptr<Regex> byte_level_regex;  // ByteLevel with use_regex
  std::string replacement;  // Metaspace
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;  // Metaspace
  bool individual_digits = false;
};

struct DecoderStep {
  enum class Type { kByteLevel, kMetaspace, kReplace, kByteFallback, kFuse, kStrip } type;
  Pattern pattern;
  std::string content;  // Replace content, Strip content, Metaspace replacement
  int start = 0, stop = 0;
  bool prepend = true;  // Metaspace strips the first token's space unless prepend_scheme is never
};

// model.vocab and model.merges, the bulk of a tokenizer.json (17 MB for Llama 3), read straight
// into flat tables instead of a JSON tree.
struct BpeTables {
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
};

// A SAX handler that builds the JSON tree for everything except model.vocab / model.merges,
// which go to BpeTables.
class TokenizerJsonReader {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  TokenizerJsonReader(const std::string& path, BpeTables& tables) : path_(path), tables_(tables) {}
  json& root() { return root_; }
  bool has_vocab() const { return saw_vocab_; }
  bool has_merges() const { return saw_merges_; }

  bool null() { return value(json()); }
  bool boolean(bool b) { return value(json(b)); }
  bool number_integer(number_integer_t v) { return integer(json(v)); }
  bool number_unsigned(number_unsigned_t v) { return integer(json(v)); }
  bool number_float(number_float_t v, const string_t&) {
    if (mode_ != Mode::kTree) fail_here("a number where a token or merge was expected");
    return value(json(v));
  }
  bool binary(binary_t&) { return value(json()); }
  bool string(string_t& s) {
    if (mode_ == Mode::kMerges) {
      if (pair_depth_) {
        pair_.push_back(std::move(s));
        return true;
      }
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail("tokenizer.json '", path_, "': merge ", tables_.merges.size(), " \"", s,
             "\" is not two tokens separated by one space");
      tables_.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      return true;
    }
    if (mode_ == Mode::kVocab) fail_here("a string where a token id was expected");
    return value(json(std::move(s)));
  }
  bool key(string_t& k) {
    if (mode_ == Mode::kVocab) {
      key_ = std::move(k);
    } else {
      keys_.back() = std::move(k);
    }
    return true;
  }
  bool start_object(size_t) {
    if (mode_ == Mode::kVocab || (mode_ == Mode::kMerges)) fail_here("an object inside model.vocab or model.merges");
    if (at_model_member("vocab")) {
      mode_ = Mode::kVocab;
      saw_vocab_ = true;
      return true;
    }
    open(json::object());
    return true;
  }
  bool end_object() {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kTree;
      return true;
    }
    close();
    return true;
  }
  bool start_array(size_t) {
    if (mode_ == Mode::kMerges) {
      if (pair_depth_) fail_here("nested arrays in model.merges");
      pair_depth_ = true;
      pair_.clear();
      return true;
    }
    if (mode_ == Mode::kVocab) fail_here("an array inside model.vocab");
    if (at_model_member("merges")) {
      mode_ = Mode::kMerges;
      saw_merges_ = true;
      return true;
    }
    open(json::array());
    return true;
  }
  bool end_array() {
    if (mode_ == Mode::kMerges) {
      if (pair_depth_) {
        if (pair_.size() != 2)
          fail("tokenizer.json '", path_, "': merge ", tables_.merges.size(), " must be a pair of tokens, found ",
               pair_.size(), " strings");
        tables_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
        pair_depth_ = false;
      } else {
        mode_ = Mode::kTree;
      }
      return true;
    }
    close();
    return true;
  }
  bool parse_error(size_t position, const std::string& last_token, const nlohmann::detail::exception& e) {
    fail("tokenizer.json '", path_, "' is not valid JSON: ", e.what(), " (byte ", position, ", near \"",
         last_token.substr(0, 40), "\"); the file is truncated or corrupt");
  }

 private:
  enum class Mode { kTree, kVocab, kMerges };

  [[noreturn]] void fail_here(const char* what) const {
    fail("tokenizer.json '", path_, "': found ", what, "; model.vocab must map tokens to ids and model.merges ",
         "must list token pairs");
  }
  // True when the value about to start is root.model.<name>.
  bool at_model_member(const char* name) const {
    return stack_.size() == 2 && keys_.size() == 2 && keys_[0] == "model" && keys_[1] == name && stack_[1]->is_object();
  }
  bool integer(json&& v) {
    if (mode_ == Mode::kVocab) {
      const std::optional<int64_t> id = json_integer(v, 0, kMaxTokenId);
      if (!id)
        fail_json_integer(v, 0, kMaxTokenId, str_cat("tokenizer.json '", path_, "': token \"", key_, "\"'s id"));
      tables_.vocab.emplace_back(std::move(key_), static_cast<int32_t>(*id));
      return true;
    }
    if (mode_ == Mode::kMerges) fail_here("a number where a merge was expected");
    return value(std::move(v));
  }
  json* place(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[keys_.back()];
    slot = std::move(v);
    return &slot;
  }
  bool value(json&& v) {
    place(std::move(v));
    return true;
  }
  void open(json&& container) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth))
      fail("tokenizer.json '", path_, "': JSON nested more than ", kMaxJsonDepth,
           " levels deep; no real tokenizer nests this deep, the file is corrupt");
    stack_.push_back(place(std::move(container)));
    keys_.emplace_back();
  }
  void close() {
    stack_.pop_back();
    keys_.pop_back();
  }

  std::string path_;
  BpeTables& tables_;
  json root_;
  std::vector<json*> stack_;
  std::vector<std::string> keys_;  // the current member name of each open object
  Mode mode_ = Mode::kTree;
  std::string key_;
  std::vector<std::string> pair_;
  bool pair_depth_ = false;
  bool saw_vocab_ = false, saw_merges_ = false;
};

class HfTokenizer final : public Tokenizer {
 public:
  // `tables`: model.vocab / model.merges when read separately (else they are taken from `root`).
  HfTokenizer(const json& root, const std::string& path, BpeTables* tables = nullptr) : path_(path) {
    const json& model = root.at("model");
    std::string type = model.value("type", "BPE");
    FUSELM_CHECK(type == "BPE", "tokenizer.json '", path, "': model type \"", type,
                 "\" is not supported (only BPE, used by the Llama, Mistral, Qwen and GPT-2 families)");
    parse_pre_tokenizer(root.value("pre_tokenizer", json()));
    parse_normalizer(root.value("normalizer", json()));
    const json added = root.value("added_tokens", json::array());
    parse_model(model, tables, added.size());
    parse_added_tokens(added);
    parse_post_processor(root.value("post_processor", json()));
    parse_decoder(root.value("decoder", json()));
    // End-of-text markers of the families this engine serves; tokenizer_config's eos_token is
    // put first by apply_config.
    for (const char* name : {"</s>", "<|end_of_text|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|im_end|>"}) {
      int32_t id = token_id(name);
      if (id >= 0 && special_[id]) eos_.push_back(id);
    }
  }

  void apply_config(const json& config) {
    auto token_name = [](const json& j) -> std::string {
      if (j.is_string()) return j.get<std::string>();
      if (j.is_object() && j.contains("content")) return j.at("content").get<std::string>();
      return {};
    };
    if (config.contains("bos_token") && bos_ < 0) bos_ = token_id(token_name(config["bos_token"]));
    if (config.contains("eos_token")) {
      int32_t id = token_id(token_name(config["eos_token"]));
      if (id >= 0) {
        std::erase(eos_, id);
        eos_.insert(eos_.begin(), id);
      }
    }
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    std::string checked;
    if (!utf8::is_valid(text)) {
      checked = utf8::sanitize(text);  // the library only takes valid strings
      text = checked;
    }
    std::vector<int32_t> ids;
    if (add_bos) ids.insert(ids.end(), template_prefix_.begin(), template_prefix_.end());
    // Added tokens with normalized=false are found in the raw text, the others in the normalized
    // fragments between them (HF's AddedVocabulary::extract_and_normalize).
    const SpecialMatcher& matcher = parse_special ? raw_added_all_ : raw_added_plain_;
    bool at_input_start = true;
    matcher.split(
        text,
        [&](std::string_view fragment) {
          encode_fragment(fragment, at_input_start && fragment.data() == text.data(), parse_special, ids);
          at_input_start = false;
        },
        [&](int32_t id) {
          ids.push_back(id);
          at_input_start = false;
        });
    if (add_bos) ids.insert(ids.end(), template_suffix_.begin(), template_suffix_.end());
    return ids;
  }

  std::string token_bytes(int32_t id) const override {
    bool at_start = false;
    return stream_bytes(id, at_start);
  }

  std::string stream_bytes(int32_t id, bool& at_start) const override {
    check_token_id(id, vocab_size(), kind());
    if (special_[id]) return {};  // skipped, as decode(skip_special_tokens=True)
    std::vector<std::string> tokens{bytes_[id]};
    run_decoders(tokens, at_start, /*lossy=*/false);
    at_start = false;
    std::string out;
    for (auto& t : tokens) out += t;
    return out;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
      check_token_id(id, vocab_size(), kind());
      if (!special_[id]) tokens.push_back(bytes_[id]);
    }
    run_decoders(tokens, true, /*lossy=*/true);
    std::string out;
    for (auto& t : tokens) out += t;
    return utf8::sanitize(out);
  }

  int vocab_size() const override { return static_cast<int>(bytes_.size()); }
  int32_t bos_id() const override { return bos_; }
  std::vector<int32_t> eos_ids() const override { return eos_; }
  std::string kind() const override { return byte_level_ ? "hf-bpe-bytelevel" : "hf-bpe"; }

  int32_t token_id(std::string_view piece) const override {
    auto it = text_ids_.find(piece);
    return it == text_ids_.end() ? -1 : it->second;
  }
  std::string token_text(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    return texts_[id];
  }
  bool is_special(int32_t id) const override {
    check_token_id(id, vocab_size(), kind());
    return special_[id];
  }

 private:
  // --- loading ---------------------------------------------------------------------------------

  [[noreturn]] void unsupported(std::string_view what, const json& j) const {
    fail("tokenizer.json '", path_, "': ", what, " \"", j.value("type", std::string("?")),
         "\" is not supported by this engine; supported: ", what == "normalizer" ? "Sequence, Prepend, Replace, NFC, Lowercase, Strip"
         : what == "pre_tokenizer" ? "Sequence, Split, ByteLevel, Metaspace, Digits"
         : what == "decoder" ? "Sequence, ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip"
                             : "Sequence, TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing");
  }

  void parse_normalizer(const json& j) {
    if (j.is_null()) return;
    std::string type = j.at("type");
    if (type == "Sequence") {
      for (const auto& n : j.at("normalizers")) parse_normalizer(n);
    } else if (type == "Prepend") {
      normalizers_.push_back({Normalizer::Type::kPrepend, j.at("prepend"), {}});
    } else if (type == "Replace") {
      normalizers_.push_back({Normalizer::Type::kReplace, j.at("content"), Pattern::parse(j.at("pattern"), path_)});
    } else if (type == "NFC") {
      normalizers_.push_back({Normalizer::Type::kNfc, {}, {}});
    } else if (type == "Lowercase") {
      normalizers_.push_back({Normalizer::Type::kLowercase, {}, {}});
    } else if (type == "Strip") {
      Normalizer n{Normalizer::Type::kStrip, {}, {}};
      n.strip_left = j.value("strip_left", true);
      n.strip_right = j.value("strip_right", true);
      normalizers_.push_back(n);
    } else {
      unsupported("normalizer", j);
    }
  }

  void parse_pre_tokenizer(const json& j) {
    if (j.is_null()) return;
    std::string type = j.at("type");
    PreTokenizer p{};
    if (type == "Sequence") {
      for (const auto& n : j.at("pretokenizers")) parse_pre_tokenizer(n);
      return;
    } else if (type == "Split") {
      p.type = PreTokenizer::Type::kSplit;
      p.pattern = Pattern::parse(j.at("pattern"), path_);
      p.behavior = parse_behavior(j.at("behavior"));
      p.invert = j.value("invert", false);
    } else if (type == "ByteLevel") {
      p.type = PreTokenizer::Type::kByteLevel;
      p.add_prefix_space = j.value("add_prefix_space", true);
      if (j.value("use_regex", true)) p.byte_level_regex = std::make_shared<Regex>(std::string(kGpt2Pattern));
      byte_level_ = true;
    } else if (type == "Metaspace") {
      p.type = PreTokenizer::Type::kMetaspace;
      p.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
      // A character in the library; an empty one would split the text at every position forever.
      FUSELM_CHECK(!p.replacement.empty(), "tokenizer.json '", path_, "': the Metaspace pre_tokenizer has an empty "
                   "replacement; it must be one character (usually \"\xE2\x96\x81\")");
      p.split = j.value("split", true);
      std::string scheme = j.value("prepend_scheme", std::string(j.value("add_prefix_space", true) ? "always" : "never"));
      p.prepend = scheme == "first" ? PreTokenizer::Prepend::kFirst
                  : scheme == "never" ? PreTokenizer::Prepend::kNever
                                      : PreTokenizer::Prepend::kAlways;
    } else if (type == "Digits") {
      p.type = PreTokenizer::Type::kDigits;
      p.individual_digits = j.value("individual_digits", false);
    } else {
      unsupported("pre_tokenizer", j);
    }
    pre_tokenizers_.push_back(std::move(p));
  }

  // Throws when `id` would leave most of the id tables empty (see id_table_limit).
  void check_id_density(int64_t id, std::string_view token) const {
    const int64_t limit = id_table_limit(token_count_);
    FUSELM_CHECK(id < limit, "tokenizer.json '", path_, "': token \"", token, "\" has id ", id, ", but the file holds ",
                 token_count_, " tokens (model.vocab and added_tokens), which allow ids up to ", limit - 1,
                 " (twice the tokens, plus 1024); real vocabularies number their tokens from 0 with few gaps, so the "
                 "file is corrupt");
  }

  // Vocabulary strings as the model matches them: raw bytes for byte-level vocabularies.
  std::string model_form(const std::string& text) const {
    if (!byte_level_) return text;
    std::string bytes;
    return byte_level_to_bytes(text, bytes) ? bytes : text;
  }

  // `added_count`: the number of added_tokens, which share the id tables with model.vocab.
  void parse_model(const json& model, BpeTables* tables, size_t added_count) {
    BpeTables from_tree;
    if (!tables) {
      const json& vocab = model.at("vocab");
      FUSELM_CHECK(vocab.is_object(), "tokenizer.json '", path_, "': model.vocab must be an object of token -> id");
      for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        const std::optional<int64_t> id = json_integer(it.value(), 0, kMaxTokenId);
        if (!id)
          fail_json_integer(it.value(), 0, kMaxTokenId, str_cat("tokenizer.json '", path_, "': token \"", it.key(),
                                                                 "\"'s id"));
        from_tree.vocab.emplace_back(it.key(), static_cast<int32_t>(*id));
      }
      int index = 0;
      for (const auto& m : model.at("merges")) {
        if (m.is_string()) {
          const std::string& s = m.get_ref<const std::string&>();
          size_t space = s.find(' ');
          FUSELM_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos, "tokenizer.json '",
                       path_, "': merge ", index, " \"", s, "\" is not two tokens separated by one space");
          from_tree.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
        } else {
          FUSELM_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), "tokenizer.json '",
                       path_, "': merge ", index, " must be \"a b\" or [\"a\", \"b\"], found ", m.dump());
          from_tree.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        }
        ++index;
      }
      tables = &from_tree;
    }
    token_count_ = tables->vocab.size() + added_count;
    const std::pair<std::string, int32_t>* largest = nullptr;
    for (const auto& entry : tables->vocab)
      if (!largest || entry.second > largest->second) largest = &entry;
    const int32_t max_id = largest ? largest->second : -1;
    if (largest) check_id_density(max_id, largest->first);
    texts_.assign(max_id + 1, {});
    bytes_.assign(max_id + 1, {});
    model_ids_.reserve(tables->vocab.size());
    text_ids_.reserve(tables->vocab.size() + 1024);
    for (auto& [text, id] : tables->vocab) {
      bytes_[id] = model_form(text);
      model_ids_.emplace(bytes_[id], id);
      text_ids_.emplace(text, id);
      texts_[id] = std::move(text);
    }
    byte_fallback_ = model.value("byte_fallback", false);
    fuse_unk_ = model.value("fuse_unk", false);
    ignore_merges_ = model.value("ignore_merges", false);
    if (model.contains("unk_token") && model["unk_token"].is_string()) unk_ = token_id(model["unk_token"].get<std::string>());
    if (model.contains("continuing_subword_prefix") && model["continuing_subword_prefix"].is_string())
      subword_prefix_ = model["continuing_subword_prefix"];
    if (model.contains("end_of_word_suffix") && model["end_of_word_suffix"].is_string())
      word_suffix_ = model["end_of_word_suffix"];
    if (!byte_level_ && byte_fallback_) {
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        byte_ids_[b] = token_id(name);
      }
    }
    cut_at_spaces_ = !byte_level_ && !ignore_merges_ && space_runs_are_word_starts(texts_, kSpaceSymbol);
    merges_.reserve(tables->merges.size() * 2);
    std::string joined;
    int32_t rank = 0;
    for (const auto& [left, right] : tables->merges) {
      joined.assign(left);
      joined.append(right);
      int32_t a = token_id(left), b = token_id(right), merged = token_id(joined);
      FUSELM_CHECK(a >= 0 && b >= 0 && merged >= 0, "tokenizer.json '", path_, "': merge ", rank, " (\"", left,
                   "\" + \"", right, "\") uses or produces a token missing from the vocabulary");
      merges_.insert_or_assign(pair_key(a, b), BpeMerge{rank, merged});  // a repeated pair keeps its last rank, as HF does
      ++rank;
    }
  }

  void parse_added_tokens(const json& added) {
    for (const auto& t : added) {
      std::string content = t.at("content");
      // The same bounds as model.vocab's ids: the tables below are sized by the largest id.
      const auto id = static_cast<int32_t>(require_json_integer(
          t.at("id"), 0, kMaxTokenId, str_cat("tokenizer.json '", path_, "': added token \"", content, "\"'s id")));
      check_id_density(id, content);
      if (id >= static_cast<int32_t>(texts_.size())) {
        texts_.resize(id + 1);
        bytes_.resize(id + 1);
      }
      texts_[id] = content;
      bytes_[id] = content;  // added tokens are never byte-level encoded
      text_ids_[content] = id;
      bool special = t.value("special", false);
      SpecialMatcher::Token match{id, t.value("lstrip", false), t.value("rstrip", false), t.value("single_word", false)};
      const bool normalized = t.value("normalized", !special);  // HF's default for an AddedToken
      (normalized ? normalized_added_all_ : raw_added_all_).add(content, match);
      if (!special) (normalized ? normalized_added_plain_ : raw_added_plain_).add(content, match);
      if (special) special_ids_.push_back(id);
    }
    special_.assign(texts_.size(), false);
    for (int32_t id : special_ids_) special_[id] = true;
  }

  // Ids of the post-processor's special tokens, checked here rather than when a prompt first uses them.
  int32_t template_id(const json& id, std::string_view name) const {
    return static_cast<int32_t>(require_json_integer(id, 0, vocab_size() - 1,
                                                     str_cat("tokenizer.json '", path_, "': post_processor special "
                                                             "token \"", name, "\"'s id (the vocabulary has ",
                                                             vocab_size(), " tokens)")));
  }

  void parse_post_processor(const json& j) {
    if (j.is_null()) return;
    std::string type = j.at("type");
    if (type == "Sequence") {
      for (const auto& p : j.at("processors")) parse_post_processor(p);
    } else if (type == "ByteLevel") {
      // Only adjusts offsets.
    } else if (type == "TemplateProcessing") {
      const json& specials = j.value("special_tokens", json::object());
      bool seen_sequence = false;
      for (const auto& piece : j.at("single")) {
        if (piece.contains("Sequence")) {
          seen_sequence = true;
          continue;
        }
        std::string name = piece.at("SpecialToken").at("id");
        FUSELM_CHECK(specials.contains(name), "tokenizer.json '", path_, "': post_processor template uses \"", name,
                     "\" which is missing from its special_tokens");
        for (const auto& id : specials[name].at("ids"))
          (seen_sequence ? template_suffix_ : template_prefix_).push_back(template_id(id, name));
      }
      if (template_prefix_.size() == 1) bos_ = template_prefix_[0];
    } else if (type == "BertProcessing" || type == "RobertaProcessing") {
      template_prefix_.push_back(template_id(j.at("cls").at(1), j.at("cls").at(0).get<std::string>()));
      template_suffix_.push_back(template_id(j.at("sep").at(1), j.at("sep").at(0).get<std::string>()));
    } else {
      unsupported("post_processor", j);
    }
  }

  void parse_decoder(const json& j) {
    if (j.is_null()) return;
    std::string type = j.at("type");
    DecoderStep d{};
    if (type == "Sequence") {
      for (const auto& n : j.at("decoders")) parse_decoder(n);
      return;
    } else if (type == "ByteLevel") {
      d.type = DecoderStep::Type::kByteLevel;
    } else if (type == "Metaspace") {
      d.type = DecoderStep::Type::kMetaspace;
      d.content = j.value("replacement", std::string("\xE2\x96\x81"));
      std::string scheme = j.value("prepend_scheme", std::string(j.value("add_prefix_space", true) ? "always" : "never"));
      d.prepend = scheme != "never";
    } else if (type == "Replace") {
      d.type = DecoderStep::Type::kReplace;
      d.pattern = Pattern::parse(j.at("pattern"), path_);
      d.content = j.at("content");
    } else if (type == "ByteFallback") {
      d.type = DecoderStep::Type::kByteFallback;
    } else if (type == "Fuse") {
      d.type = DecoderStep::Type::kFuse;
    } else if (type == "Strip") {
      d.type = DecoderStep::Type::kStrip;
      d.content = j.at("content");
      // A character in the library; stripping an empty one would loop `start` times per token.
      FUSELM_CHECK(!d.content.empty(), "tokenizer.json '", path_, "': the Strip decoder has an empty content; it "
                   "must be one character");
      auto count = [&](const char* key) {
        return j.contains(key) ? static_cast<int>(require_json_integer(j[key], 0, INT32_MAX, str_cat(
                                     "tokenizer.json '", path_, "': the Strip decoder's '", key, "'")))
                               : 0;
      };
      d.start = count("start");
      d.stop = count("stop");
    } else {
      unsupported("decoder", j);
    }
    decoders_.push_back(std::move(d));
  }

  // --- encoding --------------------------------------------------------------------------------

  static std::array<int32_t, 256> filled_minus_one() {
    std::array<int32_t, 256> a;
    a.fill(-1);
    return a;
  }

  static uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

  std::string normalize(std::string_view text) const {
    std::string s(text);
    for (const auto& n : normalizers_) {
      switch (n.type) {
        case Normalizer::Type::kPrepend:
          if (!s.empty()) s.insert(0, n.text);
          break;
        case Normalizer::Type::kReplace: s = n.pattern.replace(s, n.text); break;
        case Normalizer::Type::kNfc: s = unicode::nfc(s); break;
        case Normalizer::Type::kLowercase:
          for (char& c : s)
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
          for (unsigned char c : s)
            FUSELM_CHECK(c < 0x80, "tokenizer.json '", path_,
                         "': the Lowercase normalizer is implemented for ASCII text only");
          break;
        case Normalizer::Type::kStrip: {
          auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
          size_t b = 0, e = s.size();
          if (n.strip_left)
            while (b < e && is_space(s[b])) ++b;
          if (n.strip_right)
            while (e > b && is_space(s[e - 1])) --e;
          s = s.substr(b, e - b);
          break;
        }
      }
    }
    return s;
  }

  void encode_fragment(std::string_view fragment, bool at_input_start, bool parse_special,
                       std::vector<int32_t>& ids) const {
    const std::string normalized = normalize(fragment);
    const SpecialMatcher& matcher = parse_special ? normalized_added_all_ : normalized_added_plain_;
    if (matcher.empty()) {
      encode_normalized(normalized, at_input_start, ids);
      return;
    }
    matcher.split(
        normalized,
        [&](std::string_view part) {
          encode_normalized(part, at_input_start && part.data() == normalized.data(), ids);
        },
        [&](int32_t id) { ids.push_back(id); });
  }

  // Pre-tokenizes normalized text and runs the model on each word.
  void encode_normalized(std::string_view normalized, bool at_input_start, std::vector<int32_t>& ids) const {
    std::deque<std::string> arena;  // owns rewritten pieces
    std::vector<std::string_view> pieces{normalized};
    std::vector<std::string_view> next;
    std::vector<std::pair<size_t, size_t>> matches;
    for (const auto& p : pre_tokenizers_) {
      next.clear();
      for (size_t k = 0; k < pieces.size(); ++k) {
        std::string_view piece = pieces[k];
        const bool first_piece = at_input_start && k == 0;
        switch (p.type) {
          case PreTokenizer::Type::kSplit:
            matches.clear();
            p.pattern.for_each_match(piece, [&](size_t b, size_t e) { matches.push_back({b, e}); });
            split_by_matches(piece, matches, p.behavior, p.invert, next);
            break;
          case PreTokenizer::Type::kByteLevel: {
            if (p.add_prefix_space && !piece.starts_with(' ')) {
              std::string& prefixed = arena.emplace_back(1, ' ');
              prefixed.append(piece);
              piece = prefixed;
            }
            if (!p.byte_level_regex) {
              next.push_back(piece);
              break;
            }
            matches.clear();
            p.byte_level_regex->for_each_match(piece, [&](size_t b, size_t e) { matches.push_back({b, e}); });
            split_by_matches(piece, matches, SplitBehavior::kIsolated, false, next);
            break;
          }
          case PreTokenizer::Type::kMetaspace: {
            std::string s = replace_all(piece, " ", p.replacement);
            bool prepend = p.prepend == PreTokenizer::Prepend::kAlways ||
                           (p.prepend == PreTokenizer::Prepend::kFirst && first_piece);
            if (prepend && !std::string_view(s).starts_with(p.replacement)) s.insert(0, p.replacement);
            std::string_view owned = arena.emplace_back(std::move(s));
            if (!p.split) {
              next.push_back(owned);
              break;
            }
            matches.clear();
            for (size_t at = 0; (at = owned.find(p.replacement, at)) != std::string_view::npos; at += p.replacement.size())
              matches.push_back({at, at + p.replacement.size()});
            split_by_matches(owned, matches, SplitBehavior::kMergedWithNext, false, next);
            break;
          }
          case PreTokenizer::Type::kDigits: {
            matches.clear();
            for (size_t i = 0; i < piece.size(); ++i)
              if (piece[i] >= '0' && piece[i] <= '9') matches.push_back({i, i + 1});
            split_by_matches(piece, matches, p.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                             false, next);
            break;
          }
        }
      }
      pieces.swap(next);
    }
    for (std::string_view word : pieces) encode_word(word, ids);
  }

  void encode_word(std::string_view word, std::vector<int32_t>& ids) const {
    constexpr size_t kLongWord = 64;
    if (cut_at_spaces_ && word.size() > kLongWord) {
      // SentencePiece-style files have no pre-tokenizer: the whole text is one word.
      for_each_space_segment(word, kSpaceSymbol, [&](std::string_view seg) { encode_piece(seg, ids); });
      return;
    }
    encode_piece(word, ids);
  }

  void encode_piece(std::string_view word, std::vector<int32_t>& ids) const {
    if (word.empty()) return;
    if (ignore_merges_) {
      if (auto it = model_ids_.find(word); it != model_ids_.end()) {
        ids.push_back(it->second);
        return;
      }
    }
    if (cache_.find(word, ids)) return;
    std::vector<BpeSymbol> symbols;
    initial_symbols(word, symbols);
    size_t first = ids.size();
    if (!symbols.empty()) {
      bpe_merge(
          symbols,
          [&](const BpeSymbol& l, const BpeSymbol& r) -> std::optional<BpeMerge> {
            auto it = merges_.find(pair_key(l.id, r.id));
            if (it == merges_.end()) return std::nullopt;
            return it->second;
          },
          ids);
    }
    cache_.insert(word, std::span<const int32_t>(ids).subspan(first));
  }

  // HF's BPE::merge_word: one symbol per character (per byte for byte-level vocabularies), with
  // byte fallback and (fused) unknown tokens for characters outside the vocabulary.
  void initial_symbols(std::string_view word, std::vector<BpeSymbol>& symbols) const {
    int32_t unk_pending = -1;
    uint32_t unk_begin = 0, unk_end = 0;
    auto flush_unk = [&] {
      if (unk_pending >= 0) symbols.push_back({unk_pending, unk_begin, unk_end});
      unk_pending = -1;
    };
    std::string key;
    for (uint32_t i = 0; i < word.size();) {
      uint32_t len = byte_level_ ? 1 : static_cast<uint32_t>(utf8::char_length(word, i));
      const bool is_first = i == 0, is_last = i + len == word.size();
      std::string_view ch = word.substr(i, len);
      std::string_view lookup = ch;
      if ((!is_first && !subword_prefix_.empty()) || (is_last && !word_suffix_.empty())) {
        key.assign(is_first ? "" : subword_prefix_);
        key.append(ch);
        if (is_last) key.append(word_suffix_);
        lookup = key;
      }
      if (auto it = model_ids_.find(lookup); it != model_ids_.end()) {
        flush_unk();
        symbols.push_back({it->second, i, i + len});
      } else if (byte_fallback_ && std::all_of(lookup.begin(), lookup.end(),
                                               [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
        // HF does not flush a pending unknown here: byte tokens go before it.
        for (char c : lookup) symbols.push_back({byte_ids_[static_cast<uint8_t>(c)], i, i + len});
      } else if (unk_ >= 0) {
        if (unk_pending >= 0 && fuse_unk_) {
          unk_end = i + len;
        } else {
          flush_unk();
          unk_pending = unk_;
          unk_begin = i;
          unk_end = i + len;
        }
      } else {
        fail("tokenizer.json '", path_, "': character \"", std::string(ch),
             "\" is not in the vocabulary and the model has neither byte_fallback nor an unk_token");
      }
      i += len;
    }
    flush_unk();
  }

  // --- decoding --------------------------------------------------------------------------------

  // Applies the decoder chain to `tokens`. `first` says tokens[0] starts the text. Without `lossy`,
  // byte tokens stay raw bytes (a stream completes them later).
  void run_decoders(std::vector<std::string>& tokens, bool first, bool lossy) const {
    bool fused = false;
    for (const auto& d : decoders_) {
      switch (d.type) {
        case DecoderStep::Type::kByteLevel: {
          // The vocabulary is already raw bytes; the library joins everything here.
          std::string all;
          for (auto& t : tokens) all += t;
          tokens.assign(1, lossy ? utf8::sanitize(all) : all);
          fused = true;
          break;
        }
        case DecoderStep::Type::kMetaspace:
          for (size_t i = 0; i < tokens.size(); ++i) {
            tokens[i] = replace_all(tokens[i], d.content, " ");
            if (i == 0 && first && d.prepend && tokens[i].starts_with(' ')) tokens[i].erase(0, 1);
          }
          break;
        case DecoderStep::Type::kReplace:
          for (auto& t : tokens) t = d.pattern.replace(t, d.content);
          break;
        case DecoderStep::Type::kByteFallback: {
          std::vector<std::string> out;
          std::string bytes;
          size_t byte_count = 0;
          auto flush = [&] {
            if (byte_count == 0) return;
            if (!lossy || utf8::is_valid(bytes)) {
              out.push_back(bytes);
            } else {
              // The library replaces a whole invalid run, one U+FFFD per byte.
              std::string r;
              for (size_t k = 0; k < byte_count; ++k) r += utf8::kReplacement;
              out.push_back(r);
            }
            bytes.clear();
            byte_count = 0;
          };
          for (auto& t : tokens) {
            int b = parse_byte_piece(t);
            if (b >= 0) {
              bytes += static_cast<char>(b);
              ++byte_count;
            } else {
              flush();
              out.push_back(std::move(t));
            }
          }
          flush();
          tokens.swap(out);
          break;
        }
        case DecoderStep::Type::kFuse: {
          std::string all;
          for (auto& t : tokens) all += t;
          tokens.assign(1, all);
          fused = true;
          break;
        }
        case DecoderStep::Type::kStrip: {
          for (size_t i = 0; i < tokens.size(); ++i) {
            // After Fuse only the text's own start and end are stripped.
            bool strip_start = !fused || (i == 0 && first);
            std::string& t = tokens[i];
            if (strip_start)
              for (int k = 0; k < d.start && t.starts_with(d.content); ++k) t.erase(0, d.content.size());
            bool strip_stop = !fused || lossy;  // a stream cannot know where the text ends
            if (strip_stop)
              for (int k = 0; k < d.stop && t.ends_with(d.content); ++k) t.resize(t.size() - d.content.size());
          }
          break;
        }
      }
    }
  }

  std::string path_;
  size_t token_count_ = 0;  // entries of model.vocab and added_tokens
  std::vector<Normalizer> normalizers_;
  std::vector<PreTokenizer> pre_tokenizers_;
  std::vector<DecoderStep> decoders_;
  bool byte_level_ = false;
  bool cut_at_spaces_ = false;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  int32_t unk_ = -1;
  std::string subword_prefix_, word_suffix_;
  std::array<int32_t, 256> byte_ids_ = filled_minus_one();
  std::vector<std::string> texts_;  // as stored in tokenizer.json
  std::vector<std::string> bytes_;  // as the model matches them (raw bytes for byte-level)
  std::vector<bool> special_;
  std::vector<int32_t> special_ids_;
  PieceMap model_ids_, text_ids_;
  std::unordered_map<uint64_t, BpeMerge> merges_;
  // Added tokens matched in the raw text (normalized=false) or in normalized text; all of them
  // (parse_special) or only the non-special ones.
  SpecialMatcher raw_added_all_, raw_added_plain_, normalized_added_all_, normalized_added_plain_;
  std::vector<int32_t> template_prefix_, template_suffix_;
  int32_t bos_ = -1;
  std::vector<int32_t> eos_;
  WordCache cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_hf_tokenizer(const nlohmann::json& root, const std::string& path,
                                             const nlohmann::json& config) {
  try {
    auto tok = std::make_unique<HfTokenizer>(root, path);
    if (config.is_object()) tok->apply_config(config);
    return tok;
  } catch (const json::exception& e) {
    fail("tokenizer '", path, "' has an unexpected structure: ", e.what());
  }
}

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path, const std::string& config_path) {
  auto file = MappedFile::open(path);
  std::string_view text(reinterpret_cast<const char*>(file->data()), file->size());
  BpeTables tables;
  TokenizerJsonReader reader(path, tables);
  json::sax_parse(text.begin(), text.end(), &reader);
  json& root = reader.root();
  FUSELM_CHECK(root.is_object() && root.contains("model"), "'", path,
               "' is JSON but not an HF tokenizer.json: it has no \"model\" object");
  std::string type = root["model"].value("type", "BPE");
  FUSELM_CHECK(type == "BPE", "tokenizer.json '", path, "': model type \"", type,
               "\" is not supported (only BPE, used by the Llama, Mistral, Qwen and GPT-2 families)");
  FUSELM_CHECK(reader.has_vocab() && reader.has_merges(), "tokenizer.json '", path,
               "': the BPE model needs model.vocab (an object) and model.merges (an array)");
  std::unique_ptr<HfTokenizer> tok;
  try {
    tok = std::make_unique<HfTokenizer>(root, path, &tables);
    if (!config_path.empty()) {
      json config;
      try {
        config = json::parse(read_text_file(config_path));
      } catch (const json::exception& e) {
        fail("'", config_path, "' is not valid JSON: ", e.what());
      }
      tok->apply_config(config);
    }
  } catch (const json::exception& e) {
    fail("tokenizer.json '", path, "' has an unexpected structure: ", e.what());
  }
  return tok;
}

}  // namespace fuselm::tok
