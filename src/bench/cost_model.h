#pragma once
// What a forward step must cost, counted from the model's dimensions: the fewest bytes a decode
// step moves through memory, and the FLOPs of a prefill. Achieved bandwidth and TFLOP/s are these
// counts over measured time.
//
// Decode-step bytes (one new token per sequence, cached_len tokens already in its KV cache):
//   weights      every layer matrix and norm once, the final norm, the LM head once (shared by the
//                whole batch); plus one embedding row per sequence when the embedding is not tied
//                to the LM head (a tied table is already read whole as the LM head);
//   kv_read      K and V of every cached token of every sequence, in every layer;
//   kv_write     K and V of the new token of every sequence;
//   activations  per layer and token, each intermediate vector written once and read once
//                (attn-norm out, q|k|v, attention out, residual, ffn-norm out, silu(gate)*up,
//                residual), the final-norm output likewise, and the fp32 logits written and read.
// Prefill FLOPs: 2 * matmul params * tokens (q, k, v, o, gate, up, down of every layer)
//   + 2 * vocab * hidden * logit_rows (the LM head only for the positions whose logits are
//   computed: the last one of a prompt) + 4 * layers * heads * head_dim * sum of causal context
//   (QK^T and PV, each 2 FLOPs per query, key and dim; query at position p sees p + 1 keys).
#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "model/config.h"

namespace fuselm::bench {

struct CostModel {
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  bool tied = false;
  DType weight_dtype = DType::BF16;
  DType norm_dtype = DType::BF16;  // f32 when the matrices are block-quantized
  DType kv_dtype = DType::BF16;
  DType act_dtype = DType::BF16;

  int64_t q_dim() const { return int64_t{heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{kv_heads} * head_dim; }
  // q, k, v, o, gate, up, down of one layer.
  int64_t matmul_params_per_layer() const;
  int64_t matmul_params() const { return matmul_params_per_layer() * layers; }
  int64_t lm_head_params() const { return int64_t{vocab} * hidden; }
  // Every distinct parameter (a tied LM head counted once).
  int64_t parameter_count() const;

  int64_t layer_weight_bytes() const;  // 7 matrices + 2 norms
  int64_t lm_head_bytes() const;
  int64_t embedding_row_bytes() const;
  // Every distinct weight once: what the model occupies in `weight_dtype`.
  int64_t weight_bytes() const;
  // K and V of one token in every layer: 2 * layers * kv_heads * head_dim * sizeof(kv element).
  int64_t kv_bytes_per_token() const;
  // Intermediate activations of one token through the whole model (see the header comment).
  int64_t activation_bytes_per_token() const;
};

// `weight_dtype` is the dtype the engine keeps matrices in; KV and activations as the engine
// stores them (bf16/fp16 on the GPU, f32 in the CPU reference).
CostModel make_cost_model(const ModelConfig& config, DType weight_dtype, DType kv_dtype, DType act_dtype);

struct StepBytes {
  int64_t weights = 0;
  int64_t kv_read = 0;
  int64_t kv_write = 0;
  int64_t activations = 0;
  int64_t total() const { return weights + kv_read + kv_write + activations; }
  StepBytes& operator+=(const StepBytes& o);
};

// One decode step of `batch` sequences, each with `cached_len` tokens already in the cache.
StepBytes decode_step_bytes(const CostModel& m, int batch, int64_t cached_len);
// One decode step of sequences with the given cached lengths.
StepBytes decode_step_bytes(const CostModel& m, std::span<const int64_t> cached_lens);

// Sum over the new tokens of their causal context: tokens start..start+n-1, each seeing itself
// and every earlier token: sum_{i=0}^{n-1} (start + i + 1).
int64_t causal_context_sum(int64_t start, int64_t n);
// The attention part of that: 4 * layers * heads * head_dim * causal_context_sum(start, tokens).
double attention_flops(const CostModel& m, int64_t start, int64_t tokens);
// FLOPs of appending `tokens` tokens to a sequence holding `start`, with `logit_rows` rows of
// logits computed.
double prefill_flops(const CostModel& m, int64_t start, int64_t tokens, int64_t logit_rows = 1);
// FLOPs of one decode step of `batch` sequences with `cached_len` tokens cached each.
double decode_step_flops(const CostModel& m, int batch, int64_t cached_len);

}  // namespace fuselm::bench
