#include "model/loader.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <system_error>

#include "core/error.h"
#include "model/file_sniff.h"
#include "model/loaders.h"

namespace fuselm {

static_assert(std::endian::native == std::endian::little,
              "model files are little-endian and are used in place; big-endian hosts are not supported");

namespace fs = std::filesystem;

namespace loaders {

void validate_config(const ModelConfig& c, const std::string& source) {
  c.validate(source);
  FUSELM_CHECK(c.max_position_embeddings > 0, source, ": model config field 'max_position_embeddings' must be positive, found ",
               c.max_position_embeddings);
  auto at_most = [&](int v, int max, const char* name) {
    FUSELM_CHECK(v <= max, source, ": model config field '", name, "' = ", v, " is larger than ", max,
                 ", beyond any supported model; the file is corrupt or not a Llama-family model");
  };
  at_most(c.hidden_size, 1 << 17, "hidden_size");
  at_most(c.num_layers, 4096, "num_hidden_layers");
  at_most(c.num_heads, 4096, "num_attention_heads");
  at_most(c.num_kv_heads, 4096, "num_key_value_heads");
  at_most(c.head_dim, 4096, "head_dim");
  at_most(c.intermediate_size, 1 << 20, "intermediate_size");
  at_most(c.vocab_size, 1 << 24, "vocab_size");
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void check_shape(const std::string& file, const std::string& tensor, const std::vector<int64_t>& found,
                 const std::vector<int64_t>& expected) {
  FUSELM_CHECK(found == expected, file, ": tensor '", tensor, "' has shape ", shape_string(found),
               ", expected ", shape_string(expected),
               " from the model config; the weights do not match the config (wrong or mixed-up files?)");
}

ExpectedShapes expected_shapes(const ModelConfig& c) {
  const int64_t hidden = c.hidden_size, vocab = c.vocab_size, ffn = c.intermediate_size;
  return ExpectedShapes{
      .embedding = {vocab, hidden},
      .norm = {hidden},
      .wq = {c.q_dim(), hidden},
      .wk = {c.kv_dim(), hidden},
      .wv = {c.kv_dim(), hidden},
      .wo = {hidden, c.q_dim()},
      .w_gate = {ffn, hidden},
      .w_up = {ffn, hidden},
      .w_down = {hidden, ffn},
      .lm_head = {vocab, hidden},
  };
}

const void* in_place_or_copy(Model& model, const std::byte* data, size_t nbytes, DType dtype) {
  const size_t align = dtype == DType::F32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(data) % align == 0) return data;
  std::byte* copy = model.allocate(nbytes);
  std::memcpy(copy, data, nbytes);
  return copy;
}

void interleaved_to_rotate_half(const std::byte* src, std::byte* dst, int64_t rows, size_t row_bytes,
                                int n_heads) {
  FUSELM_CHECK(n_heads > 0 && rows % n_heads == 0 && (rows / n_heads) % 2 == 0,
               "cannot undo the RoPE row permutation: ", rows, " rows do not split into ", n_heads,
               " heads of even size");
  const int64_t head_dim = rows / n_heads;
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t j = 0; j < half; ++j) {
      for (int64_t t = 0; t < 2; ++t) {
        const int64_t from = h * head_dim + 2 * j + t;
        const int64_t to = h * head_dim + t * half + j;
        std::memcpy(dst + to * row_bytes, src + from * row_bytes, row_bytes);
      }
    }
  }
}

void tie_lm_head(ModelWeights& weights) { weights.lm_head = weights.token_embedding; }

}  // namespace loaders

namespace {

bool has_extension(const fs::path& p, std::string_view ext) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e == ext;
}

[[noreturn]] void fail_missing(const std::string& spec) {
  std::string hint;
  // "owner/name" that does not exist locally is most likely a Hugging Face repository id.
  if (std::count(spec.begin(), spec.end(), '/') == 1 && spec.front() != '/' && spec.front() != '.') {
    hint = str_cat("; if '", spec, "' is a Hugging Face repository, download it first (e.g. `hf download ", spec,
                   " --local-dir DIR`) and pass DIR");
  }
  fail("model path '", spec,
       "' does not exist; expected an HF model directory (config.json + *.safetensors), a .gguf file, a llama2.c "
       ".bin checkpoint, or synthetic:PRESET (e.g. synthetic:llama-3.2-1b)",
       hint);
}

std::unique_ptr<Model> load_model_unguarded(const std::string& spec, const LoadOptions& options) {
  if (spec.starts_with("synthetic:")) return loaders::load_synthetic(spec, options);

  std::error_code ec;
  const fs::path path(spec);
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) fail_missing(spec);

  std::unique_ptr<Model> model;
  if (fs::is_directory(status)) {
    model = loaders::load_hf_directory(spec);
  } else {
    char magic[4] = {};
    std::ifstream(spec, std::ios::binary).read(magic, sizeof magic);
    const bool gguf_magic = std::memcmp(magic, "GGUF", 4) == 0;
    if (gguf_magic || has_extension(path, ".gguf")) {
      model = loaders::load_gguf(spec);
    } else if (has_extension(path, ".safetensors") || path.filename() == "config.json") {
      fail("'", spec, "' is part of an HF model; pass the directory that holds it (with config.json) instead: '",
           path.parent_path().string().empty() ? "." : path.parent_path().string(), "'");
    } else {
      // Anything else is read as a llama2.c checkpoint, whose checks explain what does not fit.
      model = loaders::load_llama2c(spec);
    }
  }
  model->source = spec;
  return model;
}

}  // namespace

std::unique_ptr<Model> load_model(const std::string& spec, const LoadOptions& options) {
  FUSELM_CHECK(!spec.empty(), "no model given: pass an HF model directory, a .gguf file, a llama2.c .bin "
                              "checkpoint, or synthetic:PRESET");
  try {
    return load_model_unguarded(spec, options);
  } catch (const std::bad_alloc&) {
    // std::bad_alloc says nothing of where; the sizes in the files are checked against their lengths,
    // so this is most likely a model larger than the free memory.
    fail("out of memory while loading the model '", spec, "': it needs more memory than is free (`fuselm inspect -m ",
         spec, "` shows its weight bytes); free memory or use a smaller model or dtype");
  }
}

}  // namespace fuselm
