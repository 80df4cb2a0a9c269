#pragma once
// The CUDA backend's memory plan, made once at load for (max_batch, max tokens per step,
// max_seq_len): every activation, workspace and per-step input has a fixed offset in one arena, so a
// forward step allocates nothing and every buffer keeps its address (what CUDA graphs will need).
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "model/config.h"
#include "runtime/engine.h"

namespace fuselm {

// The largest step the engine accepts, fixed at load.
struct StepLimits {
  int max_batch = 0;           // chunks (sequences) in one step
  int max_tokens = 0;          // tokens in one step: max(max_prefill_tokens, max_batch)
  int max_seq_len = 0;         // positions per sequence
  int block_size = 0;          // KV tokens per block
  int max_blocks_per_seq = 0;  // ceil(max_seq_len / block_size): the block-table width
  int logits_rows = 0;         // fp32 logit rows computed at once (all_logits chunks go in slabs of this)
  int history_capacity = 0;    // repetition-penalty window ids per row held on the device (max_seq_len)
};

// Default cap on max_seq_len when the options leave it to the model (models declare up to 128K
// positions; the block tables and the decode plan are sized from it).
inline constexpr int kDefaultMaxSeqLenCap = 8192;

// Checks the options against the model and the attention kernels and derives the limits; throws
// Error naming the option to change.
StepLimits make_step_limits(const ModelConfig& config, const EngineOptions& options, int block_size);

struct ArenaSlice {
  size_t offset = 0;
  size_t bytes = 0;
};

// Device activations and workspaces. act = the engine's dtype (bf16/fp16); T = max_tokens, L = logits_rows.
struct ActivationPlan {
  ArenaSlice residual;       // fp32 [T][hidden]: the residual stream
  ArenaSlice normed;         // act [T][hidden]
  ArenaSlice qkv;            // act [T][q_dim + 2 kv_dim]
  ArenaSlice q;              // act [T][q_dim]: rotated queries
  ArenaSlice attn_out;       // act [T][q_dim]
  ArenaSlice proj;           // act [T][hidden]: attention / MLP block output
  ArenaSlice gate_up;        // act [T][2 ffn], or empty (plan_memory's gate_up_rows)
  ArenaSlice ffn_act;        // act [T][ffn]
  ArenaSlice head_rows;      // fp32 [L][hidden]: residual rows that need logits
  ArenaSlice head_normed;    // act [L][hidden]
  ArenaSlice logits;         // fp32 [L][vocab]
  ArenaSlice gemm_workspace;
  ArenaSlice attention_workspace;
  size_t total = 0;
};

// Per-step inputs, written to pinned host memory and copied to the same offsets on the device;
// B = max_batch.
struct StepInputPlan {
  ArenaSlice tokens;         // int32 [T]
  ArenaSlice positions;      // int32 [T]
  ArenaSlice token_batch;    // int32 [T]: the batch row of each token
  ArenaSlice logit_rows;     // int32 [T]: token indices whose logits are wanted
  ArenaSlice q_starts;       // int32 [B + 1]
  ArenaSlice kv_lens;        // int32 [B]
  ArenaSlice block_tables;   // int32 [B][max_blocks_per_seq]
  ArenaSlice sample_params;  // SampleParams [B]
  ArenaSlice history;        // int32 [B][history_capacity]
  ArenaSlice sampled;        // int32 [B]: sampled tokens (device to host)
  // What the fused decode graphs read, contiguous and in this order, so that a graph copies a
  // step's inputs in one pass ending at its last block-table row (from the engine's two replay
  // slots of pinned memory, laid out alike; these slices' host side is not used). The graphs
  // sample with the penalty windows of `history`, at the fixed row stride history_capacity.
  ArenaSlice decode_params;        // SampleParams [B]
  ArenaSlice decode_tokens;        // int32 [B]
  ArenaSlice decode_positions;     // int32 [B]
  ArenaSlice decode_kv_lens;       // int32 [B]
  ArenaSlice decode_block_tables;  // int32 [B][max_blocks_per_seq]
  size_t total = 0;
};

struct MemoryPlan {
  StepLimits limits;
  ActivationPlan activations;
  StepInputPlan inputs;
};

// `gate_up_rows`: whether steps write the gate/up projection's [T][2 ffn] output before SwiGLU (cuBLASLt
// prefill); the sm_90a prefill GEMM applies SwiGLU in its output pass and needs no such buffer
// (gate_up is then empty: on the Llama-3.1-8B shape at 8,192 tokens, 470 MB more for the KV cache).
MemoryPlan plan_memory(const ModelConfig& config, DType dtype, const StepLimits& limits, size_t gemm_workspace_bytes,
                       size_t attention_workspace_bytes, bool gate_up_rows = true);

// Bytes of one KV block across all layers (K and V).
size_t kv_block_bytes(const ModelConfig& config, DType dtype, int block_size);

}  // namespace fuselm
