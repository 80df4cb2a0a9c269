#pragma once
// The fused decode step for small batches (m <= 16 tokens, one per sequence): per layer four
// weight-streaming GEMMs with fused prologues/epilogues plus split-KV attention:
//   qkv:     RMSNorm (folded) → Q/K/V projection → RoPE → paged KV append
//   attn:    split-KV decode attention (the last CTA of a head group merges the splits)
//   o:       O projection + residual add (+ the FFN norm's x·g and sums of squares)
//   gate_up: RMSNorm (folded) → gate/up projection → SwiGLU
//   down:    down projection + residual add (+ the next layer's (or final) norm inputs)
// then the LM head with the final norm folded in. Every launch has fixed buffers and a fixed
// configuration, so the step can be captured once in a CUDA graph and replayed.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/skinny_ffn.h"
#include "kernels/cuda/skinny_gemm.h"

namespace fuselm {

struct FusedDecodeLayer {
  PackedWeight qkv;      // packed with qkv_rope_row_map over [Wq; Wk; Wv]
  PackedWeight o;
  PackedWeight gate_up;  // packed with gate_up_row_map over [Wgate; Wup]
  PackedWeight down;
  const float* attn_norm = nullptr;  // [hidden], fp32
  const float* ffn_norm = nullptr;
  void* k_cache = nullptr;  // this layer's paged pools
  void* v_cache = nullptr;
};

// The skinny GEMM variants of each decode matrix, chosen once by the plan.
struct FusedDecodeVariants {
  SkinnyGemmChoice qkv, o, gate_up, down, lm_head;
  // Launches of up to this many tokens run gate/up and down as one launch (skinny_ffn.h; same
  // bits); 0 = never.
  int ffn_one_launch_tokens = 0;
  // One-token steps run the O projection inside decode attention's launch (attention.h,
  // DecodeOFold; same bits), with FusedDecodeBuffers::o_fold_ready. Set only where
  // decode_o_fold_fits.
  bool o_in_attention = false;
  static FusedDecodeVariants all(SkinnyGemmVariant v) {
    const SkinnyGemmChoice c = SkinnyGemmChoice::same(v);
    return {c, c, c, c, c};
  }
};

struct FusedDecodeModel {
  DType dtype = DType::BF16;
  int hidden = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  float eps = 1e-5f;
  const void* embedding = nullptr;  // [vocab][hidden] row-major, weights dtype
  std::vector<FusedDecodeLayer> layers;
  const float* final_norm = nullptr;  // fp32
  PackedWeight lm_head;
  const float* inv_freq = nullptr;  // device [head_dim / 2]
  PagedKvLayout kv_layout;
  FusedDecodeVariants variants;
  // The one-launch FFN's schedule and counters (variants.ffn_one_launch_tokens > 0).
  SkinnyFfnPlan ffn_plan;
  // Launch the GEMMs and the attention with programmatic dependent launch (sm_90 code only; the
  // launchers drop it elsewhere): each GEMM streams its first weights while its predecessor ends.
  bool pdl = true;
};

// Device buffers for up to kSkinnyGemmMaxTokens tokens; sizes from fused_decode_buffer_sizes.
struct FusedDecodeBuffers {
  float* residual = nullptr;  // [16][hidden]
  void* xg = nullptr;         // [16][hidden]  normed-input copy (x · g)
  float* partials = nullptr;  // [16][ceil(hidden/16)]  per-tile sums of squares
  void* q = nullptr;          // [16][n_heads * head_dim]
  void* attn = nullptr;       // [16][n_heads * head_dim]
  void* act = nullptr;        // [16][ffn]
  float* logits = nullptr;    // [16][vocab]
  void* attention_workspace = nullptr;
  KernelTrace* trace = nullptr;  // [fused_decode_trace_slots(layers)] timeline slots, or null
  // The LM head's greedy pick for the step's rows (skinny_gemm.h), or none (tile_keys null).
  SkinnyGreedyPick greedy_pick;
  // kDecodeOFoldReadyInts ints, zeroed once: the folded O projection's flags (variants.o_in_attention).
  int* o_fold_ready = nullptr;
};

// Timeline slots of one fused step (kernel_trace.h): the embedding, then per layer qkv, attention,
// o, gate_up and down, then the LM head. (A step with the O projection in attention's launch
// stamps no o slot.)
enum class FusedTraceOp { Qkv, Attention, O, GateUp, Down };
inline int fused_decode_trace_slots(int layers) { return 2 + 5 * layers; }  // embedding, layers, LM head
inline int fused_decode_trace_slot(int layer, FusedTraceOp op) { return 1 + 5 * layer + static_cast<int>(op); }
inline int fused_decode_trace_head_slot(int layers) { return 1 + 5 * layers; }

struct FusedDecodeBufferSizes {
  size_t residual, xg, partials, q, attn, act, logits, attention_workspace;  // bytes
};
FusedDecodeBufferSizes fused_decode_buffer_sizes(const FusedDecodeModel& model, const DecodeAttentionPlan& plan);

// One step's inputs (device arrays of m entries; block_tables [m][max_blocks_per_seq]).
struct FusedDecodeInputs {
  const int32_t* tokens = nullptr;  // a token < 0: see `sampled`
  const int32_t* positions = nullptr;  // position of each new token (= cached length before it)
  const int32_t* kv_lens = nullptr;    // positions + 1
  const int32_t* block_tables = nullptr;
  int max_blocks_per_seq = 0;
  int m = 0;
  // The previous step's sampled ids: a token < 0 stands for sampled[-1 - token], the id sampled for
  // that row, which the host then need not read back before launching this step.
  const int32_t* sampled = nullptr;
};

// Runs the whole step; logits[m][vocab] (fp32) hold the result, and with buffers.greedy_pick the
// greedy rows' tokens (m <= kSkinnyGreedyPickMaxTokens). Launch-only: no host sync.
Status fused_decode_step(const FusedDecodeModel& model, const FusedDecodeBuffers& buffers,
                         const FusedDecodeInputs& inputs, const DecodeAttentionPlan& attention_plan,
                         cudaStream_t stream);

// Gathers embeddings into the residual stream and writes the first norm's inputs (x·g, per-tile
// sums of squares), as the residual epilogue does for later layers. A token < 0 is read from
// sampled[-1 - token] (FusedDecodeInputs::tokens).
Status fused_embed(const void* table, DType dtype, int hidden, const int32_t* tokens, const int32_t* sampled, int m,
                   const float* norm_weight, float* residual, void* xg, float* partials, cudaStream_t stream,
                   bool pdl = false, KernelTrace* trace = nullptr);

// Copies a step's inputs from pinned host memory to the device in a kernel: in a graph, cheaper
// than a copy node between two kernels (a few microseconds against ~9 on the H200).
Status copy_step_inputs(const void* host_src, void* dst, size_t bytes, cudaStream_t stream);

// Repacks a row-major device matrix [src_rows][cols] into the fragment layout (mma_packing.h) in
// tile groups of `group`, rows picked by row_map (device, packed_rows entries, -1 = zero row) or the
// identity when null. dst holds mma_packed_elems(packed_rows, cols, group) elements.
Status pack_mma_tiles_device(const void* src, DType dtype, int64_t src_rows, int64_t cols, const int64_t* row_map,
                             int64_t packed_rows, void* dst, cudaStream_t stream, int group = 1);

}  // namespace fuselm
