#pragma once
// The skinny GEMM's kernels and launchers (skinny_gemm.h has the interface). Each entry point's TU
// (skinny_gemm.cu, skinny_gemm_residual.cu, skinny_gemm_qkv.cu, skinny_gemm_swiglu.cu) instantiates
// only its own epilogue's kernels, so the four compile in parallel and no kernel is built twice.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "core/hd.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/cluster.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_limits.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/skinny_gemm.h"
#include "kernels/mma_packing.h"

namespace fuselm {
namespace skinny_detail {

// cp.async: global -> shared without registers, so the depth of the weight stream is bounded by
// shared memory, not by the register file. Weights bypass L1 (.cg): each byte is read once.

__device__ __forceinline__ void cp_async_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(shared_address(dst)), "l"(src) : "memory");
}

// The same for the weight stream, whose lines L2 evicts first (policy: l2_evict_first_policy()):
// read once per step, they would otherwise push out what the step reads again soon (activations,
// norm partials, block tables and the newest K/V rows). `dst` is a shared-memory address, which a
// K loop computes once instead of converting a generic pointer per copy.
__device__ __forceinline__ void cp_async_16_evict_first(uint32_t dst, const void* src, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "l"(policy)
               : "memory");
}
__device__ __forceinline__ void cp_async_16_evict_first(void* dst, const void* src, uint64_t policy) {
  cp_async_16_evict_first(shared_address(dst), src, policy);
}

// Copies src_bytes (0..16) and zero-fills the rest of the 16 bytes (the shared-address form is
// async_copy.cuh's).
using fuselm::cp_async_16_zfill;
__device__ __forceinline__ void cp_async_16_zfill(void* dst, const void* src, int src_bytes) {
  cp_async_16_zfill(shared_address(dst), src, src_bytes);
}

// For activation rows that are only 4-byte aligned.
__device__ __forceinline__ void cp_async_4_zfill(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}


// The CTA pipeline's producer warp moves each stage with one bulk copy per row tile
// (kernels/cuda/async_copy.cuh) and the consumers wait on the stage's mbarrier.

template <typename T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return __half2float(v);
  }
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return __float2half_rn(v);
  }
}

// Fragment element i of a lane: row g + 8*(i/2), token 2t + (i%2) within the 8-token n-tile.
__device__ __forceinline__ int frag_row(int g, int i) { return g + (i >= 2 ? 8 : 0); }
__device__ __forceinline__ int frag_token(int mt, int t, int i) { return mt * 8 + 2 * t + (i & 1); }

// c = the accumulator fragment `slot` of cluster rank 0 + rank 1 + ... in that order (`part` is
// this CTA's partial buffer; with k_split 1 it is read directly).
template <int MT>
__device__ __forceinline__ void sum_cluster_partials(float (&c)[MT][4], float* part, int slot, int k_split, int lane) {
  const float* first = k_split > 1 ? cluster_peer(part, 0) : part;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 4; ++i) c[mt][i] = first[((slot * MT + mt) * 4 + i) * 32 + lane];
  for (int q = 1; q < k_split; ++q) {
    const float* peer = cluster_peer(part, q);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) c[mt][i] += peer[((slot * MT + mt) * 4 + i) * 32 + lane];
  }
}

// The folded RMSNorm: each token's column times its 1/rms (columns past m get 0).
template <int MT>
__device__ __forceinline__ void scale_by_rstd(float (&c)[MT][4], const float* rstd, int t, int m) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int tok = frag_token(mt, t, i);
      c[mt][i] *= tok < m ? rstd[tok] : 0.0f;
    }
}

// An epilogue finishes one 16-row tile from a lane's accumulator fragment. What it reads from memory
// (its Operands) is read before the K loop and handed to `apply`: loaded after the K loop, those
// reads were a round trip on the kernel's tail (1-2.4 us per residual GEMM in the decode step).
// `prepare` runs before the wait for the previous kernel and reads only what no kernel of the step
// writes (weights, and step inputs the host wrote before the step); `load` runs after the wait.
struct NoOperands {};

// The epilogue reads of an epilogue that reads nothing from memory.
struct NoEpilogueReads {
  template <int MT>
  using Operands = NoOperands;
  template <typename T, int MT>
  __device__ Operands<MT> prepare(int64_t, int, int, int) const {
    return {};
  }
  template <typename T, int MT>
  __device__ void load(Operands<MT>&, int64_t, int, int, int) const {}
};

// A logit's rank for the greedy pick: larger first, then the lower row; NaN ranks below everything
// (0), and -0 as +0 (they compare equal). The sampling kernel's greedy scan picks the same id.
__device__ __forceinline__ uint64_t greedy_key(float v, int64_t row) {
  if (isnan(v)) return 0;
  const uint32_t bits = v == 0.0f ? 0u : __float_as_uint(v);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(row));
}

struct StoreEpilogue : NoEpilogueReads {
  void* out;
  DType out_dtype;
  int64_t stride;
  int64_t rows;
  SkinnyGreedyPick pick;  // tile_keys null: none

  template <typename T, int MT>
  __device__ void apply(int64_t nt, int g, int t, const float (&c)[MT][4], int m, const Operands<MT>&) const {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = nt * 16 + frag_row(g, i);
        const int tok = frag_token(mt, t, i);
        if (row >= rows || tok >= m) continue;
        const int64_t idx = tok * stride + row;
        if (out_dtype == DType::F32) {
          static_cast<float*>(out)[idx] = c[mt][i];
        } else {
          static_cast<T*>(out)[idx] = from_float<T>(c[mt][i]);
        }
      }
    }
    if (pick.tile_keys == nullptr) return;
    // The tile's best key per token: a lane holds rows g and g + 8 of tokens 2t and 2t + 1; the
    // lanes of one t (lane % 4) hold the tile's 16 rows. The whole warp runs every epilogue call.
    const int64_t row_tiles = mma_tiles(rows);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t row0 = nt * 16 + g, row1 = row0 + 8;
        uint64_t key = row0 < rows ? greedy_key(c[mt][j], row0) : 0;
        const uint64_t key1 = row1 < rows ? greedy_key(c[mt][j + 2], row1) : 0;
        key = key1 > key ? key1 : key;
#pragma unroll
        for (int offset = 4; offset < 32; offset *= 2) {
          const uint64_t other = __shfl_xor_sync(0xffffffffu, key, offset);
          key = other > key ? other : key;
        }
        const int tok = frag_token(mt, t, j);
        if (g == 0 && tok < m) pick.tile_keys[tok * row_tiles + nt] = key;
      }
    }
  }

  // Every thread of every CTA, after its tiles' epilogues and the cluster's last barrier: the last CTA
  // to count itself in picks the greedy rows' tokens from all the tiles' keys.
  __device__ void finish_cta(int m) const {
    if (pick.tile_keys == nullptr) return;
    // The kernel's dynamic shared memory, which nothing reads any more: static __shared__ variables
    // here would grow every store instance's footprint, and with it change how many fit on an SM.
    extern __shared__ __align__(128) unsigned char smem[];
    int& last = *reinterpret_cast<int*>(smem);
    uint64_t* scratch = reinterpret_cast<uint64_t*>(smem + 128);  // [32]
    __syncthreads();  // this CTA's keys are written, and its epilogues' reads of `smem` done
    if (threadIdx.x == 0) {
      __threadfence();  // ... and visible before the count
      last = atomicAdd(pick.ctas_done, 1) == static_cast<int>(gridDim.x * gridDim.y * gridDim.z) - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();  // every other CTA's keys, counted in before this one, are visible
    const int64_t row_tiles = mma_tiles(rows);
    for (int tok = 0; tok < m; ++tok) {
      if (!greedy_without_penalty(pick.params[tok])) continue;
      const uint64_t* keys = pick.tile_keys + tok * row_tiles;
      // Eight loads a thread in flight before the first use.
      uint64_t best = 0;
      for (int64_t base = threadIdx.x; base < row_tiles; base += 8 * static_cast<int64_t>(blockDim.x)) {
        uint64_t k[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int64_t i = base + j * static_cast<int64_t>(blockDim.x);
          k[j] = i < row_tiles ? __ldcg(reinterpret_cast<const unsigned long long*>(keys + i)) : 0;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) best = k[j] > best ? k[j] : best;
      }
      best = device::block_reduce(best, device::MaxOp{}, uint64_t{0}, scratch);
      if (threadIdx.x == 0) {
        const int32_t id = best == 0 ? -1 : static_cast<int32_t>(~static_cast<uint32_t>(best));
        pick.tokens[tok] = id;
        if (pick.host_tokens != nullptr) pick.host_tokens[tok] = id;
      }
    }
    if (threadIdx.x == 0) *pick.ctas_done = 0;  // for the next launch, which starts after this grid ends
  }
};

// An epilogue's per-CTA finish, where it has one.
template <class Epilogue>
__device__ __forceinline__ void finish_epilogue_cta(const Epilogue& epilogue, int m) {
  if constexpr (requires { epilogue.finish_cta(m); }) epilogue.finish_cta(m);
}

struct ResidualEpilogue {
  SkinnyResidualOut out;
  int64_t rows;
  int64_t row_tiles;

  // The residual stream's values of the lane's fragment and the next norm's weights of its rows.
  template <int MT>
  struct Operands {
    float res[MT][4];
    float gain[2];
  };
  // The gains are weights: before the wait at 9-16 tokens. One-token instances keep them after it:
  // none of session 26's one-token placements before the wait won (docs/kernels/skinny_gemm.md).
  template <typename T, int MT>
  __device__ Operands<MT> prepare(int64_t nt, int g, int, int) const {
    Operands<MT> in;
    if (MT == 2) load_gains(in, nt, g);
    return in;
  }
  template <typename T, int MT>
  __device__ void load(Operands<MT>& in, int64_t nt, int g, int t, int m) const {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = nt * 16 + frag_row(g, i);
        const int tok = frag_token(mt, t, i);
        in.res[mt][i] = row < rows && tok < m ? out.residual[tok * out.residual_stride + row] : 0.0f;
      }
    }
    if (MT == 1) load_gains(in, nt, g);
  }
  template <int MT>
  __device__ void load_gains(Operands<MT>& in, int64_t nt, int g) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = nt * 16 + g + 8 * h;
      in.gain[h] = out.next_norm_weight != nullptr && row < rows ? out.next_norm_weight[row] : 0.0f;
    }
  }

  template <typename T, int MT>
  __device__ void apply(int64_t nt, int g, int t, const float (&c)[MT][4], int m, const Operands<MT>& in) const {
    const bool norm = out.next_norm_weight != nullptr;
    float sq[MT][2] = {};
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = nt * 16 + frag_row(g, i);
        const int tok = frag_token(mt, t, i);
        if (row >= rows || tok >= m) continue;
        const float v = in.res[mt][i] + c[mt][i];
        out.residual[tok * out.residual_stride + row] = v;
        if (norm) {
          static_cast<T*>(out.xg)[tok * out.xg_stride + row] = from_float<T>(v * in.gain[i / 2]);
          sq[mt][i & 1] += v * v;
        }
      }
    }
    if (!norm || out.partials == nullptr) return;
    // Sum of squares over the tile's 16 rows, per token: rows g and g+8 are in this lane; the
    // eight row groups sit in lanes differing in bits 2..4. Fixed order, no atomics.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float s = sq[mt][e];
        s += __shfl_xor_sync(0xffffffffu, s, 4);
        s += __shfl_xor_sync(0xffffffffu, s, 8);
        s += __shfl_xor_sync(0xffffffffu, s, 16);
        const int tok = mt * 8 + 2 * t + e;
        if (g == 0 && tok < m) out.partials[tok * row_tiles + nt] = s;
      }
    }
  }
};

// The RoPE rotation of one (dim, dim + half) pair by an angle's cosine and sine, its roundings
// spelled out: one-token and 9-16-token instances (one rounding class) compute the angle in
// different places and must give the same bits, whatever the compiler would contract.
__device__ __forceinline__ float2 rope_apply(float lo, float hi, float co, float s) {
  return make_float2(__fmaf_rn(lo, co, -__fmul_rn(hi, s)), __fmaf_rn(hi, co, __fmul_rn(lo, s)));
}

// The angle's cosine and sine at a position, out of line: sincosf is a long instruction sequence
// (with a slow path for large arguments), and a copy inlined per token slot made the epilogue, which
// runs once per launch from a cold instruction cache, that much longer to fetch.
static __device__ __noinline__ float2 rope_cos_sin(int pos, float freq) {
  float s, co;
  sincosf(static_cast<float>(pos) * freq, &s, &co);
  return make_float2(co, s);
}

// The same and the rotation, in one call (the one-token instances' tail).
static __device__ __noinline__ float2 rope_rotate(float lo, float hi, int pos, float freq) {
  float s, co;
  sincosf(static_cast<float>(pos) * freq, &s, &co);
  return rope_apply(lo, hi, co, s);
}

struct QkvRopeEpilogue {
  SkinnyQkvOut out;

  // Per token slot of the lane: its position, the cache block of K and V rows, and the rotation's
  // cosine and sine. Where they are worked out depends on the token count, as measured
  // (docs/kernels/skinny_gemm.md, "The QKV epilogue's lookups before the wait"):
  // - one token: the positions and frequency right after the wait (`load`), the block lookup (its
  //   address needs the position) and sincosf in `apply`. Before the wait that chain held up the
  //   late CTAs' release, and right after it the warp pipeline's K loop;
  // - 9-16 tokens: all of it before the wait (`prepare`; the positions are step inputs), where the
  //   CTA pipeline's consumers idle; in `apply` the lookup and four sincosf calls were the tail.
  template <int MT>
  struct Operands {
    float freq;
    int pos[MT][2];  // 9-16 tokens, K and V tiles: the cache row, block * block_size + slot
    float cos[MT][2], sin[MT][2];  // 9-16 tokens
  };
  static constexpr bool prepared(int mt) { return mt == 2; }

  struct TileRole {
    int head, dim;  // dim: this lane's pair (dim, dim + head_dim / 2)
    bool is_q, is_v, live;
  };
  __device__ TileRole role(int64_t nt, int g) const {
    const int tiles_per_head = out.head_dim / 16;
    TileRole r;
    r.head = static_cast<int>(nt / tiles_per_head);
    r.dim = static_cast<int>(nt % tiles_per_head) * 8 + g;
    r.is_q = r.head < out.n_heads;
    r.is_v = r.head >= out.n_heads + out.n_kv_heads;
    r.live = r.head < out.n_heads + 2 * out.n_kv_heads;
    return r;
  }
  template <int MT>
  __device__ void read_positions(Operands<MT>& in, const TileRole& r, int t, int m) const {
    in.freq = r.is_v ? 0.0f : out.inv_freq[r.dim];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int tok = mt * 8 + 2 * t + e;
        in.pos[mt][e] = tok < m ? out.positions[tok] : 0;
      }
  }

  // The cache block of each token slot's position (0 past m).
  template <int MT>
  __device__ void lookup_blocks(int (&block)[MT][2], const int (&pos)[MT][2], int t, int m) const {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int tok = mt * 8 + 2 * t + e;
        block[mt][e] = tok < m ? out.kv.block_tables[static_cast<int64_t>(tok) * out.kv.max_blocks_per_seq +
                                                     pos[mt][e] / out.kv.layout.block_size]
                               : 0;
      }
  }

  template <typename T, int MT>
  __device__ Operands<MT> prepare(int64_t nt, int g, int t, int m) const {
    Operands<MT> in{};
    const TileRole r = role(nt, g);
    if (!prepared(MT) || !r.live) return in;
    read_positions(in, r, t, m);
    // Every block lookup first, then the sincosf calls (a load does not pass a call).
    const int block_size = out.kv.layout.block_size;
    int block[MT][2] = {};
    if (!r.is_q) lookup_blocks(block, in.pos, t, m);
    if (!r.is_v) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (mt * 8 + 2 * t + e >= m) continue;
          const float2 cs = rope_cos_sin(in.pos[mt][e], in.freq);
          in.cos[mt][e] = cs.x;
          in.sin[mt][e] = cs.y;
        }
    }
    if (!r.is_q) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int e = 0; e < 2; ++e) in.pos[mt][e] = block[mt][e] * block_size + in.pos[mt][e] % block_size;
    }
    return in;
  }
  template <typename T, int MT>
  __device__ void load(Operands<MT>& in, int64_t nt, int g, int t, int m) const {
    const TileRole r = role(nt, g);
    if (!prepared(MT) && r.live) read_positions(in, r, t, m);
  }

  template <typename T, int MT>
  __device__ void apply(int64_t nt, int g, int t, const float (&c)[MT][4], int m, const Operands<MT>& in) const {
    const TileRole r = role(nt, g);
    if (!r.live) return;
    const int half = out.head_dim / 2;
    const PagedKvLayout& layout = out.kv.layout;
    // One token: every block lookup first, then the stores (a load may not pass a store that could
    // alias it).
    int block[MT][2] = {};
    if (!prepared(MT) && !r.is_q) lookup_blocks(block, in.pos, t, m);
    const int block_shift = __ffs(layout.block_size) - 1;  // a power of two
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int tok = mt * 8 + 2 * t + e;
        if (tok >= m) continue;
        float2 v = make_float2(c[mt][e], c[mt][2 + e]);
        if (!r.is_v)
          v = prepared(MT) ? rope_apply(v.x, v.y, in.cos[mt][e], in.sin[mt][e])
                           : rope_rotate(v.x, v.y, in.pos[mt][e], in.freq);
        T* dst;
        if (r.is_q) {
          dst = static_cast<T*>(out.q) + tok * out.q_stride + static_cast<int64_t>(r.head) * out.head_dim;
        } else {
          const int kv_head = (r.head - out.n_heads) % out.n_kv_heads;
          const int64_t row = prepared(MT) ? layout.offset(in.pos[mt][e] >> block_shift, kv_head,
                                                           in.pos[mt][e] & (layout.block_size - 1))
                                           : layout.offset(block[mt][e], kv_head, in.pos[mt][e] % layout.block_size);
          dst = static_cast<T*>(r.is_v ? out.kv.v : out.kv.k) + row;
        }
        dst[r.dim] = from_float<T>(v.x);
        dst[r.dim + half] = from_float<T>(v.y);
      }
    }
  }
};

struct SwigluEpilogue : NoEpilogueReads {
  SkinnySwigluOut out;

  template <typename T, int MT>
  __device__ void apply(int64_t nt, int g, int t, const float (&c)[MT][4], int m, const Operands<MT>&) const {
    const int64_t j = nt * 8 + g;
    if (j >= out.ffn) return;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int tok = mt * 8 + 2 * t + e;
        if (tok >= m) continue;
        const float gate = c[mt][e], up = c[mt][2 + e];
        static_cast<T*>(out.act)[tok * out.act_stride + j] = from_float<T>(gate / (1.0f + expf(-gate)) * up);
      }
    }
  }
};

// The folded RMSNorm's 1/rms per token, from the previous kernel's per-tile sums of squares in a
// fixed order; warp w of `warps` takes tokens w, w + warps, ... Called right after the wait for the
// previous kernel, so that its loads overlap the weight stream instead of following it; the result
// is read after a later barrier.
__device__ __forceinline__ void norm_rstd(float* rstd, const SkinnyNorm& norm, int m, int warp, int warps, int lane) {
  if (norm.partials == nullptr) return;
  constexpr int kChunk = 8;  // loads issued together (a loop adding after each load waits per load)
  // The outer loops rolled: one or two passes each, run once per launch from a cold cache.
#pragma unroll 1
  for (int tok = warp; tok < m; tok += warps) {
    const float* row = norm.partials + tok * norm.num_partials;
    float s = 0.0f;
#pragma unroll 1
    for (int p0 = lane; p0 < norm.num_partials; p0 += 32 * kChunk) {
      float v[kChunk];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) v[j] = p0 + 32 * j < norm.num_partials ? row[p0 + 32 * j] : 0.0f;
#pragma unroll
      for (int j = 0; j < kChunk; ++j)
        if (p0 + 32 * j < norm.num_partials) s += v[j];
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) rstd[tok] = rsqrtf(s / norm.dim + norm.eps);
  }
}

// K ranges in 16-wide k-tiles: each of the k_split cluster ranks takes an equal share of K (the
// last may take less), and in the warp pipeline each of the CTA's warps an equal share of its
// rank's. Shared by the kernels and by the launcher, which sizes the warp pipeline's ring by them.
FUSELM_HD int64_t k_tiles_per_rank(int64_t k_tiles, int k_split) { return (k_tiles + k_split - 1) / k_split; }
FUSELM_HD int64_t k_tiles_per_warp(int64_t k_tiles, int k_split, int warps) {
  return (k_tiles_per_rank(k_tiles, k_split) + warps - 1) / warps;
}

// The per-warp copy pipeline of one kernel instance, all in shared memory. A stage holds U k-tiles
// of each of the CTA's RT row tiles (U * RT = 4: 2 KB of weights) and the same K range of the
// activation rows; STAGES - 1 stages are in flight while one is multiplied, so every warp keeps
// 6 KB of weights on the way (at 4 stages) without spending registers on them. launch_shape
// doubles the stages where one CTA per SM leaves the shared memory for it.
template <typename T, int MT, int RT, int WARPS, int STAGES = 4>
struct SkinnyPipe {
  static constexpr int kStageKTiles = RT >= 4 ? 1 : 4 / RT;  // U
  static constexpr int kStages = STAGES;
  static constexpr int kTokens = MT * 8;
  // Activation row stride in the stage, in elements: +8 (16 bytes) puts the eight token rows that a
  // B-fragment load touches in different banks, and keeps each row 16-byte aligned for cp.async.
  static constexpr int kXStride = kStageKTiles * 16 + 8;
  static constexpr int kWBytes = kStageKTiles * RT * 512;
  static constexpr int kXBytes = kTokens * kXStride * static_cast<int>(sizeof(T));
  static constexpr int kWarpBytes = kStages * (kWBytes + kXBytes);
  // After the main loop the same memory holds every warp's accumulators and the CTA's sum of them.
  static constexpr int kFrag = RT * MT * 4;  // accumulator values per lane
  static constexpr int kReduceBytes = (WARPS + 1) * kFrag * 32 * static_cast<int>(sizeof(float));
  static constexpr int kSmemBytes = WARPS * kWarpBytes > kReduceBytes ? WARPS * kWarpBytes : kReduceBytes;
  static_assert(kWBytes % 16 == 0 && kXBytes % 16 == 0, "stages must stay 16-byte aligned");
};

// Tokens 0..m-1, columns k0 .. k0 + width - 1 (width a multiple of 16) of the activation rows, into
// rows of xs_stride elements, copied by threads first, first + step, ...; columns past K are
// zero-filled (the weights' padding is zero, but 0 * garbage could be NaN). 16-byte copies where the
// rows allow them, 4-byte copies otherwise. Every pipeline stages through this, so all of them see
// the same operands.
template <typename T>
__device__ __forceinline__ void stage_activation_columns(T* dst, int xs_stride, const T* __restrict__ x,
                                                         int64_t x_stride, bool x_vec16, int m, int64_t cols,
                                                         int64_t k0, int width, int first, int step) {
  // Rolled loops: a lane copies a chunk or two (this runs after the wait, from a cold instruction
  // cache, so its size is time on the kernel's path).
  if (x_vec16) {
    const int chunks = width / 8;
#pragma unroll 1
    for (int c = first; c < m * chunks; c += step) {
      const int tok = c / chunks, j = c % chunks;
      const int64_t k = k0 + j * 8;
      const int bytes = k >= cols ? 0 : cols - k >= 8 ? 16 : static_cast<int>(cols - k) * 2;
      cp_async_16_zfill(dst + tok * xs_stride + j * 8, x + tok * x_stride + (bytes > 0 ? k : 0), bytes);
    }
  } else {
    const int chunks = width / 2;
#pragma unroll 1
    for (int c = first; c < m * chunks; c += step) {
      const int tok = c / chunks, j = c % chunks;
      const int64_t k = k0 + j * 2;
      const int bytes = k < cols ? 4 : 0;
      cp_async_4_zfill(dst + tok * xs_stride + j * 2, x + tok * x_stride + (bytes > 0 ? k : 0), bytes);
    }
  }
}

// One lane's share of a stage's activation rows: U k-tiles from column k0, into rows of XS elements.
template <typename T, int U, int XS>
__device__ __forceinline__ void stage_activations(T* dst, const T* __restrict__ x, int64_t x_stride, bool x_vec16,
                                                  int m, int64_t cols, int64_t k0, int lane) {
  stage_activation_columns<T>(dst, XS, x, x_stride, x_vec16, m, cols, k0, U * 16, lane, 32);
}

// The mma B fragments (activations) of k-tile u of a staged stage, rows of `xs_stride` elements:
// lane (g, t) holds token mt * 8 + g, columns 2t, 2t + 1 and 2t + 8, 2t + 9 (tokens >= m: zero).
template <typename T, int MT>
__device__ __forceinline__ void activation_fragments(uint32_t (&b)[MT][2], const T* xs, int xs_stride, int u, int g,
                                                     int t, int m) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int tok = mt * 8 + g;
    const T* row = xs + tok * xs_stride + u * 16 + 2 * t;
    b[mt][0] = tok < m ? *reinterpret_cast<const uint32_t*>(row) : 0u;
    b[mt][1] = tok < m ? *reinterpret_cast<const uint32_t*>(row + 8) : 0u;
  }
}

// A cluster of k_split CTAs owns RT row tiles (16 rows each) and splits K into k_split fixed ranges;
// inside a CTA the WARPS warps split the CTA's range again. Each warp streams its range through its
// own cp.async pipeline (weights and activation rows), multiplying with mma.sync. The warps' partial
// sums are added in warp order in shared memory; then row tile r is finished by CTA rank r % k_split,
// which adds the CTAs' sums in rank order through distributed shared memory, scales by 1/rms and
// runs the epilogue. MT = 8-token column tiles (1 for m <= 8, 2 for m <= 16).
//
// With programmatic dependent launch the prologue's weight copies run before griddepcontrol.wait:
// weights are never written by an earlier kernel, everything else (activations, norm partials and
// all the epilogue's reads and writes) comes after it.
template <typename T, int MT, int RT, int WARPS, class Epilogue, int PIPE_STAGES = 4>
__global__ void __launch_bounds__(WARPS * 32)
    skinny_gemm_kernel(const uint4* __restrict__ w, int64_t row_tiles, int64_t k_tiles, int64_t cols,
                       const T* __restrict__ x, int64_t x_stride, bool x_vec16, int m, int k_split, SkinnyNorm norm,
                       Epilogue epilogue, KernelTrace* trace) {
  using Pipe = SkinnyPipe<T, MT, RT, WARPS, PIPE_STAGES>;
  if (threadIdx.x == 0) trace_start(trace);
  constexpr int U = Pipe::kStageKTiles, STAGES = Pipe::kStages, XS = Pipe::kXStride, kFrag = Pipe::kFrag;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ float rstd[kSkinnyGemmMaxTokens];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  // Clusters are 1-D along x, so a CTA's rank in its cluster is blockIdx.x % k_split.
  const int rank = static_cast<int>(blockIdx.x % k_split);
  const int64_t tile0 = static_cast<int64_t>(blockIdx.x / k_split) * RT;

  // K ranges (in 16-wide k-tiles) depend on K, k_split and WARPS only, never on m.
  const int64_t per_cta = k_tiles_per_rank(k_tiles, k_split);
  const int64_t per_warp = k_tiles_per_warp(k_tiles, k_split, WARPS);
  const int64_t k_begin = rank * per_cta + warp * per_warp;
  const int64_t k_end = min(min(k_tiles, (rank + 1) * per_cta), k_begin + per_warp);
  const int stages = k_end > k_begin ? static_cast<int>((k_end - k_begin + U - 1) / U) : 0;

  unsigned char* pipe = smem + warp * Pipe::kWarpBytes;
  uint4* wbuf = reinterpret_cast<uint4*>(pipe);                      // [STAGES][U][RT][32 lanes]
  T* xbuf = reinterpret_cast<T*>(pipe + STAGES * Pipe::kWBytes);     // [STAGES][tokens][XS]

  // The copies of a stage, planned once for the whole K loop: every address is a base fixed per
  // lane plus the stage's offset, in 32 bits. (Recomputed per copy in 64 bits, with each shared
  // address converted from a generic one, a stage took ~200 instructions for 4 k-tiles, and the
  // one-token K loops at two warps a scheduler are bound by their issue.)
  const int k_count = static_cast<int>(k_end - k_begin);  // this warp's k-tiles
  const uint32_t wbuf_s = shared_address(pipe), xbuf_s = wbuf_s + STAGES * Pipe::kWBytes;
  // Each lane copies, and later reads, only its own 16-byte fragment of each weight tile: row tile
  // tile0 + r, k-tile kt is at w + ((tile0 + r) * k_tiles + kt) * 32 + lane.
  const uint4* w_lane = w + (tile0 * k_tiles + k_begin) * 32 + lane;
  const int64_t w_row = k_tiles * 32;
  bool row_live[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) row_live[r] = tile0 + r < row_tiles;
  const uint64_t weight_policy = l2_evict_first_policy();
  auto issue_weights = [&](int s) {
    if (s >= stages) return;
    const uint32_t dst = wbuf_s + (s % STAGES) * Pipe::kWBytes + lane * 16;
    const uint4* src = w_lane + s * (U * 32);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (s * U + u >= k_count) break;
#pragma unroll
      for (int r = 0; r < RT; ++r)
        if (row_live[r]) cp_async_16_evict_first(dst + (u * RT + r) * 512, src + u * 32 + r * w_row, weight_policy);
    }
  };
  // Activation rows of the stage's K range; columns past K are zero-filled (the weights' padding is
  // zero, but 0 * garbage could be NaN). Tokens >= m are never read. With 16-byte rows, a lane's
  // first chunk (token lane / chunks, columns (lane % chunks) * 8 ..) is the same in every stage,
  // and it is all a lane copies up to 32 / chunks tokens; the rest take the general loop.
  constexpr int kChunks = U * 2;  // 16-byte chunks of a token's stage row
  const int lane_tok = lane / kChunks, lane_j = lane % kChunks;
  const bool lane_copies = x_vec16 && lane_tok < m;
  const T* x_lane = x + (lane_copies ? lane_tok * x_stride + k_begin * 16 + lane_j * 8 : 0);
  const int x_col0 = static_cast<int>(k_begin * 16) + lane_j * 8;
  const uint32_t x_dst = xbuf_s + (lane_tok * XS + lane_j * 8) * static_cast<int>(sizeof(T));
  auto issue_x = [&](int s) {
    if (s >= stages) return;
    if (!x_vec16 || m * kChunks > 32) {
      stage_activations<T, U, XS>(xbuf + (s % STAGES) * (Pipe::kTokens * XS), x, x_stride, x_vec16, m, cols,
                                  (k_begin + static_cast<int64_t>(s) * U) * 16, lane);
      return;
    }
    if (!lane_copies) return;
    const int left = static_cast<int>(cols) - (x_col0 + s * U * 16);  // columns from this chunk to K's end
    const int bytes = left <= 0 ? 0 : left >= 8 ? 16 : left * 2;
    cp_async_16_zfill(x_dst + (s % STAGES) * Pipe::kXBytes, bytes > 0 ? x_lane + s * U * 16 : x, bytes);
  };

  // Groups in order: W0 .. W(STAGES-2), X(0 .. STAGES-2), then one group per later stage. The
  // prologue's loops stay rolled: this code runs once per launch, fetched cold (the step's other
  // kernels evict it from the instruction cache), so its size is time before the first stage lands.
#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) {
    issue_weights(s);
    cp_async_commit();
  }
  // Once a warp's last weight stage is issued the next kernel may start streaming its own weights
  // (the first call in a CTA is the one that counts).
  if (stages <= STAGES - 1) allow_next_grid();
  wait_for_previous_grid();
  if (threadIdx.x == 0) trace_released(trace);
#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) issue_x(s);
  cp_async_commit();
  norm_rstd(rstd, norm, m, warp, WARPS, lane);
  // The epilogue's operands of the tile this warp finishes (at most one: RT <= WARPS), loaded while
  // the K loop streams. All of them after the wait: this pipeline runs the one-token instances,
  // where reads moved before the wait lost (docs/kernels/skinny_gemm.md, session 26).
  static_assert(RT <= WARPS, "a warp finishes at most one row tile");
  typename Epilogue::template Operands<MT> operands{};
#pragma unroll
  for (int r = 0; r < RT; ++r)
    if (r % k_split == rank && (r / k_split) % WARPS == warp && tile0 + r < row_tiles) {
      operands = epilogue.template prepare<T, MT>(tile0 + r, g, t, m);
      epilogue.template load<T, MT>(operands, tile0 + r, g, t, m);
    }

  float acc[RT][MT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][mt][i] = 0.0f;

  for (int s = 0; s < stages; ++s) {
    __syncwarp();  // every lane has read stage s-1's activations before that buffer is refilled
    issue_weights(s + STAGES - 1);
    if (s + STAGES - 1 == stages - 1) allow_next_grid();
    issue_x(s + STAGES - 1);
    cp_async_commit();
    // Stage 0 needs the prologue's activation group, which sits behind all prologue weight
    // groups: wait for everything but the group just issued. Later stages: all but the newest
    // STAGES - 1 groups.
    if (s == 0) {
      cp_async_wait<1>();
      if (threadIdx.x == 0) trace_mark(trace, 0);  // the first stage has landed
    } else {
      cp_async_wait<STAGES - 1>();
    }
    __syncwarp();  // activation chunks copied by other lanes are visible
    const uint4* ws = wbuf + (s % STAGES) * (U * RT * 32);
    const T* xs = xbuf + (s % STAGES) * (Pipe::kTokens * XS);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (s * U + u >= k_count) break;
      uint32_t b[MT][2];
      activation_fragments<T, MT>(b, xs, XS, u, g, t, m);
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        if (!row_live[r]) continue;
        const uint4 a = ws[(u * RT + r) * 32 + lane];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) mma_m16n8k16<T>(acc[r][mt], a.x, a.y, a.z, a.w, b[mt][0], b[mt][1]);
      }
    }
  }
  cp_async_wait<0>();

  __syncthreads();  // every warp is done with its pipeline, whose memory now holds the reduction
  if (threadIdx.x == 0) trace_mark(trace, 1);
  float* red = reinterpret_cast<float*>(smem);  // [WARPS][kFrag][32]
  float* part = red + WARPS * kFrag * 32;       // [kFrag][32]: this CTA's sum over its warps
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) red[(warp * kFrag + (r * MT + mt) * 4 + i) * 32 + lane] = acc[r][mt][i];
  __syncthreads();
#pragma unroll 1  // one pass at most tile shapes: the unrolled copies were code fetched cold
  for (int e = threadIdx.x; e < kFrag * 32; e += WARPS * 32) {
    float s = red[e];
#pragma unroll
    for (int w2 = 1; w2 < WARPS; ++w2) s += red[w2 * kFrag * 32 + e];
    part[e] = s;
  }
  if (k_split > 1) {
    cluster_barrier();  // every CTA's sum is in its shared memory and visible to the cluster
  } else {
    __syncthreads();
  }
  if (threadIdx.x == 0) trace_mark(trace, 2);  // the epilogue starts

  // Row tile r is finished by CTA rank r % k_split, warp (r / k_split) % WARPS: with RT >= 2 the
  // epilogues of a cluster run in parallel.
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    if (r % k_split != rank || (r / k_split) % WARPS != warp) continue;
    // Rank 0 + rank 1 + ... in that order, whichever rank adds them.
    float c[MT][4];
    sum_cluster_partials<MT>(c, part, r, k_split, lane);
    if (norm.partials != nullptr) scale_by_rstd<MT>(c, rstd, t, m);
    if (tile0 + r < row_tiles) epilogue.template apply<T, MT>(tile0 + r, g, t, c, m, operands);
  }
  // A CTA's shared memory must outlive its peers' reads of it (nothing else to order: relaxed).
  if (k_split > 1) cluster_barrier_relaxed();
  finish_epilogue_cta(epilogue, m);
  if (trace != nullptr) {
    __syncthreads();  // every warp's epilogue is done
    if (threadIdx.x == 0) trace_end(trace);
  }
}

// The end of a kernel whose warps split rows (the CTA and register pipelines), after a barrier that
// ends every read of the memory `part` reuses: a consumer warp holds the sums of its RT row tiles
// over the CTA's K range; with a cluster K split they go to `part` ([NT][MT][4][32]), and tile
// j = warp * RT + r is finished by cluster rank j % k_split (by its warp `warp`), which adds rank 0
// + rank 1 + ... in that order; then 1/rms and the epilogue.
template <typename T, int MT, int RT, int WARPS, class Epilogue>
__device__ __forceinline__ void finish_split_rows(const float (&acc)[RT][MT][4],
                                                  const typename Epilogue::template Operands<MT> (&operands)[RT],
                                                  float* part, bool consumer, int k_split, int rank, int64_t tile0,
                                                  int tiles_here, const float* rstd, const SkinnyNorm& norm,
                                                  const Epilogue& epilogue, int m, KernelTrace* trace) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t = lane % 4;
  if (threadIdx.x == 0) trace_mark(trace, 1);
  if (consumer && k_split > 1) {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) part[(((warp * RT + r) * MT + mt) * 4 + i) * 32 + lane] = acc[r][mt][i];
  }
  if (k_split > 1) {
    cluster_barrier();
  } else {
    __syncthreads();
  }
  if (threadIdx.x == 0) trace_mark(trace, 2);  // the epilogue starts
  if (consumer) {
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const int j = warp * RT + r;
      if (j % k_split != rank || j >= tiles_here) continue;
      float c[MT][4];
      if (k_split == 1) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int i = 0; i < 4; ++i) c[mt][i] = acc[r][mt][i];
      } else {
        sum_cluster_partials<MT>(c, part, j, k_split, lane);
      }
      if (norm.partials != nullptr) scale_by_rstd<MT>(c, rstd, t, m);
      epilogue.template apply<T, MT>(tile0 + j, lane / 4, t, c, m, operands[r]);
    }
  }
  // A CTA's shared memory must outlive its peers' reads of it (nothing else to order: relaxed).
  if (k_split > 1) cluster_barrier_relaxed();
  finish_epilogue_cta(epilogue, m);
  if (trace != nullptr) {
    __syncthreads();  // every warp's epilogue is done
    if (threadIdx.x == 0) trace_end(trace);
  }
}

// ---------------------------------------------------------------------------------------------
// CTA pipeline: the warps of a CTA split rows, not K. A CTA owns NT = RT * WARPS row tiles (warp w
// owns tiles w*RT .. w*RT+RT-1) and the K range of its cluster rank; a producer warp streams
// stages of U k-tiles of all NT row tiles (one bulk copy of U * 512 contiguous bytes per row tile)
// plus the same K range of the activation rows, which every warp then reads: a token's activations
// are read once per NT * 16 weight rows (at m = 16 that is 1/NT of the weight traffic, against 1/RT
// when warps split K). Stage = 8 KB of weights (7 KB for 7 row tiles), at least 32 KB in flight.
//
// Weights packed in tile groups of NT (mma_tile_index) hold a stage's NT x U tiles as one run of
// 8 KB, k-tile-major: one bulk copy per stage instead of NT, and the stage in shared memory is
// [U][NT] instead of [NT][U]. Same fragments into the same mma in the same order: the same bits.
// The read-order probe (docs/kernels/skinny_gemm.md) streamed the 8B gate/up matrix at 3.90 TB/s
// in 1 KB copies and 4.11 TB/s in 8 KB copies, the same bytes and grid.
template <typename T, int MT, int RT, int WARPS>
struct CtaPipe {
  static constexpr int kTiles = RT * WARPS;
  static constexpr int kStageKTiles = kTiles >= 16 ? 1 : 16 / kTiles;  // U
  static constexpr int kXStride = kStageKTiles * 16 + 8;  // elements; +8 as in SkinnyPipe
  static constexpr int kWBytes = kTiles * kStageKTiles * 512;
  // At least 32 KB of weights in flight: 4 stages of 8 KB, 5 of 7 KB (40 KB was even at batch 1 and
  // cost the 8B batch-16 step 10%: docs/kernels/skinny_gemm.md).
  static constexpr int kStages = (32 * 1024 + kWBytes - 1) / kWBytes;
  // Weight stages issued before griddepcontrol.wait; the rest follow the first stages' activations.
  // At 9-16 tokens, 2: with every stage issued first (4-5 CTAs an SM, 128-160 KB), the activations
  // landed ~3-3.7 us after the wait, queued behind them, and the 8B and 1B batch-16 steps were 2%
  // slower; at one token all stages went first was the fastest (1B: 2 stages -0.4%, 1 -1.3%).
  static constexpr int kStagesBeforeWait = MT == 2 ? 2 : kStages;
  static constexpr int kPartBytes = kTiles * MT * 4 * 32 * static_cast<int>(sizeof(float));
  static int smem_bytes(int m) {
    const int pipe = kStages * (kWBytes + m * kXStride * static_cast<int>(sizeof(T)));
    return pipe > kPartBytes ? pipe : kPartBytes;
  }
};

template <typename T, int MT, int RT, int WARPS, class Epilogue>
__global__ void __launch_bounds__((WARPS + 1) * 32)
    skinny_gemm_cta_kernel(const uint4* __restrict__ w, int64_t row_tiles, int64_t k_tiles, int64_t cols,
                           const T* __restrict__ x, int64_t x_stride, bool x_vec16, int m, int k_split,
                           SkinnyNorm norm, Epilogue epilogue, KernelTrace* trace, int tile_group) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Pipe = CtaPipe<T, MT, RT, WARPS>;
  if (threadIdx.x == 0) trace_start(trace);
  constexpr int NT = Pipe::kTiles, U = Pipe::kStageKTiles, STAGES = Pipe::kStages, XS = Pipe::kXStride;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[STAGES], empty[STAGES];
  __shared__ float rstd[kSkinnyGemmMaxTokens];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int rank = static_cast<int>(blockIdx.x % k_split);
  const int64_t tile0 = static_cast<int64_t>(blockIdx.x / k_split) * NT;
  const int tiles_here = static_cast<int>(min(static_cast<int64_t>(NT), row_tiles - tile0));
  // The cluster rank's K range depends on K and k_split only, never on m.
  const int64_t per_cta = k_tiles_per_rank(k_tiles, k_split);
  const int64_t k_begin = rank * per_cta;
  const int64_t k_end = min(k_tiles, k_begin + per_cta);
  const int stages = k_end > k_begin ? static_cast<int>((k_end - k_begin + U - 1) / U) : 0;
  uint4* wbuf = reinterpret_cast<uint4*>(smem);  // [STAGES][NT][U][32 lanes], grouped [STAGES][U][NT][32 lanes]
  T* xbuf = reinterpret_cast<T*>(smem + STAGES * Pipe::kWBytes);  // [STAGES][m][XS]
  const bool grouped = tile_group == NT;

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 33);         // the producer's expect_tx + one cp.async arrival per producer lane
      mbar_init(&empty[s], WARPS);     // one release per consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();

  float acc[RT][MT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][mt][i] = 0.0f;

  typename Epilogue::template Operands<MT> operands[RT] = {};  // consumers: their tiles' epilogue operands
  if (warp == WARPS) {
    // Producer. Weight stages first (they depend on no earlier kernel), then, after the previous
    // grid is done, the activations of those stages and the prologue's other weight stages; later
    // stages wait for their buffer to be free.
    const uint64_t policy = l2_evict_first_policy();
    auto issue_weights = [&](int s) {
      const int b = s % STAGES;
      const int64_t kt0 = k_begin + static_cast<int64_t>(s) * U;
      const int n_k = static_cast<int>(min(static_cast<int64_t>(U), k_end - kt0));
      if (grouped) {  // the group's padding tiles past tiles_here are zeros, copied along
        mbar_arrive_expect_tx(&full[b], NT * n_k * 512);
        bulk_copy_to_shared(wbuf + b * NT * U * 32, w + mma_tile_index(tile0, kt0, k_tiles, NT) * 32, NT * n_k * 512,
                            &full[b], policy);
        return;
      }
      mbar_arrive_expect_tx(&full[b], tiles_here * n_k * 512);
      for (int j = 0; j < tiles_here; ++j)
        bulk_copy_to_shared(wbuf + (b * NT + j) * U * 32, w + ((tile0 + j) * k_tiles + kt0) * 32, n_k * 512,
                            &full[b], policy);
    };
    auto issue_x = [&](int s) {
      const int b = s % STAGES;
      stage_activations<T, U, XS>(xbuf + b * m * XS, x, x_stride, x_vec16, m, cols,
                                  (k_begin + static_cast<int64_t>(s) * U) * 16, lane);
      cp_async_mbar_arrive(&full[b]);
    };
    const int prologue = stages < STAGES ? stages : STAGES;
    const int early = prologue < Pipe::kStagesBeforeWait ? prologue : Pipe::kStagesBeforeWait;
    if (lane == 0)
      for (int s = 0; s < early; ++s) issue_weights(s);
    wait_for_previous_grid();
    if (lane == 0) trace_released(trace);
    for (int s = 0; s < early; ++s) issue_x(s);
    for (int s = early; s < prologue; ++s) {
      if (lane == 0) issue_weights(s);
      issue_x(s);
    }
    for (int s = STAGES; s < stages; ++s) {
      const int b = s % STAGES;
      mbar_wait(&empty[b], (s / STAGES - 1) & 1);
      if (lane == 0) {
        fence_proxy_async();
        issue_weights(s);
      }
      issue_x(s);
    }
    cp_async_wait<0>();
  } else {
    // Consumers: each warp multiplies its own RT row tiles over the whole K range of the CTA. The
    // 1/rms comes first: the first stage's activations follow the same wait.
    // The epilogue's operands of the tiles this warp finishes, in flight while the K loop streams:
    // what no earlier kernel writes before the wait, the rest after it.
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const int j = warp * RT + r;
      if (j % k_split == rank && j < tiles_here) operands[r] = epilogue.template prepare<T, MT>(tile0 + j, g, t, m);
    }
    wait_for_previous_grid();
    norm_rstd(rstd, norm, m, warp, WARPS, lane);
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const int j = warp * RT + r;
      if (j % k_split == rank && j < tiles_here) epilogue.template load<T, MT>(operands[r], tile0 + j, g, t, m);
    }
    // One loop per stage layout, so that every tile's offset is a constant.
    auto consume = [&](auto grouped_layout) {
      constexpr bool G = decltype(grouped_layout)::value;
      constexpr int tile_step = G ? 1 : U, k_step = G ? NT : 1;  // fragments of 32 lanes
      for (int s = 0; s < stages; ++s) {
        const int b = s % STAGES;
        mbar_wait(&full[b], (s / STAGES) & 1);
        if (s == 0 && threadIdx.x == 0) trace_mark(trace, 0);  // the first stage has landed
        const uint4* ws = wbuf + (b * NT * U + warp * RT * tile_step) * 32;
        const T* xs = xbuf + b * m * XS;
        const int64_t kt0 = k_begin + static_cast<int64_t>(s) * U;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (kt0 + u >= k_end) break;
          uint32_t bf[MT][2];
          activation_fragments<T, MT>(bf, xs, XS, u, g, t, m);
#pragma unroll
          for (int r = 0; r < RT; ++r) {
            if (warp * RT + r >= tiles_here) continue;
            const uint4 a = ws[(r * tile_step + u * k_step) * 32 + lane];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) mma_m16n8k16<T>(acc[r][mt], a.x, a.y, a.z, a.w, bf[mt][0], bf[mt][1]);
          }
        }
        __syncwarp();  // every lane has read the stage before it is handed back
        if (lane == 0) mbar_arrive(&empty[b]);
      }
    };
    if (grouped) {
      consume(std::true_type{});
    } else {
      consume(std::false_type{});
    }
  }
  // The weight stream is issued and consumed: the next kernel may start streaming its own. (Letting
  // it start when this grid starts was slower on the 8B step, and when this grid has waited for its
  // predecessor no faster: docs/kernels/fused_decode.md.)
  allow_next_grid();

  __syncthreads();  // all stages consumed: the pipeline memory now holds the partial sums
  finish_split_rows<T, MT, RT, WARPS>(acc, operands, reinterpret_cast<float*>(smem), warp < WARPS, k_split, rank,
                                      tile0, tiles_here, rstd, norm, epilogue, m, trace);
#else
  (void)trace;
  __trap();  // the launcher refuses the CTA pipeline without sm_90 code
#endif
}

// ---------------------------------------------------------------------------------------------
// Register pipeline: the CTA pipeline's cut (warp w owns row tiles w*RT .. w*RT+RT-1 of the CTA's
// NT = RT * WARPS, over the K range of its cluster rank), with each lane loading its own 16-byte
// fragment of every weight tile straight into registers: no producer warp, no bulk copies, no
// weight stages in shared memory. Two halves of loads (4 a lane, 2 from 9 tokens on) alternate, one
// multiplied while the other is in flight. The activations of the rank's K range are staged once
// for all warps (in windows of kWindowKTiles k-tiles where the range is longer).
//
// Why: a read-order probe on the H200 (docs/kernels/skinny_gemm.md, session 16) streamed the 8B
// gate/up matrix's bytes in the CTA pipeline's order at 3.93 TB/s with 1 KB bulk copies and at
// 4.15 TB/s with 16-byte loads, the same addresses. Same k-tile order, same mma on the same
// fragments, same rank order: the bits are the CTA pipeline's (one rounding class, k<k_split>).
template <typename T, int MT, int RT, int WARPS>
struct RegPipe {
  static constexpr int kTiles = RT * WARPS;
  // H: k-tiles per half, 4 loads a lane at one 8-token tile; 2 at two, whose accumulators and
  // activation fragments take the registers (ptxas, 64 a thread: no spills then, 72 bytes at 4).
  static constexpr int kHalfKTiles = (RT >= 4 ? 1 : 4 / RT) / (MT == 2 ? 2 : 1);
  // Activation columns staged at a time (a multiple of 2H): 2,048 (4 KB a token), 1,024 from 9
  // tokens on, so that 16 tokens take 33 KB and four CTAs still share an SM.
  static constexpr int kWindowKTiles = MT == 1 ? 128 : 64;
  static constexpr int kPartBytes = kTiles * MT * 4 * 32 * static_cast<int>(sizeof(float));
  // Activation row stride in elements: +8 as in SkinnyPipe (rows in different banks).
  static FUSELM_HD int x_stride(int64_t rank_k_tiles) {
    return static_cast<int>(rank_k_tiles < kWindowKTiles ? rank_k_tiles : kWindowKTiles) * 16 + 8;
  }
  static int smem_bytes(int m, int64_t rank_k_tiles) {
    const int x = m * x_stride(rank_k_tiles) * static_cast<int>(sizeof(T));
    return x > kPartBytes ? x : kPartBytes;
  }
  static int max_smem_bytes() { return smem_bytes(MT * 8, kWindowKTiles); }
  static_assert(kWindowKTiles % (2 * kHalfKTiles) == 0, "a window holds whole pairs of halves");
};

// A weight fragment into registers, L2 evict-first (read once per step) and not kept in L1. Volatile:
// the loads issued before griddepcontrol.wait must stay there.
__device__ __forceinline__ uint4 load_weight_fragment(const uint4* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

// At most 64 registers a thread, so that an SM holds 2048 threads: four 8-warp CTAs, where the 8B
// gate/up matrix's grid (448 CTAs) needs 3.4 an SM to run in one wave.
template <typename T, int MT, int RT, int WARPS, class Epilogue>
__global__ void __launch_bounds__(WARPS * 32, 32 / WARPS)
    skinny_gemm_reg_kernel(const uint4* __restrict__ w, int64_t row_tiles, int64_t k_tiles, int64_t cols,
                           const T* __restrict__ x, int64_t x_stride, bool x_vec16, int m, int k_split,
                           SkinnyNorm norm, Epilogue epilogue, KernelTrace* trace, int tile_group) {
  using Pipe = RegPipe<T, MT, RT, WARPS>;
  if (threadIdx.x == 0) trace_start(trace);
  constexpr int NT = Pipe::kTiles, H = Pipe::kHalfKTiles;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ float rstd[kSkinnyGemmMaxTokens];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int rank = static_cast<int>(blockIdx.x % k_split);
  const int64_t tile0 = static_cast<int64_t>(blockIdx.x / k_split) * NT;
  const int tiles_here = static_cast<int>(min(static_cast<int64_t>(NT), row_tiles - tile0));
  // The cluster rank's K range depends on K and k_split only, never on m.
  // 32-bit k-tile indices (k_tiles * 32 < 2^31: checked by the launcher) keep the loop's registers few.
  const int per_cta = static_cast<int>(k_tiles_per_rank(k_tiles, k_split));
  const int k_begin = rank * per_cta;
  const int k_end = min(static_cast<int>(k_tiles), k_begin + per_cta);
  const int xs_stride = Pipe::x_stride(per_cta);
  T* xs = reinterpret_cast<T*>(smem);  // [m][xs_stride]: one window of the rank's activation columns

  const uint64_t policy = l2_evict_first_policy();
  // This lane's fragment of k-tile 0 of each of the warp's row tiles, and the step to the next
  // k-tile: 512 bytes, or a tile group's (tile_group 1 or NT: mma_tile_index).
  const uint4* wtile[RT];
  bool live[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int j = warp * RT + r;
    live[r] = j < tiles_here;
    wtile[r] = w + mma_tile_index(tile0 + j, 0, k_tiles, tile_group) * 32 + lane;
  }
  const int kt_step = tile_group * 32;
  uint4 wa[H][RT], wb[H][RT];
  auto load_half = [&](uint4 (&dst)[H][RT], int kt0) {
#pragma unroll
    for (int h = 0; h < H; ++h)
#pragma unroll
      for (int r = 0; r < RT; ++r)
        if (kt0 + h < k_end && live[r]) dst[h][r] = load_weight_fragment(wtile[r] + (kt0 + h) * kt_step, policy);
  };
  float acc[RT][MT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][mt][i] = 0.0f;
  // k-tiles kt0 .. kt0 + H - 1 in order, their activations at column (kt - window0) * 16 of the window.
  auto multiply_half = [&](const uint4 (&src)[H][RT], int kt0, int window0) {
#pragma unroll
    for (int h = 0; h < H; ++h) {
      if (kt0 + h >= k_end) break;
      uint32_t bf[MT][2];
      activation_fragments<T, MT>(bf, xs, xs_stride, kt0 + h - window0, g, t, m);
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        if (!live[r]) continue;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          mma_m16n8k16<T>(acc[r][mt], src[h][r].x, src[h][r].y, src[h][r].z, src[h][r].w, bf[mt][0], bf[mt][1]);
      }
    }
  };

  // Weights depend on no earlier kernel: the first two halves go out before the wait.
  load_half(wa, k_begin);
  load_half(wb, k_begin + H);
  typename Epilogue::template Operands<MT> operands[RT] = {};
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int j = warp * RT + r;
    if (j % k_split == rank && j < tiles_here) operands[r] = epilogue.template prepare<T, MT>(tile0 + j, g, t, m);
  }
  wait_for_previous_grid();
  if (threadIdx.x == 0) trace_released(trace);
  norm_rstd(rstd, norm, m, warp, WARPS, lane);
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int j = warp * RT + r;
    if (j % k_split == rank && j < tiles_here) epilogue.template load<T, MT>(operands[r], tile0 + j, g, t, m);
  }
  for (int w0 = k_begin; w0 < k_end; w0 += Pipe::kWindowKTiles) {
    const int w1 = min(k_end, w0 + Pipe::kWindowKTiles);
    if (w0 != k_begin) __syncthreads();  // every warp is done with the previous window
    stage_activation_columns<T>(xs, xs_stride, x, x_stride, x_vec16, m, cols, int64_t{w0} * 16, (w1 - w0) * 16,
                                threadIdx.x, WARPS * 32);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    if (w0 == k_begin && threadIdx.x == 0) trace_mark(trace, 0);  // the first activations have landed
    for (int kt = w0; kt < w1; kt += 2 * H) {
      multiply_half(wa, kt, w0);
      load_half(wa, kt + 2 * H);
      multiply_half(wb, kt + H, w0);
      load_half(wb, kt + 3 * H);
    }
  }
  // The weight stream is consumed: the next kernel may start streaming its own.
  allow_next_grid();

  __syncthreads();  // every warp is done with the activations, whose memory now holds the partial sums
  finish_split_rows<T, MT, RT, WARPS>(acc, operands, reinterpret_cast<float*>(smem), true, k_split, rank, tile0,
                                      tiles_here, rstd, norm, epilogue, m, trace);
}

// Per device: whether the instance's shared-memory limit was raised and whether its code can run
// clusters (an sm_90+ build; a compute_80 PTX JIT has no cluster path).
struct KernelSupport {
  Status status;
  bool clusters = false;
};

inline KernelSupport query_kernel_support(const void* kernel, int smem_bytes) {
  if (smem_bytes > 48 * 1024) {
    Status s = cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
                           "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)", __FILE__, __LINE__);
    if (!s.ok()) return {s, false};
  }
  cudaFuncAttributes attr{};
  if (Status s = cuda_status(cudaFuncGetAttributes(&attr, kernel), "cudaFuncGetAttributes", __FILE__, __LINE__); !s.ok())
    return {s, false};
  int device = 0, cluster_launch = 0;
  if (Status s = cuda_status(cudaGetDevice(&device), "cudaGetDevice", __FILE__, __LINE__); !s.ok()) return {s, false};
  if (cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device) != cudaSuccess) cluster_launch = 0;
  return {Status(), cluster_launch != 0 && attr.ptxVersion >= 90 && attr.binaryVersion >= 90};
}

// Queried once per device and kernel instance, so that launches cost no driver queries.
class KernelSupportCache {
 public:
  KernelSupport get(const void* kernel, int smem_bytes) {
    int device = 0;
    if (Status s = cuda_status(cudaGetDevice(&device), "cudaGetDevice", __FILE__, __LINE__); !s.ok()) return {s, false};
    if (device < 0 || device >= kMaxDevices)
      return {Status::error(str_cat("skinny GEMM: device ", device, " out of range (max ", kMaxDevices, ")")), false};
    std::call_once(once_[device], [&] { support_[device] = query_kernel_support(kernel, smem_bytes); });
    return support_[device];
  }

 private:
  static constexpr int kMaxDevices = 64;
  KernelSupport support_[kMaxDevices];
  std::once_flag once_[kMaxDevices];
};

// SkinnyGemmLaunch::balance_sms: the block scheduler gives each SM as many CTAs as fit, so a grid of
// 3.4 CTAs per SM lands as four on most SMs and fewer on the rest, and the SMs with four set the
// kernel's end (8B gate/up: 54.7 against 51.0 us, docs/kernels/skinny_gemm.md). Padding each CTA's
// shared memory so that at most ceil(grid / SMs) fit spreads the grid evenly; what a CTA computes is
// unchanged. A cluster grid must still fit in one wave (a cluster's CTAs share a GPC, so a cap can
// leave fewer cluster slots than it needs): the cap is raised until it does. Cached per kernel and
// launch shape, so that a launch queries the driver once.
template <class Kernel>
Status balance_smem(cudaLaunchConfig_t& config, Kernel kernel, int k_split) {
  const DeviceLimits l = device_limits();
  if (l.sm_count <= 0 || l.smem_per_sm <= 0 || l.max_smem_per_block <= 0) return Status();
  const int64_t grid = config.gridDim.x;
  const int needed = static_cast<int>(config.dynamicSmemBytes);
  int device = 0;
  FUSELM_CUDA_RETURN(cudaGetDevice(&device));
  using Key = std::tuple<int, const void*, int64_t, int, int>;
  static std::mutex mutex;
  static std::map<Key, int> padded_for;
  const Key key{device, reinterpret_cast<const void*>(kernel), grid, needed, k_split};
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = padded_for.find(key); it != padded_for.end()) {
    config.dynamicSmemBytes = static_cast<size_t>(it->second);
    return Status();
  }
  cudaFuncAttributes attr{};
  FUSELM_CUDA_RETURN(cudaFuncGetAttributes(&attr, kernel));
  const int static_smem = static_cast<int>(attr.sharedSizeBytes);  // the kernel's __shared__ variables
  const int dynamic_limit = l.max_smem_per_block - static_smem;
  int chosen = needed;
  // Ends once the cap admits as many CTAs as fit unpadded.
  for (int64_t cap = (grid + l.sm_count - 1) / l.sm_count;; ++cap) {
    // cap CTAs of static + padded bytes fit on an SM, cap + 1 do not (128-byte allocation unit).
    const int total = (static_cast<int>(l.smem_per_sm / cap) - l.reserved_smem_per_block) / 128 * 128;
    const int padded = std::min(total - static_smem, dynamic_limit);
    if (padded <= needed) break;  // no more than cap fit as it is
    FUSELM_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_limit));
    if (k_split > 1) {
      cudaLaunchConfig_t probe = config;
      probe.dynamicSmemBytes = static_cast<size_t>(padded);
      int clusters = 0;
      FUSELM_CUDA_RETURN(cudaOccupancyMaxActiveClusters(&clusters, kernel, &probe));
      if (static_cast<int64_t>(clusters) * k_split < grid) continue;
    }
    chosen = padded;
    break;
  }
  padded_for.emplace(key, chosen);
  config.dynamicSmemBytes = static_cast<size_t>(chosen);
  return Status();
}

inline Status needs_sm90(const SkinnyGemmVariant& v) {
  return Status::error(str_cat("skinny GEMM: variant ", v.name(), " needs thread-block clusters and bulk copies (an "
                               "sm_90+ GPU and a build with sm_90 code); this device or binary has none. HINT: use "
                               "default_skinny_variant(rows, cols, sm_count, skinny_gemm_clusters_supported())"));
}

template <typename T, int MT, int RT, int WARPS, class Epilogue, int STAGES>
Status launch_warp_pipeline(cudaLaunchConfig_t config, int64_t grid, const uint4* wp, int64_t row_tiles,
                            int64_t k_tiles, int64_t cols, const T* xp, const SkinnyInput& in, bool x_vec16,
                            const SkinnyNorm& norm, const Epilogue& epi, const SkinnyGemmVariant& v,
                            SkinnyGemmLaunch options) {
  using Pipe = SkinnyPipe<T, MT, RT, WARPS, STAGES>;
  auto* kernel = skinny_gemm_kernel<T, MT, RT, WARPS, Epilogue, STAGES>;
  static KernelSupportCache cache;  // one per instance
  const KernelSupport support = cache.get(reinterpret_cast<const void*>(kernel), Pipe::kSmemBytes);
  if (!support.status.ok()) return support.status;
  if (v.k_split > 1 && !support.clusters) return needs_sm90(v);
  // Without sm_90 code the kernel has no griddepcontrol and must not overlap its predecessor.
  LaunchAttributes attrs(v.k_split, options.pdl && support.clusters);
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(WARPS * 32);
  config.dynamicSmemBytes = Pipe::kSmemBytes;
  config.attrs = attrs.attrs;
  config.numAttrs = attrs.count;
  if (options.balance_sms)
    if (Status s = balance_smem(config, kernel, v.k_split); !s.ok()) return s;
  FUSELM_CUDA_RETURN(cudaLaunchKernelEx(&config, kernel, wp, row_tiles, k_tiles, cols, xp, in.stride, x_vec16, in.m,
                                        v.k_split, norm, epi, options.trace));
  return Status();
}

// The CTA and register pipelines read weights packed row tile by row tile or in tile groups of the
// row tiles a CTA owns.
inline Status check_tile_group(const PackedWeight& w, const SkinnyGemmVariant& v, int cta_tiles) {
  if (w.tile_group == 1 || w.tile_group == cta_tiles) return Status();
  return Status::error(str_cat("skinny GEMM: ", v.name(), " reads weights packed in tile groups of 1 or ", cta_tiles,
                               " (its row tiles per CTA), not ", w.tile_group));
}

// Whether every activation row starts 16-byte aligned (stage_activation_columns then copies 16 bytes
// at a time, else 4).
inline bool activations_take_16_byte_copies(const SkinnyInput& in) {
  return reinterpret_cast<uintptr_t>(in.x) % 16 == 0 && in.stride % 8 == 0;
}

template <typename T, int MT, int RT, int WARPS, class Epilogue>
Status launch_register_pipeline(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                                const Epilogue& epi, const SkinnyGemmVariant& v, SkinnyGemmLaunch options,
                                cudaStream_t stream) {
  using Pipe = RegPipe<T, MT, RT, WARPS>;
  const int64_t row_tiles = mma_tiles(w.rows), k_tiles = mma_tiles(w.cols);
  if (Status s = check_tile_group(w, v, Pipe::kTiles); !s.ok()) return s;
  // The kernel counts k-tiles, and offsets within a tile group's K range, in 32 bits.
  if (k_tiles * 32 * w.tile_group > INT32_MAX)
    return Status::error(str_cat("skinny GEMM: K=", w.cols, " too long for the register pipeline (", v.name(), ")"));
  auto* kernel = skinny_gemm_reg_kernel<T, MT, RT, WARPS, Epilogue>;
  static KernelSupportCache cache;  // one per instance
  const KernelSupport support = cache.get(reinterpret_cast<const void*>(kernel), Pipe::max_smem_bytes());
  if (!support.status.ok()) return support.status;
  if (v.k_split > 1 && !support.clusters) return needs_sm90(v);
  // Without sm_90 code the kernel has no griddepcontrol and must not overlap its predecessor.
  LaunchAttributes attrs(v.k_split, options.pdl && support.clusters);
  cudaLaunchConfig_t config{};
  config.stream = stream;
  config.gridDim = dim3(static_cast<unsigned>((row_tiles + Pipe::kTiles - 1) / Pipe::kTiles * v.k_split));
  config.blockDim = dim3(WARPS * 32);
  config.dynamicSmemBytes = Pipe::smem_bytes(in.m, k_tiles_per_rank(k_tiles, v.k_split));
  config.attrs = attrs.attrs;
  config.numAttrs = attrs.count;
  if (options.balance_sms)
    if (Status s = balance_smem(config, kernel, v.k_split); !s.ok()) return s;
  const bool x_vec16 = activations_take_16_byte_copies(in);
  FUSELM_CUDA_RETURN(cudaLaunchKernelEx(&config, kernel, static_cast<const uint4*>(w.data), row_tiles, k_tiles, w.cols,
                                        static_cast<const T*>(in.x), in.stride, x_vec16, in.m, v.k_split, norm, epi,
                                        options.trace, w.tile_group));
  return Status();
}

// The warp pipeline's launch for a shape: the shallow ring, or the deep one where the grid is small.
template <typename T, int MT, int RT, int WARPS, class Epilogue>
Status launch_warp_shape(cudaLaunchConfig_t config, const PackedWeight& w, const SkinnyInput& in,
                         const SkinnyNorm& norm, const Epilogue& epi, const SkinnyGemmVariant& v,
                         SkinnyGemmLaunch options) {
  const int64_t row_tiles = mma_tiles(w.rows), k_tiles = mma_tiles(w.cols);
  const bool x_vec16 = activations_take_16_byte_copies(in);
  const auto* wp = static_cast<const uint4*>(w.data);
  const auto* xp = static_cast<const T*>(in.x);
  if (w.tile_group != 1)
    return Status::error(str_cat("skinny GEMM: ", v.name(), " reads weights packed row tile by row tile (tile "
                                 "group 1), not in tile groups of ", w.tile_group,
                                 "; the warp pipeline reads no tile groups (the CTA and register pipelines do)"));
  using Shallow = SkinnyPipe<T, MT, RT, WARPS>;
  const int64_t grid = (row_tiles + RT - 1) / RT * v.k_split;
  // A grid of at most one 8-warp CTA per SM (up to 8 tokens) leaves an SM's shared memory half used
  // at four stages, and a long K loop then waits on latency with 48 KB in flight per SM: give it
  // twice the stages (1B down projection: K loop 11.4 -> 7.9 us). Not for a short K loop, which the
  // prologue already covers, since a deep CTA keeps the next kernel's CTAs off its SM until it exits.
  // The stage count changes no result (each warp adds its k-tiles in the same order).
  if constexpr (MT == 1 && RT == 1 && WARPS == 8) {
    const int64_t warp_k_tiles = k_tiles_per_warp(k_tiles, v.k_split, WARPS);
    const int64_t warp_stages = (warp_k_tiles + Shallow::kStageKTiles - 1) / Shallow::kStageKTiles;
    using Deep = SkinnyPipe<T, MT, RT, WARPS, 2 * Shallow::kStages>;
    const DeviceLimits limits = device_limits();
    if (grid <= limits.sm_count && Deep::kSmemBytes <= limits.max_smem_per_block &&
        warp_stages > 2 * Shallow::kStages)
      return launch_warp_pipeline<T, MT, RT, WARPS, Epilogue, Deep::kStages>(
          config, grid, wp, row_tiles, k_tiles, w.cols, xp, in, x_vec16, norm, epi, v, options);
    // A grid of one to two such CTAs an SM stacks two on most SMs, at 102 KB each with four stages:
    // no room is left for the next kernel's early CTAs (a 51 KB decode attention CTA after the 1B
    // QKV projection), which then start only as these leave. Three stages (77 KB) leave room for
    // one, and a third of these CTAs still does not fit. Only where the prologue covers the whole K
    // loop (at most four stages a warp). 1B batch 1 +1.5% (bench/results/dev/ab/s33/).
    if (grid > limits.sm_count && grid <= 2 * limits.sm_count && warp_stages <= Shallow::kStages)
      return launch_warp_pipeline<T, MT, RT, WARPS, Epilogue, Shallow::kStages - 1>(
          config, grid, wp, row_tiles, k_tiles, w.cols, xp, in, x_vec16, norm, epi, v, options);
  }
  return launch_warp_pipeline<T, MT, RT, WARPS, Epilogue, Shallow::kStages>(
      config, grid, wp, row_tiles, k_tiles, w.cols, xp, in, x_vec16, norm, epi, v, options);
}

template <typename T, int MT, int RT, int WARPS, class Epilogue>
Status launch_shape(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm, const Epilogue& epi,
                    const SkinnyGemmVariant& v, SkinnyGemmLaunch options, cudaStream_t stream) {
  const int64_t row_tiles = mma_tiles(w.rows), k_tiles = mma_tiles(w.cols);
  const bool x_vec16 = activations_take_16_byte_copies(in);
  const auto* wp = static_cast<const uint4*>(w.data);
  const auto* xp = static_cast<const T*>(in.x);
  cudaLaunchConfig_t config{};
  config.stream = stream;
  if (v.pipeline == SkinnyPipeline::kCtaSplitRows) {
    using Pipe = CtaPipe<T, MT, RT, WARPS>;
    if (Status s = check_tile_group(w, v, Pipe::kTiles); !s.ok()) return s;
    auto* kernel = skinny_gemm_cta_kernel<T, MT, RT, WARPS, Epilogue>;
    static KernelSupportCache cache;  // one per instance
    const KernelSupport support = cache.get(reinterpret_cast<const void*>(kernel), Pipe::smem_bytes(MT * 8));
    if (!support.status.ok()) return support.status;
    if (!support.clusters) return needs_sm90(v);
    LaunchAttributes attrs(v.k_split, options.pdl);
    config.gridDim = dim3(static_cast<unsigned>((row_tiles + Pipe::kTiles - 1) / Pipe::kTiles * v.k_split));
    config.blockDim = dim3((WARPS + 1) * 32);
    config.dynamicSmemBytes = Pipe::smem_bytes(in.m);
    config.attrs = attrs.attrs;
    config.numAttrs = attrs.count;
    if (options.balance_sms)
      if (Status s = balance_smem(config, kernel, v.k_split); !s.ok()) return s;
    FUSELM_CUDA_RETURN(cudaLaunchKernelEx(&config, kernel, wp, row_tiles, k_tiles, w.cols, xp, in.stride, x_vec16, in.m,
                                          v.k_split, norm, epi, options.trace, w.tile_group));
    return Status();
  }
  if constexpr (WARPS == 7) {
    return Status::error(str_cat("unsupported skinny GEMM variant ", v.name(), ": 7 warps is a CTA-pipeline shape"));
  } else {
    return launch_warp_shape<T, MT, RT, WARPS>(config, w, in, norm, epi, v, options);
  }
}

// The one dispatch point for the variant's compile-time shape (row tiles x warps).
template <typename T, int MT, class Epilogue>
Status launch_variant(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm, const Epilogue& epi,
                      const SkinnyGemmVariant& v, SkinnyGemmLaunch options, cudaStream_t stream) {
  if (v.k_split < 1 || v.k_split > 8)
    return Status::error(str_cat("unsupported skinny GEMM variant ", v.name(), ": k_split=", v.k_split,
                                 " (supported: 1..8, the portable cluster size)"));
  if (v.pipeline == SkinnyPipeline::kRegisters) {
    switch (v.row_tiles * 100 + v.warps) {
      case 104: return launch_register_pipeline<T, MT, 1, 4>(w, in, norm, epi, v, options, stream);
      case 108: return launch_register_pipeline<T, MT, 1, 8>(w, in, norm, epi, v, options, stream);
      default:
        return Status::error(str_cat("unsupported skinny GEMM variant ", v.name(),
                                     " (register pipeline: row_tiles x warps in 1x4, 1x8; k_split 1..8)"));
    }
  }
  // launch_shape serves the warp and CTA pipelines; the CTA pipeline has no 4 x 8 shape.
  const bool cta = v.pipeline == SkinnyPipeline::kCtaSplitRows;
  switch (v.row_tiles * 100 + v.warps) {
    case 104: return launch_shape<T, MT, 1, 4>(w, in, norm, epi, v, options, stream);
    case 107:
      if (cta) return launch_shape<T, MT, 1, 7>(w, in, norm, epi, v, options, stream);
      break;
    case 108: return launch_shape<T, MT, 1, 8>(w, in, norm, epi, v, options, stream);
    case 204: return launch_shape<T, MT, 2, 4>(w, in, norm, epi, v, options, stream);
    case 208: return launch_shape<T, MT, 2, 8>(w, in, norm, epi, v, options, stream);
    case 404: return launch_shape<T, MT, 4, 4>(w, in, norm, epi, v, options, stream);
    case 408:
      if (!cta) return launch_shape<T, MT, 4, 8>(w, in, norm, epi, v, options, stream);
      break;
    default: break;
  }
  return Status::error(str_cat("unsupported skinny GEMM variant ", v.name(),
                               cta ? " (CTA pipeline: row_tiles x warps in 1x4, 1x7, 1x8, 2x4, 2x8, 4x4; k_split 1..8)"
                                   : " (supported: row_tiles 1, 2, 4 x warps 4, 8, any k_split 1..8)"));
}

// The one dispatch point for dtype and token-tile count.
template <class Epilogue>
Status launch(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm, const Epilogue& epi,
              const SkinnyGemmVariant& variant, SkinnyGemmLaunch options, cudaStream_t stream) {
  if (in.m < 1 || in.m > kSkinnyGemmMaxTokens)
    return Status::error(str_cat("skinny GEMM: m=", in.m, " tokens (supported: 1..", kSkinnyGemmMaxTokens, ")"));
  if (w.cols % 2 != 0) return Status::error(str_cat("skinny GEMM: K=", w.cols, " must be even"));
  if (w.data == nullptr || in.x == nullptr) return Status::error("skinny GEMM: null weight or input pointer");
  if (in.stride < w.cols || in.stride % 2 != 0)
    return Status::error(str_cat("skinny GEMM: input stride ", in.stride, " must be even and >= K=", w.cols));
  if (reinterpret_cast<uintptr_t>(w.data) % 16 != 0 || reinterpret_cast<uintptr_t>(in.x) % 4 != 0)
    return Status::error("skinny GEMM: weights must be 16-byte and inputs 4-byte aligned");
  if (norm.partials != nullptr && norm.dim <= 0) return Status::error("skinny GEMM: norm dim must be positive");
  const bool two_tiles = in.m > 8;
  // The twin is a warp-pipeline variant, which reads no tile groups.
  const bool twin = in.m == 1 && options.single_token_twin && w.tile_group == 1;
  const SkinnyGemmVariant v = twin ? single_token_twin(variant) : variant;
  switch (w.dtype) {
    case DType::BF16:
      return two_tiles ? launch_variant<__nv_bfloat16, 2>(w, in, norm, epi, v, options, stream)
                       : launch_variant<__nv_bfloat16, 1>(w, in, norm, epi, v, options, stream);
    case DType::F16:
      return two_tiles ? launch_variant<__half, 2>(w, in, norm, epi, v, options, stream)
                       : launch_variant<__half, 1>(w, in, norm, epi, v, options, stream);
    default:
      return Status::error(str_cat("skinny GEMM: unsupported weight dtype=", dtype_name(w.dtype), " (supported: bf16, f16)"));
  }
}

}  // namespace skinny_detail
}  // namespace fuselm
