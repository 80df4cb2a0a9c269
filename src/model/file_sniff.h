#pragma once
// Recognises the common wrong files saved in place of a model (a Git LFS pointer, an HTML page,
// an empty or text file, a PyTorch pickle) so that loaders can say what happened in words.
#include <cstddef>
#include <string>
#include <string_view>

#include "core/mapped_file.h"

namespace fuselm {

enum class FileKind { Binary, Text };

// Returns why `head` (the first bytes of `path`, whose full size is `file_size`) cannot be the
// file of kind `expected` (e.g. "a GGUF file"), or "" when nothing is recognised. Small all-text
// files are only rejected where a binary file is expected.
std::string describe_wrong_file(std::string_view path, std::string_view head, size_t file_size,
                                std::string_view expected, FileKind kind = FileKind::Binary);

// Throws Error with describe_wrong_file's message when it recognises `file` as a wrong file.
void reject_wrong_file(const MappedFile& file, std::string_view expected, FileKind kind = FileKind::Binary);

// Prints up to `max_chars` bytes for a message: printable ASCII kept, everything else escaped.
std::string printable_prefix(std::string_view bytes, size_t max_chars);

}  // namespace fuselm
