#include "model/file_sniff.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "core/error.h"

namespace fuselm {

namespace {

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  }
  return true;
}

std::string_view skip_bom_and_space(std::string_view s) {
  if (s.substr(0, 3) == "\xEF\xBB\xBF") s.remove_prefix(3);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return s;
}

bool looks_like_text(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u >= 0x20 || u == '\n' || u == '\r' || u == '\t' || u >= 0x80;
  });
}

}  // namespace

std::string printable_prefix(std::string_view bytes, size_t max_chars) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max_chars; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (bytes.size() > max_chars) out += "...";
  return out;
}

std::string describe_wrong_file(std::string_view path, std::string_view head, size_t file_size,
                                std::string_view expected, FileKind kind) {
  if (file_size == 0) {
    return str_cat("'", path, "' is empty (0 bytes), expected ", expected,
                   ": the download or copy probably failed; fetch the file again");
  }
  std::string_view text = skip_bom_and_space(head);
  if (text.starts_with("version https://git-lfs")) {
    return str_cat("'", path, "' is a Git LFS pointer (a ", file_size,
                   "-byte text stub), not ", expected,
                   ": the repository was cloned without its large files; run `git lfs pull` in it "
                   "(or download the file itself)");
  }
  for (std::string_view tag : {"<!doctype html", "<html", "<head", "<body", "<!--"}) {
    if (starts_with_ci(text, tag)) {
      return str_cat("'", path, "' is an HTML page, not ", expected,
                     ": probably a web page was downloaded instead of the file (on Hugging Face, "
                     "download from the /resolve/ URL, not /blob/, and log in for gated models)");
    }
  }
  if (kind == FileKind::Text) return "";
  if (head.starts_with("PK\x03\x04")) {
    return str_cat("'", path, "' is a zip archive (a PyTorch .pt/.bin checkpoint?), not ", expected,
                   ": PyTorch checkpoints are not supported; use the model's safetensors or GGUF files");
  }
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5) {
    return str_cat("'", path, "' is a Python pickle (an old PyTorch checkpoint?), not ", expected,
                   ": PyTorch checkpoints are not supported; use the model's safetensors or GGUF files");
  }
  // Model files are megabytes of binary; a small all-text file is an error page or a note.
  if (file_size < 4096 && head.size() == file_size && looks_like_text(head)) {
    return str_cat("'", path, "' is a ", file_size, "-byte text file, not ", expected, "; it begins: \"",
                   printable_prefix(text, 120), "\"");
  }
  return "";
}

void reject_wrong_file(const MappedFile& file, std::string_view expected, FileKind kind) {
  std::string_view head(reinterpret_cast<const char*>(file.data()), std::min<size_t>(file.size(), 4096));
  std::string why = describe_wrong_file(file.path(), head, file.size(), expected, kind);
  if (!why.empty()) throw Error(why);
}

}  // namespace fuselm
