#pragma once
// Synthetic models: real architectures (or any shape) with counter-RNG weights made in memory or on
// the device, for benchmarks and tests without downloads.
//   synthetic:llama-3.1-8b            a preset
//   synthetic:llama-3.1-8b?vocab=32000 a preset with overrides
//   synthetic:llama?hidden=256&layers=4&heads=8&kv_heads=2&ffn=688&vocab=512
// Keys: hidden, layers, heads, kv_heads, head_dim, ffn, vocab, max_pos, theta, eps, tied, seed.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace fuselm {

struct SyntheticSpec {
  std::string preset;  // "llama" for the free-form shape
  ModelConfig config;
  uint64_t seed = 0;
};

// Parses "synthetic:NAME[?key=value&...]"; throws Error listing the valid presets or keys.
SyntheticSpec parse_synthetic_spec(const std::string& spec);

std::vector<std::string> synthetic_preset_names();

}  // namespace fuselm
