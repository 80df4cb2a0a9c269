#pragma once
// Building blocks shared by the prefill and decode attention kernels: the dtype and head_dim
// dispatch points, PTX wrappers (cp.async, ldmatrix; the mma itself is kernels/cuda/mma.cuh), the swizzled shared-memory
// tile layout, paged-cache tile loads and the per-warp online-softmax step.
//
// Everything here is sm_80 PTX (no wgmma), so the same code runs on Ampere and Hopper.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "core/status.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/paged_kv.h"

namespace fuselm::attention_detail {

// ---------------------------------------------------------------------------------------------
// Dispatch points: one per axis, each ending in an "unsupported X=… (supported: …)" status.

template <class F>
Status dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::BF16: return f(__nv_bfloat16{});
    case DType::F16: return f(__half{});
    default:
      return Status::error(str_cat("attention: unsupported dtype=", dtype_name(dtype), " (supported: bf16, f16)"));
  }
}

template <int N>
struct IntConst {
  static constexpr int value = N;
};

// The generic kernel keeps a lane's share of a head_dim vector (pairs of dims) in registers
// sized for this bound.
inline constexpr int kGenericMaxHeadDim = 256;

// head_dim 64 and 128 run the tensor-core kernels: tensor_core(IntConst<head_dim>). Any other even
// value in 8..kGenericMaxHeadDim runs the CUDA-core fallback (attention_generic.cuh): generic().
template <class TensorCore, class Generic>
Status dispatch_head_dim(int head_dim, TensorCore&& tensor_core, Generic&& generic) {
  switch (head_dim) {
    case 64: return tensor_core(IntConst<64>{});
    case 128: return tensor_core(IntConst<128>{});
    default:
      if (head_dim >= 8 && head_dim <= kGenericMaxHeadDim && head_dim % 2 == 0) return generic();
      return Status::error(str_cat("attention: unsupported head_dim=", head_dim,
                                   " (supported: even values 8..256; tensor cores for 64, 128)"));
  }
}

// Host-side checks shared by both launchers; the kernels trust what passes here.
inline Status check_common(const void* q, const void* out, const AttentionShape& shape, const PagedKvView& kv,
                           int batch) {
  if (batch < 0) return Status::error(str_cat("attention: batch=", batch, " must be >= 0"));
  if (shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0)
    return Status::error(
        str_cat("attention: n_heads=", shape.n_heads, " must be a positive multiple of n_kv_heads=", shape.n_kv_heads));
  if (kv.layout.n_kv_heads != shape.n_kv_heads || kv.layout.head_dim != shape.head_dim)
    return Status::error(
        str_cat("attention: KV layout (n_kv_heads=", kv.layout.n_kv_heads, ", head_dim=", kv.layout.head_dim,
                ") does not match the shape (n_kv_heads=", shape.n_kv_heads, ", head_dim=", shape.head_dim, ")"));
  const int bs = kv.layout.block_size;
  if (bs <= 0 || (bs & (bs - 1)) != 0)
    return Status::error(str_cat("attention: block_size=", bs, " must be a power of two"));
  if (kv.layout.block_elems() > INT32_MAX)  // the decode kernels' offsets within a block are 32-bit
    return Status::error(str_cat("attention: a KV block of ", kv.layout.block_elems(), " elements is too large"));
  if (!(shape.scale > 0.0f) || !std::isfinite(shape.scale))
    return Status::error(str_cat("attention: scale=", shape.scale, " must be positive and finite"));
  if (batch == 0) return Status();
  if (!q || !out || !kv.k || !kv.v || !kv.block_tables || kv.max_blocks_per_seq <= 0)
    return Status::error("attention: q, out, the K/V pools and the block tables must be set (max_blocks_per_seq > 0)");
  // cp.async and the vector stores move 16 bytes at a time; every row is a multiple of 16 bytes.
  for (const void* p : {q, out, static_cast<const void*>(kv.k), static_cast<const void*>(kv.v)})
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return Status::error("attention: q, out and the K/V pools must be 16-byte aligned");
  if (batch > 65535) return Status::error(str_cat("attention: batch=", batch, " exceeds the grid limit 65535"));
  return Status();
}

// ---------------------------------------------------------------------------------------------
// Dtype traits: packing two floats into one 32-bit mma operand, and the matching mma.

template <class T>
struct Mma;

template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
  // d += a * b for a 16x16 (row) by 16x8 (col) bf16 product with fp32 accumulators.
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_m16n8k16<__nv_bfloat16>(d, a[0], a[1], a[2], a[3], b0, b1);
  }
};

template <>
struct Mma<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_m16n8k16<__half>(d, a[0], a[1], a[2], a[3], b0, b1);
  }
};

// ---------------------------------------------------------------------------------------------
// PTX wrappers.

// 16-byte global->shared copy that bypasses L1; with valid == false it writes zeros and reads nothing.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  cp_async_16_zfill(dst, src, valid ? 16 : 0);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ---------------------------------------------------------------------------------------------
// Shared-memory tiles of [rows][HEAD_DIM] 16-bit values, stored as 16-byte chunks with the chunk
// index XOR-ed by (row % 8). ldmatrix reads the same logical chunk of 8 consecutive rows at once;
// unswizzled, rows 128/256 bytes apart would all hit the same 4 banks (8-way conflict).

template <int HEAD_DIM>
struct SwizzledTile {
  static constexpr int kChunks = HEAD_DIM / 8;  // 16-byte chunks per row
  static_assert(kChunks % 8 == 0, "the XOR swizzle needs at least 8 chunks per row");
  // Byte offset of (row, chunk) within the tile.
  static __device__ __forceinline__ uint32_t offset(int row, int chunk) {
    return static_cast<uint32_t>((row * kChunks + (chunk ^ (row & 7))) * 16);
  }
};

// Copies tile rows [0, ROWS) holding cache positions first_pos + row of one (sequence, kv head)
// into a swizzled tile. Rows at positions >= valid_end are zero-filled and never read from
// global memory: the block table past a sequence's end may hold anything, and zeros keep the
// masked P*V products finite. (Decode attention issues its K and V rows with its own rolled loop:
// attention_decode.cu.)
template <int HEAD_DIM, int ROWS, int THREADS>
__device__ __forceinline__ void load_kv_tile(uint32_t tile, const uint16_t* pool, const PagedKvLayout& layout,
                                             const int32_t* block_table, int block_shift, int kv_head, int first_pos,
                                             int valid_end, int tid) {
  constexpr int kChunks = HEAD_DIM / 8;
  static_assert((ROWS * kChunks) % THREADS == 0, "tile chunks must split evenly over the threads");
#pragma unroll
  for (int i = 0; i < ROWS * kChunks / THREADS; ++i) {
    const int idx = tid + i * THREADS;
    const int row = idx / kChunks;
    const int chunk = idx % kChunks;
    const int pos = first_pos + row;
    const bool valid = pos < valid_end;
    const uint16_t* src = pool;
    if (valid) {
      const int block = block_table[pos >> block_shift];
      src = pool + layout.offset(block, kv_head, pos & (layout.block_size - 1)) + chunk * 8;
    }
    cp_async_16(tile + SwizzledTile<HEAD_DIM>::offset(row, chunk), src, valid);
  }
}

// Copies the one row at cache position pos of the tile that starts at first_pos: the row decode
// attention leaves out of its first stages until the previous kernel, which writes it, is done.
// Block numbers are read at block_table[(pos >> block_shift) - block_base] (a staged stretch of the
// table). Threads 0 .. HEAD_DIM / 8 - 1 each copy a 16-byte chunk.
template <int HEAD_DIM>
__device__ __forceinline__ void load_kv_row(uint32_t tile, const uint16_t* pool, const PagedKvLayout& layout,
                                            const int32_t* block_table, int block_shift, int kv_head, int first_pos,
                                            int pos, int tid, int block_base = 0) {
  constexpr int kChunks = HEAD_DIM / 8;
  if (tid >= kChunks) return;
  const int block = block_table[(pos >> block_shift) - block_base];
  cp_async_16(tile + SwizzledTile<HEAD_DIM>::offset(pos - first_pos, tid),
              pool + layout.offset(block, kv_head, pos & (layout.block_size - 1)) + tid * 8, true);
}

// Decode attention's K and V rows first .. first + KEYS - 1 of one kv head, into the swizzled tiles
// at k_dst and v_dst, by THREADS threads: rows at positions >= end zero-filled (never read from
// global memory), the row at `skip` left out (load_kv_row copies it later). Block numbers come from
// a staged stretch of the block table: blocks[(pos >> block_shift) - first_block]. K and V share the
// layout, so one offset serves both.
// A thread copies the same 16-byte chunk of every THREADS / (HEAD_DIM / 8)-th row: its chunk, its
// rows' swizzle (the row step is a multiple of 8) and the kv head's part of the address are fixed,
// so the loop adds a row step to them. (Recomputed per copy in 64 bits, a stage's issue was a long
// chain of integer instructions on the item's path before its wait.) A rolled loop: it runs once or
// twice per item, from a cold instruction cache.
template <int HEAD_DIM, int KEYS, int THREADS>
__device__ __forceinline__ void issue_kv_rows(uint32_t k_dst, uint32_t v_dst, const uint16_t* k_pool,
                                              const uint16_t* v_pool, const PagedKvLayout& layout,
                                              const int32_t* blocks, int first_block, int block_shift, int kv_head,
                                              int first, int end, int skip, int tid) {
  constexpr int kChunks = HEAD_DIM / 8;
  constexpr int kRowStep = THREADS / kChunks;
  static_assert(THREADS % kChunks == 0 && KEYS % kRowStep == 0, "a stage's chunks must split evenly over the threads");
  static_assert(kRowStep % 8 == 0, "a thread's rows must share their swizzle");
  const int chunk = tid % kChunks, row0 = tid / kChunks;
  const uint32_t at0 = SwizzledTile<HEAD_DIM>::offset(row0, chunk);
  // Element offsets: a block is [kv head][slot][HEAD_DIM] (PagedKvLayout::offset), at most a few
  // hundred thousand elements, so its size and the head's part fit 32 bits; the block's start not.
  const int block_elems = static_cast<int>(layout.block_elems());
  const int head_part = kv_head * layout.block_size * HEAD_DIM + chunk * 8;
  const int slot_mask = layout.block_size - 1;
#pragma unroll 1
  for (int i = 0; i < KEYS / kRowStep; ++i) {
    const int pos = first + row0 + i * kRowStep;
    if (pos == skip) continue;
    const bool valid = pos < end;
    const int64_t offset =
        valid ? static_cast<int64_t>(blocks[(pos >> block_shift) - first_block]) * block_elems + head_part +
                    (pos & slot_mask) * HEAD_DIM
              : 0;
    const uint32_t at = at0 + static_cast<uint32_t>(i * kRowStep * kChunks * 16);
    cp_async_16(k_dst + at, k_pool + offset, valid);
    cp_async_16(v_dst + at, v_pool + offset, valid);
  }
}

// The A operand (query rows) of S = Q K^T for M_TILES 16-row tiles starting at tile row row0.
// In registers (kInRegs) the fragments are loaded once and reused for every K tile; otherwise
// they are re-read from shared memory per k-step, which frees 32 registers per row tile for the
// larger accumulators of multi-tile warps.
template <int HEAD_DIM, int M_TILES, bool kInRegs>
struct QOperand;

template <int HEAD_DIM, int M_TILES>
struct QOperand<HEAD_DIM, M_TILES, true> {
  uint32_t frag[M_TILES][HEAD_DIM / 16][4];
  __device__ __forceinline__ void load(uint32_t tile, int row0, int lane) {
    const int row = row0 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int m = 0; m < M_TILES; ++m)
#pragma unroll
      for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
        ldmatrix_x4(frag[m][kk], tile + SwizzledTile<HEAD_DIM>::offset(row + m * 16, kk * 2 + (lane >> 4)));
  }
  __device__ __forceinline__ void fetch(uint32_t (&a)[4], int m, int kk, int /*lane*/) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = frag[m][kk][i];
  }
};

template <int HEAD_DIM, int M_TILES>
struct QOperand<HEAD_DIM, M_TILES, false> {
  uint32_t tile = 0;
  int row0 = 0;
  __device__ __forceinline__ void load(uint32_t tile_addr, int first_row, int /*lane*/) {
    tile = tile_addr;
    row0 = first_row;
  }
  __device__ __forceinline__ void fetch(uint32_t (&a)[4], int m, int kk, int lane) const {
    const int row = row0 + m * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    ldmatrix_x4(a, tile + SwizzledTile<HEAD_DIM>::offset(row, kk * 2 + (lane >> 4)));
  }
};

// ---------------------------------------------------------------------------------------------
// One warp's running attention state for M_TILES x 16 query rows. In row tile m, lane l holds
// rows l/4 and l/4 + 8 of the mma accumulator layout: o[m][n][0..1] are (row l/4, dims
// 8n + 2(l%4) + {0,1}), o[m][n][2..3] the same dims of row l/4 + 8. Row maxima are in the log2
// domain (scores times scale * log2 e) so that each probability is one FFMA and one ex2.
template <int HEAD_DIM, int M_TILES>
struct WarpState {
  float o[M_TILES][HEAD_DIM / 8][4];
  float row_max[M_TILES][2];
  float row_sum[M_TILES][2];  // this lane's partial sum; the quad reduces it at the end

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int m = 0; m < M_TILES; ++m) {
#pragma unroll
      for (int n = 0; n < HEAD_DIM / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) o[m][n][i] = 0.0f;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        row_max[m][r] = -INFINITY;
        row_sum[m][r] = 0.0f;
      }
    }
  }
};

// Attends this warp's query rows to KEYS keys (a multiple of 16) of a K and a V tile in shared
// memory, starting at tile row key_row0, which holds cache position key_pos0. Key position p is
// visible to row (m, r) (r = 0: lane/4, r = 1: lane/4 + 8 of row tile m) iff
// p <= last_visible[m][r]; the comparison runs only when `masked`. Keys are folded into the
// running state with the online-softmax rescaling; the order of operations depends only on the
// positions involved. K/V fragments are loaded once per warp and used for all M_TILES row tiles.
template <class T, int HEAD_DIM, int KEYS, int M_TILES, class Q>
__device__ __forceinline__ void warp_attend(WarpState<HEAD_DIM, M_TILES>& st, const Q& q, uint32_t k_tile,
                                            uint32_t v_tile, int key_row0, int key_pos0,
                                            const int (&last_visible)[M_TILES][2], bool masked, float scale_log2,
                                            int lane) {
  static_assert(KEYS % 16 == 0, "keys come in pairs of n8 tiles");
  using Tile = SwizzledTile<HEAD_DIM>;
  constexpr int kKeyTiles = KEYS / 8;

  // S = Q K^T: K rows are keys, so a plain (non-transposed) ldmatrix yields the col-major B operand.
  float s[M_TILES][kKeyTiles][4];
#pragma unroll
  for (int m = 0; m < M_TILES; ++m)
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[m][n][i] = 0.0f;
  {
    const int k_row = key_row0 + (lane & 7) + (lane >> 4) * 8;
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
      uint32_t a[M_TILES][4];
#pragma unroll
      for (int m = 0; m < M_TILES; ++m) q.fetch(a[m], m, kk, lane);
#pragma unroll
      for (int nn = 0; nn < KEYS / 16; ++nn) {
        uint32_t b[4];
        ldmatrix_x4(b, k_tile + Tile::offset(k_row + nn * 16, kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
        for (int m = 0; m < M_TILES; ++m) {
          Mma<T>::mma(s[m][2 * nn], a[m], b[0], b[1]);
          Mma<T>::mma(s[m][2 * nn + 1], a[m], b[2], b[3]);
        }
      }
    }
  }

  // Online softmax on raw scores (scale > 0 commutes with max): mask, new row max, rescale what
  // came before, then p = exp2(s * scale_log2 - max) as one FFMA.
  uint32_t p[M_TILES][KEYS / 16][4];
#pragma unroll
  for (int m = 0; m < M_TILES; ++m) {
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i >> 1;
        if (masked) {
          const int pos = key_pos0 + n * 8 + 2 * (lane & 3) + (i & 1);
          if (pos > last_visible[m][r]) s[m][n][i] = -INFINITY;
        }
        tile_max[r] = fmaxf(tile_max[r], s[m][n][i]);
      }
    }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The four lanes of a quad share a row.
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float new_max = fmaxf(st.row_max[m][r], tile_max[r] * scale_log2);
      // A row with nothing visible yet keeps max -inf; subtracting 0 then keeps exp2(-inf) = 0
      // instead of exp2(-inf - -inf) = NaN.
      base[r] = new_max == -INFINITY ? 0.0f : new_max;
      // Exactly 1 when the max did not move, so that a tile with nothing visible to a row leaves
      // its state bit-for-bit unchanged, exactly as skipping the tile would.
      const float rescale = new_max == st.row_max[m][r] ? 1.0f : exp2f(st.row_max[m][r] - base[r]);
      st.row_max[m][r] = new_max;
      st.row_sum[m][r] *= rescale;
#pragma unroll
      for (int d = 0; d < HEAD_DIM / 8; ++d) {
        st.o[m][d][2 * r] *= rescale;
        st.o[m][d][2 * r + 1] *= rescale;
      }
    }
    // The accumulator layout of two adjacent n8 tiles is exactly the A-operand layout of one k16
    // step, so P goes from registers straight into the next mma.
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
      const float p0 = exp2f(fmaf(s[m][n][0], scale_log2, -base[0]));
      const float p1 = exp2f(fmaf(s[m][n][1], scale_log2, -base[0]));
      const float p2 = exp2f(fmaf(s[m][n][2], scale_log2, -base[1]));
      const float p3 = exp2f(fmaf(s[m][n][3], scale_log2, -base[1]));
      st.row_sum[m][0] += p0 + p1;
      st.row_sum[m][1] += p2 + p3;
      p[m][n / 2][(n & 1) * 2 + 0] = Mma<T>::pack(p0, p1);
      p[m][n / 2][(n & 1) * 2 + 1] = Mma<T>::pack(p2, p3);
    }
  }

  // O += P V: V rows are keys (the k dimension), so ldmatrix.trans yields the B operand.
  {
    const int v_row = key_row0 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int kk = 0; kk < KEYS / 16; ++kk) {
#pragma unroll
      for (int dd = 0; dd < HEAD_DIM / 16; ++dd) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_tile + Tile::offset(v_row + kk * 16, dd * 2 + (lane >> 4)));
#pragma unroll
        for (int m = 0; m < M_TILES; ++m) {
          Mma<T>::mma(st.o[m][2 * dd], p[m][kk], b[0], b[1]);
          Mma<T>::mma(st.o[m][2 * dd + 1], p[m][kk], b[2], b[3]);
        }
      }
    }
  }
}

// Sums a lane's partial row sums over its quad (all four lanes end with the full sum).
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// Online-softmax states of one row's parts (each part's largest logit, its sum of exp2 and its
// unnormalised output for 4 columns) merged in part order: the merged max first, then each part
// weighted by exp2(its max - merged max). A part that saw no key has max -inf, sum 0 and o 0, so
// weight 0; part 0 must hold a key, so that the merged max is finite. Every merge of the decode
// kernels (a CTA's warps, a cluster's ranks, in either kernel) is this one: the same operations in
// the same order, so a row's bits do not depend on which kernel, or which layout, merged it.
// `part(r)` returns part r's state; it is called once per pass, so parts read from shared memory are
// read where they are used (loads the first pass does not use are dropped).
struct SoftmaxState {
  float max;
  float sum;
  float4 o;
};
template <int N, class Part>
__device__ __forceinline__ SoftmaxState merge_softmax_parts(int parts, Part part) {
  SoftmaxState m{-INFINITY, 0.0f, make_float4(0.0f, 0.0f, 0.0f, 0.0f)};
#pragma unroll
  for (int r = 0; r < N; ++r)
    if (r < parts) m.max = fmaxf(m.max, part(r).max);
#pragma unroll
  for (int r = 0; r < N; ++r) {
    if (r >= parts) break;
    const SoftmaxState p = part(r);
    const float weight = exp2f(p.max - m.max);
    m.sum += p.sum * weight;
    m.o.x += p.o.x * weight;
    m.o.y += p.o.y * weight;
    m.o.z += p.o.z * weight;
    m.o.w += p.o.w * weight;
  }
  return m;
}

// All-ones 16-bit pattern: NaN in both bf16 and fp16. Written where a sequence's lengths are
// inconsistent, so a caller bug shows up as NaN instead of reading outside the cache.
inline constexpr uint16_t kNanBits = 0xffff;

}  // namespace fuselm::attention_detail
