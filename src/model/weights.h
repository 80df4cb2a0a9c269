#pragma once
// Weight tensors as stored: dtype and shape from the file, data used in place (memory-mapped)
// or generated (synthetic models). Matrices are row-major [out_features][in_features], y = W x.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace fuselm {

// Values of a synthetic tensor: element i = offset + scale * counter_uniform(seed, i).
struct SyntheticInit {
  bool active = false;
  uint64_t seed = 0;
  float scale = 0.0f;
  float offset = 0.0f;
};

struct WeightTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // [rows, cols] for matrices, [n] for vectors
  const void* data = nullptr;  // host bytes; null while a synthetic tensor is not materialized
  SyntheticInit synthetic;

  int64_t numel() const;
  size_t nbytes() const;
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
  bool has_data() const { return data != nullptr; }
};

struct LayerWeights {
  WeightTensor attn_norm;  // [hidden]
  WeightTensor wq;         // [q_dim, hidden]
  WeightTensor wk;         // [kv_dim, hidden]
  WeightTensor wv;         // [kv_dim, hidden]
  WeightTensor wo;         // [hidden, q_dim]
  WeightTensor ffn_norm;   // [hidden]
  WeightTensor w_gate;     // [ffn, hidden]
  WeightTensor w_up;       // [ffn, hidden]
  WeightTensor w_down;     // [hidden, ffn]
};

struct ModelWeights {
  WeightTensor token_embedding;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  WeightTensor final_norm;  // [hidden]
  WeightTensor lm_head;     // [vocab, hidden]; when tied, a copy of token_embedding (same name, same data)

  bool tied() const { return lm_head.name == token_embedding.name; }

  // Every distinct tensor once (a tied lm_head is not listed twice).
  std::vector<const WeightTensor*> all() const;
  std::vector<WeightTensor*> all_mutable();
};

}  // namespace fuselm
