// load_tokenizer: finds the tokenizer file in a folder and tells the formats apart by content,
// not by name (a llama2.c tokenizer.bin and a SentencePiece tokenizer.model can both start with
// byte 0x0A; Meta ships tiktoken rank files as tokenizer.model).
#include <cstring>
#include <filesystem>
#include <new>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/internal.h"

namespace fuselm {
namespace tok {
namespace {

namespace fs = std::filesystem;

enum class Format { kHfJson, kGguf, kLlama2c, kTiktoken, kSentencePiece, kUnknown };

// A llama2.c tokenizer.bin has no magic number: accept it when the records tile the file exactly.
bool looks_like_llama2c(const uint8_t* data, size_t size) {
  if (size < 12) return false;
  int32_t max_len;
  std::memcpy(&max_len, data, 4);
  if (max_len <= 0 || max_len > (1 << 16)) return false;
  size_t at = 4;
  while (at < size) {
    if (size - at < 8) return false;
    int32_t len;
    std::memcpy(&len, data + at + 4, 4);
    if (len < 0 || len > max_len || size - at - 8 < static_cast<size_t>(len)) return false;
    at += 8 + static_cast<size_t>(len);
  }
  return true;
}

Format sniff(const MappedFile& file) {
  const auto* data = reinterpret_cast<const uint8_t*>(file.data());
  std::string_view head(reinterpret_cast<const char*>(data), std::min<size_t>(file.size(), 1024));
  if (head.starts_with("GGUF")) return Format::kGguf;
  size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && head[first] == '{') return Format::kHfJson;
  if (looks_like_llama2c(data, file.size())) return Format::kLlama2c;
  if (looks_like_tiktoken(head)) return Format::kTiktoken;
  // A serialized ModelProto starts with field 1 (repeated SentencePiece), wire type 2: byte 0x0A.
  if (!head.empty() && head[0] == '\x0A') return Format::kSentencePiece;
  return Format::kUnknown;
}

// Names what a file that is no tokenizer at all most likely is.
std::string describe_unknown(const MappedFile& file) {
  std::string_view head(reinterpret_cast<const char*>(file.data()), std::min<size_t>(file.size(), 256));
  if (file.size() == 0) return "the file is empty";
  if (head.starts_with("version https://git-lfs")) return "it is a Git LFS pointer, not the file itself; run `git lfs pull`";
  if (head.find("<html") != std::string_view::npos || head.find("<!DOCTYPE") != std::string_view::npos ||
      head.find("<!doctype") != std::string_view::npos)
    return "it is an HTML page (a failed or login-walled download); download the raw file";
  return "its content matches none of the supported formats";
}

// The chat template shipped beside a tokenizer file: tokenizer_config.json's "chat_template"
// (a string, or a list of {name, template} where "default" wins), else chat_template.jinja.
std::string find_chat_template(const fs::path& dir) {
  fs::path config = dir / "tokenizer_config.json";
  if (fs::is_regular_file(config)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text_file(config.string()));
    } catch (const nlohmann::json::exception& e) {
      fail("'", config.string(), "' is not valid JSON: ", e.what());
    }
    if (j.contains("chat_template")) {
      const auto& t = j["chat_template"];
      if (t.is_string()) return t.get<std::string>();
      if (t.is_array()) {
        std::string fallback;
        for (const auto& named : t) {
          if (!named.contains("template")) continue;
          if (named.value("name", "") == "default") return named["template"].get<std::string>();
          if (fallback.empty()) fallback = named["template"].get<std::string>();
        }
        if (!fallback.empty()) return fallback;
      }
    }
  }
  fs::path jinja = dir / "chat_template.jinja";
  if (fs::is_regular_file(jinja)) return read_text_file(jinja.string());
  return {};
}

std::unique_ptr<Tokenizer> load_file(const std::string& path) {
  auto file = MappedFile::open(path);
  const fs::path dir = fs::path(path).parent_path();
  std::unique_ptr<Tokenizer> tok;
  switch (sniff(*file)) {
    case Format::kHfJson: {
      fs::path config = dir / "tokenizer_config.json";
      tok = load_hf_tokenizer(path, fs::is_regular_file(config) ? config.string() : std::string());
      break;
    }
    case Format::kGguf: return load_gguf_tokenizer(path);  // carries its own chat template
    case Format::kLlama2c: tok = load_llama2c_tokenizer(path); break;
    case Format::kTiktoken: tok = load_tiktoken_tokenizer(path); break;
    case Format::kSentencePiece: tok = load_sentencepiece_tokenizer(path); break;
    case Format::kUnknown:
      fail("cannot read '", path, "' as a tokenizer: ", describe_unknown(*file),
           ". Supported: HF tokenizer.json, a SentencePiece or tiktoken tokenizer.model, a .gguf file, a llama2.c "
           "tokenizer.bin");
  }
  tok->set_chat_template(find_chat_template(dir.empty() ? fs::path(".") : dir));
  return tok;
}

std::unique_ptr<Tokenizer> load_folder(const fs::path& dir, int depth) {
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer.bin"}) {
    fs::path candidate = dir / name;
    if (fs::is_regular_file(candidate)) return load_file(candidate.string());
  }
  // A model folder that names its tokenizer folder (the test checkpoints do).
  fs::path location = dir / "tokenizer-location.json";
  if (fs::is_regular_file(location) && depth == 0) {
    auto j = nlohmann::json::parse(read_text_file(location.string()), nullptr, false);
    if (j.is_object() && j.contains("tokenizer") && j["tokenizer"].is_string()) {
      std::string rel = j["tokenizer"];
      for (const fs::path& base : {dir, dir.parent_path()})
        if (fs::is_directory(base / rel)) return load_folder(base / rel, depth + 1);
    }
  }
  // llama2.c folders name their tokenizer tok<N>.bin (tok512.bin); checkpoints are .bin too, so
  // only files that parse as a tokenizer count.
  std::vector<fs::path> ggufs, llama2c;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const fs::path& p = entry.path();
    if (p.extension() == ".gguf") ggufs.push_back(p);
    if (p.extension() == ".bin" && p.filename().string().starts_with("tok")) {
      auto file = MappedFile::open(p.string());
      if (looks_like_llama2c(reinterpret_cast<const uint8_t*>(file->data()), file->size())) llama2c.push_back(p);
    }
  }
  if (llama2c.size() == 1) return load_file(llama2c[0].string());
  if (ggufs.size() == 1) return load_file(ggufs[0].string());
  fail("no tokenizer found in folder '", dir.string(),
       "': looked for tokenizer.json, tokenizer.model, tokenizer.bin, tok*.bin, tokenizer-location.json and a single .gguf",
       ggufs.size() > 1 ? " (found several .gguf files: pass one of them)" : "",
       llama2c.size() > 1 ? " (found several llama2.c tokenizers: pass one of them)" : "");
}

}  // namespace
}  // namespace tok

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  try {
    if (fs::is_directory(path, ec)) return tok::load_folder(path, 0);
    FUSELM_CHECK(fs::exists(path, ec), "tokenizer path '", path, "' does not exist");
    return tok::load_file(path);
  } catch (const std::bad_alloc&) {
    // std::bad_alloc says nothing of where. The loaders bound what a file can ask for by its length,
    // so this is a damaged file that slipped through, or memory that was already exhausted.
    fail("out of memory while loading the tokenizer '", path, "'; real tokenizers need well under 1 GB, so the file is "
         "probably corrupt (re-download it), or memory is exhausted");
  }
}

}  // namespace fuselm
