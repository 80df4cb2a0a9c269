#pragma once
// The model's weights on the device, uploaded once at load in the engine's dtype (bf16/fp16) and
// laid out for the kernels: each layer's q, k and v matrices stacked into one [q_dim + 2 kv_dim][hidden]
// matrix and gate/up into one [2 ffn][hidden], so each is one GEMM. Norm weights stay fp32 (a few KB,
// and the residual stream they scale is fp32).
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "core/dtype.h"
#include "model/model.h"
#include "runtime/cuda/device_memory.h"

namespace fuselm {

struct DeviceLayerWeights {
  const void* qkv = nullptr;      // [q_dim + 2 kv_dim][hidden]
  const void* wo = nullptr;       // [hidden][q_dim]
  const void* gate_up = nullptr;  // [2 ffn][hidden]
  const void* down = nullptr;     // [hidden][ffn]
  const float* attn_norm = nullptr;
  const float* ffn_norm = nullptr;
};

struct DeviceWeights {
  DType dtype = DType::BF16;
  const void* embedding = nullptr;  // [vocab][hidden]
  std::vector<DeviceLayerWeights> layers;
  const float* final_norm = nullptr;
  const void* lm_head = nullptr;    // [vocab][hidden]; the embedding itself when tied
  const float* rope_inv_freq = nullptr;  // [head_dim / 2]
  DeviceBuffer storage;
};

// Uploads (or, for synthetic tensors without host data, generates on the device) every weight.
// F32, F16 and BF16 sources are converted on the device; Q8_0 is dequantized on the host first.
// Throws Error naming the tensor when a shape does not match the config.
DeviceWeights upload_weights(const Model& model, DType dtype, cudaStream_t stream);

}  // namespace fuselm
