#pragma once
// A loaded model: its config, its weights, and the storage that keeps the weights alive.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "model/config.h"
#include "model/weights.h"

namespace fuselm {

enum class ModelFormat { HfDirectory, Gguf, Llama2c, Synthetic };
std::string model_format_name(ModelFormat f);

struct Model {
  ModelConfig config;
  ModelWeights weights;
  ModelFormat format = ModelFormat::Synthetic;
  std::string source;          // what the user passed to -m
  std::string tokenizer_hint;  // where a tokenizer was found next to the weights ("" if none)

  // Keeps mapped files and converted tensors alive for as long as the weights point into them.
  std::vector<std::shared_ptr<const MappedFile>> mappings;
  std::vector<std::unique_ptr<std::byte[]>> owned;

  // Allocates `bytes` owned by the model (for tensors converted or permuted on load).
  std::byte* allocate(size_t bytes);
  // Generates host data for every synthetic tensor not yet materialized, in `dtype`.
  void materialize_synthetic(DType dtype = DType::BF16);

  int64_t parameter_count() const;
  size_t weight_bytes() const;
};

// Fills `dst` (numel elements of `dtype`) with the values of a synthetic tensor.
void fill_synthetic(const SyntheticInit& init, int64_t numel, DType dtype, void* dst);

}  // namespace fuselm
