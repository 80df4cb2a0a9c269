#pragma once
// Loads a model from what a user passes to -m: an HF directory, a .gguf file, a llama2.c .bin,
// or "synthetic:PRESET?key=value&..." (random weights at real shapes, made in memory).
#include <memory>
#include <string>

#include "model/model.h"

namespace fuselm {

struct LoadOptions {
  // Generate synthetic weights into host memory now (the CPU backend needs them); the CUDA
  // backend generates them on the device instead and leaves this off.
  bool materialize_synthetic = true;
};

// Throws Error with a message a user can act on when the model cannot be loaded.
std::unique_ptr<Model> load_model(const std::string& spec, const LoadOptions& options = {});

}  // namespace fuselm
