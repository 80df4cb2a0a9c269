// Causal (chunked) prefill attention over the paged KV cache, FlashAttention-2 style:
// mma.sync m16n8k16 on tensor cores, K/V tiles double-buffered through swizzled shared memory
// with cp.async, online softmax in registers. Tilings (attention_variants.h): 16 query rows per
// warp with Q fragments in registers, or 32 rows per warp, where each K/V fragment read from
// shared memory feeds two row tiles (half the shared-memory traffic per mma) and Q is re-read from
// shared memory to make room for the larger accumulators; 64 or 32 keys per K/V tile.
//
// GQA packing: a CTA owns one (sequence, kv head) and 64 or 128 "packed rows", row m being query token
// m / group of query head kv_head * group + m % group. All heads of a group share the K/V tile, so
// each K/V tile is read from the cache once per group rather than once per query head, and short
// chunks (q_len < 64) still fill the tensor-core tile.
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_generic.cuh"
#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/cuda_check.h"

namespace fuselm {
namespace attention_detail {
namespace {

template <int HEAD_DIM, int M_TILES, int KEYS>
struct PrefillConfig {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpRows = 16 * M_TILES;
  static constexpr int kRows = kWarps * kWarpRows;  // packed query rows per CTA
  static constexpr bool kQInRegs = M_TILES == 1;
  static constexpr int kKeys = KEYS;  // keys per K/V tile
  static constexpr int kQTileBytes = kRows * HEAD_DIM * 2;
  static constexpr int kKvTileBytes = kKeys * HEAD_DIM * 2;
  // Q tile, then two stages of (K tile, V tile).
  static constexpr int kSmemBytes = kQTileBytes + 4 * kKvTileBytes;
};

template <class T, int HEAD_DIM, int M_TILES, int KEYS>
__global__ void __launch_bounds__(PrefillConfig<HEAD_DIM, M_TILES, KEYS>::kThreads)
    prefill_attention_kernel(const uint16_t* __restrict__ q, uint16_t* __restrict__ out,
                             const uint16_t* __restrict__ k_pool, const uint16_t* __restrict__ v_pool,
                             PagedKvLayout layout, const int32_t* __restrict__ block_tables, int max_blocks_per_seq,
                             const int32_t* __restrict__ q_starts, const int32_t* __restrict__ kv_lens, int n_heads,
                             int group, float scale_log2) {
  using Cfg = PrefillConfig<HEAD_DIM, M_TILES, KEYS>;
  constexpr int kChunks = HEAD_DIM / 8;
  extern __shared__ __align__(128) uint8_t smem[];

  const int seq = blockIdx.z;
  const int kv_head = blockIdx.y;
  // Causal work grows with the tile index: launch the heaviest tiles first.
  const int row0 = (gridDim.x - 1 - blockIdx.x) * Cfg::kRows;
  const int q_begin = q_starts[seq];
  const int q_len = q_starts[seq + 1] - q_begin;
  const int kv_len = kv_lens[seq];
  const int rows = q_len * group;
  if (row0 >= rows) return;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  // Address of packed row `row`'s head_dim vector in q / out.
  auto row_offset = [&](int row) -> int64_t {
    const int token = row / group;
    const int head = kv_head * group + row % group;
    return (static_cast<int64_t>(q_begin + token) * n_heads + head) * HEAD_DIM;
  };

  if (kv_len < q_len || kv_len > static_cast<int64_t>(max_blocks_per_seq) * layout.block_size) {
    // Inconsistent lengths: the new tokens would sit at negative positions or past the block table.
    for (int i = tid; i < Cfg::kRows * HEAD_DIM; i += Cfg::kThreads) {
      const int row = row0 + i / HEAD_DIM;
      if (row < rows) out[row_offset(row) + i % HEAD_DIM] = kNanBits;
    }
    return;
  }

  const int prefix = kv_len - q_len;  // cached tokens before the new ones
  const int last_row = min(rows, row0 + Cfg::kRows) - 1;
  const int first_query_pos = prefix + row0 / group;
  const int last_query_pos = prefix + last_row / group;
  const int n_tiles = last_query_pos / Cfg::kKeys + 1;
  const int32_t* block_table = block_tables + static_cast<int64_t>(seq) * max_blocks_per_seq;
  const int block_shift = __ffs(layout.block_size) - 1;

  const uint32_t q_tile = shared_address(smem);
  auto k_tile = [&](int stage) { return q_tile + Cfg::kQTileBytes + stage * 2 * Cfg::kKvTileBytes; };
  auto v_tile = [&](int stage) { return k_tile(stage) + Cfg::kKvTileBytes; };
  auto load_kv = [&](int tile, int stage) {
    // Keys past the last query position are never visible to this CTA: zero-fill, don't read.
    load_kv_tile<HEAD_DIM, Cfg::kKeys, Cfg::kThreads>(k_tile(stage), k_pool, layout, block_table, block_shift, kv_head,
                                                      tile * Cfg::kKeys, last_query_pos + 1, tid);
    load_kv_tile<HEAD_DIM, Cfg::kKeys, Cfg::kThreads>(v_tile(stage), v_pool, layout, block_table, block_shift, kv_head,
                                                      tile * Cfg::kKeys, last_query_pos + 1, tid);
  };

  // Prologue: the Q tile (rows past the sequence zero-filled) and K/V tile 0, one commit group.
#pragma unroll
  for (int i = 0; i < Cfg::kRows * kChunks / Cfg::kThreads; ++i) {
    const int idx = tid + i * Cfg::kThreads;
    const int r = idx / kChunks;
    const int chunk = idx % kChunks;
    const bool valid = row0 + r < rows;
    const uint16_t* src = valid ? q + row_offset(row0 + r) + chunk * 8 : q;
    cp_async_16(q_tile + SwizzledTile<HEAD_DIM>::offset(r, chunk), src, valid);
  }
  load_kv(0, 0);
  cp_async_commit();

  // This lane's rows (lane/4 and lane/4 + 8 of each of the warp's row tiles); rows past the
  // sequence borrow the last valid row's position so that they stay finite (they are not written).
  const int warp_row0 = row0 + warp * Cfg::kWarpRows;
  int last_visible[M_TILES][2];
#pragma unroll
  for (int m = 0; m < M_TILES; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      last_visible[m][r] = prefix + min(warp_row0 + m * 16 + lane / 4 + 8 * r, last_row) / group;
  const int warp_last_visible = prefix + min(warp_row0 + Cfg::kWarpRows - 1, last_row) / group;

  WarpState<HEAD_DIM, M_TILES> st;
  st.init();
  QOperand<HEAD_DIM, M_TILES, Cfg::kQInRegs> q_operand;

  for (int tile = 0; tile < n_tiles; ++tile) {
    // After the barrier every copy into stage tile&1 is visible and every warp has finished
    // reading stage (tile+1)&1, which the next prefetch overwrites.
    cp_async_wait<0>();
    __syncthreads();
    if (tile == 0) q_operand.load(q_tile, warp * Cfg::kWarpRows, lane);
    if (tile + 1 < n_tiles) load_kv(tile + 1, (tile + 1) & 1);
    cp_async_commit();

    const int key_pos0 = tile * Cfg::kKeys;
    if (key_pos0 > warp_last_visible) continue;  // all of this tile is in every row's future
    const bool masked = key_pos0 + Cfg::kKeys - 1 > first_query_pos;
    warp_attend<T, HEAD_DIM, Cfg::kKeys>(st, q_operand, k_tile(tile & 1), v_tile(tile & 1), 0, key_pos0, last_visible,
                                         masked, scale_log2, lane);
  }

  // Normalise and store: lane holds dims 8n + 2(lane%4) + {0,1} of its rows.
#pragma unroll
  for (int m = 0; m < M_TILES; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = warp_row0 + m * 16 + lane / 4 + 8 * r;
      const float inv_sum = 1.0f / quad_sum(st.row_sum[m][r]);
      if (row >= rows) continue;
      uint16_t* dst = out + row_offset(row) + 2 * (lane & 3);
#pragma unroll
      for (int n = 0; n < HEAD_DIM / 8; ++n)
        *reinterpret_cast<uint32_t*>(dst + n * 8) =
            Mma<T>::pack(st.o[m][n][2 * r] * inv_sum, st.o[m][n][2 * r + 1] * inv_sum);
    }
}

template <int M_TILES, int KEYS>
struct PrefillTiling {
  static constexpr int kMTiles = M_TILES;
  static constexpr int kKeys = KEYS;
};

// The (rows per warp, keys per K/V tile) pairs that are instantiated.
template <class F>
Status dispatch_tiling(const PrefillVariant& v, F&& f) {
  if (v.rows_per_warp == 16 && v.keys_per_tile == 64) return f(PrefillTiling<1, 64>{});
  if (v.rows_per_warp == 32 && v.keys_per_tile == 64) return f(PrefillTiling<2, 64>{});
  if (v.rows_per_warp == 32 && v.keys_per_tile == 32) return f(PrefillTiling<2, 32>{});
  return Status::error(str_cat("prefill_attention: unsupported tiling rows_per_warp=", v.rows_per_warp,
                               ", keys_per_tile=", v.keys_per_tile, " (supported: 16/64, 32/64, 32/32)"));
}

}  // namespace

PrefillVariant choose_prefill_variant(int head_dim) {
  // Measured on H200 (docs/kernels/attention.md): with 32 rows per warp each K/V fragment feeds two
  // row tiles; 32-key tiles keep head_dim 128 within registers (64-key tiles spill there).
  // 16 rows per warp was faster only for grids under two CTAs per multiprocessor (short chunks).
  return head_dim == 64 ? PrefillVariant{32, 64} : PrefillVariant{32, 32};
}

Status prefill_attention_variant(const PrefillVariant& variant, const void* q, void* out, DType dtype,
                                 const AttentionShape& shape, const PagedKvView& kv, const int32_t* q_starts,
                                 const int32_t* kv_lens, int batch, int max_q_len, cudaStream_t stream) {
  if (Status s = check_common(q, out, shape, kv, batch); !s.ok()) return s;
  if (max_q_len < 0) return Status::error(str_cat("prefill_attention: max_q_len=", max_q_len, " must be >= 0"));
  if (batch == 0 || max_q_len == 0) return Status();
  if (!q_starts || !kv_lens) return Status::error("prefill_attention: q_starts and kv_lens must be set");
  if (shape.n_kv_heads > 65535)
    return Status::error(str_cat("prefill_attention: n_kv_heads=", shape.n_kv_heads, " exceeds the grid limit 65535"));
  const int group = shape.n_heads / shape.n_kv_heads;
  const float scale_log2 = shape.scale * 1.4426950408889634f;

  return dispatch_dtype(dtype, [&](auto type_tag) {
    using T = decltype(type_tag);
    const auto generic = [&] {
      return prefill_attention_generic<T>(q, out, shape, kv, q_starts, kv_lens, batch, max_q_len, stream);
    };
    const auto tensor_core = [&](auto head_dim_tag) -> Status {
      constexpr int kHeadDim = decltype(head_dim_tag)::value;
      return dispatch_tiling(variant, [&](auto tiling) -> Status {
        using Tiling = decltype(tiling);
        using Cfg = PrefillConfig<kHeadDim, Tiling::kMTiles, Tiling::kKeys>;
        const int64_t packed_rows = static_cast<int64_t>(max_q_len) * group;
        const dim3 grid(static_cast<unsigned>((packed_rows + Cfg::kRows - 1) / Cfg::kRows),
                        static_cast<unsigned>(shape.n_kv_heads), static_cast<unsigned>(batch));
        auto kernel = prefill_attention_kernel<T, kHeadDim, Tiling::kMTiles, Tiling::kKeys>;
        FUSELM_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
        kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(
            static_cast<const uint16_t*>(q), static_cast<uint16_t*>(out), static_cast<const uint16_t*>(kv.k),
            static_cast<const uint16_t*>(kv.v), kv.layout, kv.block_tables, kv.max_blocks_per_seq, q_starts, kv_lens,
            shape.n_heads, group, scale_log2);
        FUSELM_CUDA_RETURN_LAUNCH();
        return Status();
      });
    };
    return dispatch_head_dim(shape.head_dim, tensor_core, generic);
  });
}

}  // namespace attention_detail

Status prefill_attention(const void* q, void* out, DType dtype, const AttentionShape& shape, const PagedKvView& kv,
                         const int32_t* q_starts, const int32_t* kv_lens, int batch, int max_q_len,
                         cudaStream_t stream) {
  return attention_detail::prefill_attention_variant(attention_detail::choose_prefill_variant(shape.head_dim), q, out,
                                                     dtype, shape, kv, q_starts, kv_lens, batch, max_q_len, stream);
}

}  // namespace fuselm
