#pragma once
// Internal to the model layer: one loader per file format, and the checks they share.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/loader.h"
#include "model/model.h"

namespace fuselm::loaders {

std::unique_ptr<Model> load_hf_directory(const std::string& dir);
std::unique_ptr<Model> load_gguf(const std::string& path);
std::unique_ptr<Model> load_llama2c(const std::string& path);
std::unique_ptr<Model> load_synthetic(const std::string& spec, const LoadOptions& options);

// config.validate(source), plus upper bounds on every dimension (far above any real model) so that
// a corrupt file cannot make the loader allocate absurd amounts or overflow int arithmetic.
void validate_config(const ModelConfig& config, const std::string& source);

// "[4096, 128]"
std::string shape_string(const std::vector<int64_t>& shape);

// Throws Error naming the tensor, the file, and both shapes when `found` differs from `expected`.
void check_shape(const std::string& file, const std::string& tensor, const std::vector<int64_t>& found,
                 const std::vector<int64_t>& expected);

// Expected shapes of every tensor slot for `config` (HF names, as in weights.h).
struct ExpectedShapes {
  std::vector<int64_t> embedding, norm, wq, wk, wv, wo, w_gate, w_up, w_down, lm_head;
};
ExpectedShapes expected_shapes(const ModelConfig& config);

// Returns `data` when it is suitably aligned for `dtype`, else a copy in model-owned memory
// (unaligned loads are undefined behaviour; safetensors does not promise alignment).
const void* in_place_or_copy(Model& model, const std::byte* data, size_t nbytes, DType dtype);

// Reorders the rows of a [rows, row_bytes] matrix from the interleaved RoPE layout (Meta's
// llama2.c, llama.cpp's GGUF q/k) to HF's rotate-half layout: within each head of `head_dim`
// rows, source row 2j+t becomes row t*head_dim/2 + j.
void interleaved_to_rotate_half(const std::byte* src, std::byte* dst, int64_t rows, size_t row_bytes,
                                int n_heads);

// "Q4_K" for a GGML type id, "unknown type N" when not known.
std::string ggml_type_name(uint32_t type);

// Sets lm_head to a copy of token_embedding (same name, data and synthetic init): tied weights.
void tie_lm_head(ModelWeights& weights);

}  // namespace fuselm::loaders
