#pragma once
// The CPU reference backend: fp32 compute on the stored weights, a contiguous KV cache per
// sequence. It is the oracle every GPU path is checked against, and what CI runs.
#include <memory>

#include "runtime/engine.h"

namespace fuselm {

std::unique_ptr<Engine> make_cpu_engine(const Model& model, const EngineOptions& options);

}  // namespace fuselm
