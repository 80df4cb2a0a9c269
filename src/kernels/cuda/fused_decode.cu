#include "kernels/cuda/fused_decode.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/mma_packing.h"

namespace fuselm {
namespace {

__device__ __forceinline__ float element_to_float(const void* p, DType t, int64_t i) {
  return t == DType::BF16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i])
                          : __half2float(static_cast<const __half*>(p)[i]);
}

__device__ __forceinline__ void store_element(void* p, DType t, int64_t i, float v) {
  if (t == DType::BF16) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  }
}

// One CTA per token; thread j owns 16-element tile j (fixed summation order).
__global__ void fused_embed_kernel(const void* table, DType dtype, int hidden, const int32_t* tokens,
                                   const int32_t* sampled, const float* norm_weight, float* residual, void* xg,
                                   float* partials, KernelTrace* trace) {
  if (threadIdx.x == 0) trace_start(trace);
  wait_for_previous_grid();
  // Only now: the kernels this lets start early read the step's inputs before they wait, and the
  // grid waited for above (in a graph, the copy of those inputs) has ended.
  allow_next_grid();  // the first GEMM streams its weights meanwhile
  if (threadIdx.x == 0) trace_released(trace);
  const int tok = blockIdx.x;
  int32_t token = tokens[tok];
  if (token < 0) token = sampled[-1 - token];  // the id the previous step sampled for that row
  const int64_t row = static_cast<int64_t>(token) * hidden;
  const int tiles = (hidden + 15) / 16;
  for (int j = threadIdx.x; j < tiles; j += blockDim.x) {
    float s = 0.0f;
    for (int i = j * 16; i < min(hidden, j * 16 + 16); ++i) {
      const float v = element_to_float(table, dtype, row + i);
      residual[static_cast<int64_t>(tok) * hidden + i] = v;
      store_element(xg, dtype, static_cast<int64_t>(tok) * hidden + i, v * norm_weight[i]);
      s += v * v;
    }
    partials[tok * tiles + j] = s;
  }
  if (trace != nullptr) {
    __syncthreads();
    if (threadIdx.x == 0) trace_end(trace);
  }
}

// The step's inputs from pinned host memory to the device: 16 bytes a thread where both ends allow.
__global__ void copy_step_inputs_kernel(const void* __restrict__ src, void* __restrict__ dst, size_t bytes) {
  allow_next_grid();  // the embedding kernel starts meanwhile and waits for these inputs
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool vectors = (reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) % 16 == 0;
  const size_t body = vectors ? bytes / 16 : 0;
  for (size_t i = first; i < body; i += stride) static_cast<uint4*>(dst)[i] = static_cast<const uint4*>(src)[i];
  for (size_t i = body * 16 + first; i < bytes; i += stride)
    static_cast<uint8_t*>(dst)[i] = static_cast<const uint8_t*>(src)[i];
}

// One thread per (stored tile, lane): gathers the lane's 8 fragment values and stores them as 16
// bytes. Stored tile i holds row tile nt, k-tile kt of mma_tile_index (tile groups of `group`).
__global__ void pack_kernel(const uint16_t* src, int64_t src_rows, int64_t cols, const int64_t* row_map,
                            int64_t packed_rows, int64_t k_tiles, int group, uint4* dst) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = mma_packed_row_tiles(packed_rows, group) * k_tiles * 32;
  if (idx >= total) return;
  const int lane = static_cast<int>(idx % 32);
  const int64_t tile = idx / 32;
  const int64_t in_group = tile % (k_tiles * group);
  const int64_t nt = tile / (k_tiles * group) * group + in_group % group, kt = in_group / group;
  const int g = lane / 4, t = lane % 4;
  uint16_t v[8];
#pragma unroll
  for (int reg = 0; reg < 4; ++reg) {
    const int64_t r = nt * 16 + g + (reg & 1) * 8;
    int64_t s = -1;
    if (r < packed_rows) s = row_map != nullptr ? row_map[r] : (r < src_rows ? r : -1);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int64_t c = kt * 16 + 2 * t + (reg >> 1) * 8 + e;
      v[reg * 2 + e] = (s >= 0 && s < src_rows && c < cols) ? src[s * cols + c] : uint16_t(0);
    }
  }
  uint4 out;
  out.x = v[0] | (uint32_t(v[1]) << 16);
  out.y = v[2] | (uint32_t(v[3]) << 16);
  out.z = v[4] | (uint32_t(v[5]) << 16);
  out.w = v[6] | (uint32_t(v[7]) << 16);
  dst[idx] = out;
}

}  // namespace

Status fused_embed(const void* table, DType dtype, int hidden, const int32_t* tokens, const int32_t* sampled, int m,
                   const float* norm_weight, float* residual, void* xg, float* partials, cudaStream_t stream, bool pdl,
                   KernelTrace* trace) {
  if (dtype != DType::BF16 && dtype != DType::F16)
    return Status::error(str_cat("fused_embed: unsupported dtype=", dtype_name(dtype), " (supported: bf16, f16)"));
  if (m < 1 || m > kSkinnyGemmMaxTokens) return Status::error(str_cat("fused_embed: m=", m, " (supported: 1..16)"));
  FUSELM_CUDA_RETURN(launch_kernel(fused_embed_kernel, dim3(m), dim3(256), 0, stream, pdl, table, dtype, hidden, tokens,
                                   sampled, norm_weight, residual, xg, partials, trace));
  return Status();
}

Status copy_step_inputs(const void* host_src, void* dst, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Status();
  if (host_src == nullptr || dst == nullptr) return Status::error("copy_step_inputs: null source or destination");
  constexpr int kThreads = 256;
  const size_t per_cta = kThreads * 16;
  constexpr size_t kMaxCtas = 132;  // a wave on an H200: more CTAs do not speed up a read over PCIe
  const unsigned ctas = static_cast<unsigned>(std::min<size_t>((bytes + per_cta - 1) / per_cta, kMaxCtas));
  FUSELM_CUDA_RETURN(launch_kernel(copy_step_inputs_kernel, dim3(ctas), dim3(kThreads), 0, stream, false, host_src,
                                   dst, bytes));
  return Status();
}

Status pack_mma_tiles_device(const void* src, DType dtype, int64_t src_rows, int64_t cols, const int64_t* row_map,
                             int64_t packed_rows, void* dst, cudaStream_t stream, int group) {
  if (dtype != DType::BF16 && dtype != DType::F16)
    return Status::error(str_cat("pack_mma_tiles_device: unsupported dtype=", dtype_name(dtype), " (supported: bf16, f16)"));
  if (group < 1) return Status::error(str_cat("pack_mma_tiles_device: tile group ", group, " must be positive"));
  const int64_t total = mma_packed_row_tiles(packed_rows, group) * mma_tiles(cols) * 32;
  const int threads = 256;
  pack_kernel<<<static_cast<unsigned>((total + threads - 1) / threads), threads, 0, stream>>>(
      static_cast<const uint16_t*>(src), src_rows, cols, row_map, packed_rows, mma_tiles(cols), group,
      static_cast<uint4*>(dst));
  FUSELM_CUDA_RETURN_LAUNCH();
  return Status();
}

FusedDecodeBufferSizes fused_decode_buffer_sizes(const FusedDecodeModel& model, const DecodeAttentionPlan& plan) {
  const size_t t = kSkinnyGemmMaxTokens, e = dtype_bytes(model.dtype, 1);
  const size_t q_dim = static_cast<size_t>(model.n_heads) * model.head_dim;
  AttentionShape shape{model.n_heads, model.n_kv_heads, model.head_dim, 0.0f};
  return FusedDecodeBufferSizes{
      t * model.hidden * 4,
      t * model.hidden * e,
      t * mma_tiles(model.hidden) * 4,
      t * q_dim * e,
      t * q_dim * e,
      t * model.ffn * e,
      t * model.vocab * 4,
      decode_attention_workspace_bytes(shape, plan, kSkinnyGemmMaxTokens),
  };
}

Status fused_decode_step(const FusedDecodeModel& model, const FusedDecodeBuffers& buf, const FusedDecodeInputs& in,
                         const DecodeAttentionPlan& attention_plan, cudaStream_t stream) {
  const int m = in.m;
  const int q_dim = model.n_heads * model.head_dim;
  const int tiles = static_cast<int>(mma_tiles(model.hidden));
  const SkinnyNorm norm{buf.partials, tiles, model.hidden, model.eps};
  const AttentionShape shape{model.n_heads, model.n_kv_heads, model.head_dim, 1.0f / std::sqrt(float(model.head_dim))};
  const FusedDecodeVariants& v = model.variants;
  auto slot = [&](int i) { return buf.trace != nullptr ? buf.trace + i : nullptr; };
  auto launch = [&](int slot_index, const SkinnyGemmChoice& choice) {
    SkinnyGemmLaunch options{model.pdl};
    options.balance_sms = choice.balance_for_tokens(m);
    options.trace = slot(slot_index);
    return options;
  };
  auto layer_launch = [&](size_t l, FusedTraceOp op, const SkinnyGemmChoice& choice) {
    return launch(fused_decode_trace_slot(static_cast<int>(l), op), choice);
  };
  DecodeAttentionPlan attention = attention_plan;
  attention.pdl = model.pdl;
  const bool fold_o = m == 1 && v.o_in_attention;
  if (fold_o && buf.o_fold_ready == nullptr)
    return Status::error("fused_decode_step: the O projection in attention's launch needs buffers.o_fold_ready");

  Status s = fused_embed(model.embedding, model.dtype, model.hidden, in.tokens, in.sampled, m,
                         model.layers.empty() ? model.final_norm : model.layers[0].attn_norm, buf.residual, buf.xg,
                         buf.partials, stream, model.pdl, slot(0));
  if (!s.ok()) return s;
  const SkinnyInput xg_in{buf.xg, model.hidden, m};
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const FusedDecodeLayer& layer = model.layers[l];
    PagedKvView kv{layer.k_cache, layer.v_cache, model.kv_layout, in.block_tables, in.max_blocks_per_seq};

    SkinnyQkvOut qkv;
    qkv.q = buf.q;
    qkv.q_stride = q_dim;
    qkv.kv = kv;
    qkv.positions = in.positions;
    qkv.inv_freq = model.inv_freq;
    qkv.n_heads = model.n_heads;
    qkv.n_kv_heads = model.n_kv_heads;
    qkv.head_dim = model.head_dim;
    if (!(s = skinny_gemm_qkv_rope(layer.qkv, xg_in, norm, qkv, v.qkv.for_tokens(m), stream,
                                   layer_launch(l, FusedTraceOp::Qkv, v.qkv))).ok())
      return s;

    SkinnyResidualOut attn_out{buf.residual, model.hidden, layer.ffn_norm, buf.xg, model.hidden, buf.partials};
    attention.trace = slot(fused_decode_trace_slot(static_cast<int>(l), FusedTraceOp::Attention));
    const DecodeOFold fold{layer.o, attn_out, buf.o_fold_ready};
    if (!(s = decode_attention(buf.q, buf.attn, model.dtype, shape, kv, in.kv_lens, m, attention,
                               buf.attention_workspace, stream, fold_o ? &fold : nullptr)).ok())
      return s;

    if (!fold_o &&
        !(s = skinny_gemm_residual(layer.o, SkinnyInput{buf.attn, q_dim, m}, SkinnyNorm{}, attn_out, v.o.for_tokens(m), stream, layer_launch(l, FusedTraceOp::O, v.o))).ok())
      return s;

    const float* next_norm = l + 1 < model.layers.size() ? model.layers[l + 1].attn_norm : model.final_norm;
    SkinnyResidualOut ffn_out{buf.residual, model.hidden, next_norm, buf.xg, model.hidden, buf.partials};
    const SkinnySwigluOut act{buf.act, model.ffn, model.ffn};
    if (m <= v.ffn_one_launch_tokens) {
      // Both projections in one launch (its timeline goes to the gate/up slot).
      if (!(s = skinny_ffn(layer.gate_up, layer.down, xg_in, norm, act, ffn_out, model.ffn_plan, stream,
                           layer_launch(l, FusedTraceOp::GateUp, v.gate_up))).ok())
        return s;
      continue;
    }
    if (!(s = skinny_gemm_swiglu(layer.gate_up, xg_in, norm, act, v.gate_up.for_tokens(m), stream,
                                 layer_launch(l, FusedTraceOp::GateUp, v.gate_up))).ok())
      return s;
    if (!(s = skinny_gemm_residual(layer.down, SkinnyInput{buf.act, model.ffn, m}, SkinnyNorm{}, ffn_out, v.down.for_tokens(m), stream, layer_launch(l, FusedTraceOp::Down, v.down))).ok())
      return s;
  }
  return skinny_gemm_store(model.lm_head, xg_in, norm, buf.logits, DType::F32, model.vocab, v.lm_head.for_tokens(m),
                           stream, launch(fused_decode_trace_head_slot(static_cast<int>(model.layers.size())), v.lm_head),
                           buf.greedy_pick);
}

}  // namespace fuselm
