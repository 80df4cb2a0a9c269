// load_tokenizer: finds the tokenizer file in a folder and tells the formats apart by content,
// not by name (a llama2.c tokenizer.bin and a SentencePiece tokenizer.model can both start with
// byte 0x0A; Meta ships tiktoken rank files as tokenizer.model).
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/internal.h"

namespace fuselm {
namespace tok {
namespace {

namespace fs = std::filesystem;

enum class Format { kLlama2c, kUnknown };

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
  if (looks_like_llama2c(data, file.size())) return Format::kLlama2c;
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

std::unique_ptr<Tokenizer> load_file(const std::string& path) {
  auto file = MappedFile::open(path);
  switch (sniff(*file)) {
    case Format::kLlama2c: return load_llama2c_tokenizer(path);
    case Format::kUnknown: break;
  }
  fail("cannot read '", path, "' as a tokenizer: ", describe_unknown(*file),
       ". Supported: a llama2.c tokenizer.bin");
}

std::unique_ptr<Tokenizer> load_folder(const fs::path& dir) {
  for (const char* name : {"tokenizer.bin"}) {
    fs::path candidate = dir / name;
    if (fs::is_regular_file(candidate)) return load_file(candidate.string());
  }
  fail("no tokenizer found in folder '", dir.string(), "': looked for tokenizer.bin");
}

}  // namespace
}  // namespace tok

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return tok::load_folder(path);
  FUSELM_CHECK(fs::exists(path, ec), "tokenizer path '", path, "' does not exist");
  return tok::load_file(path);
}

}  // namespace fuselm
