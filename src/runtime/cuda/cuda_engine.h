#pragma once
// The CUDA backend: weights uploaded once, a memory plan made at load, a paged KV cache.
#include <memory>

#include "runtime/engine.h"

namespace fuselm {

// Throws Error when no CUDA device is usable.
std::unique_ptr<Engine> make_cuda_engine(const Model& model, const EngineOptions& options);

}  // namespace fuselm
