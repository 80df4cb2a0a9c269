#include "kernels/cuda/skinny_gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/mma_packing.h"

namespace fuselm {
namespace {

template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16x8x16<__nv_bfloat16>(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16x8x16<__half>(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

// Weights are read exactly once per step: keep them out of L1 so activations stay there.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <typename T>
__device__ __forceinline__ uint32_t load_pair(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

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

struct StoreEpilogue {
  void* out;
  DType out_dtype;
  int64_t stride;
  int64_t rows;

  template <typename T, int MT>
  __device__ void apply(int64_t nt, int g, int t, const float (&c)[MT][4], int m) const {
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
  }
};

struct ResidualEpilogue {
  SkinnyResidualOut out;
  int64_t rows;
  int64_t row_tiles;

  template <typename T, int MT>
  __device__ void apply(int64_t nt, int g, int t, const float (&c)[MT][4], int m) const {
    const float* norm_w = out.next_norm_weight;
    float sq[MT][2] = {};
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = nt * 16 + frag_row(g, i);
        const int tok = frag_token(mt, t, i);
        if (row >= rows || tok >= m) continue;
        float* r = out.residual + tok * out.residual_stride + row;
        const float v = *r + c[mt][i];
        *r = v;
        if (norm_w != nullptr) {
          static_cast<T*>(out.xg)[tok * out.xg_stride + row] = from_float<T>(v * norm_w[row]);
          sq[mt][i & 1] += v * v;
        }
      }
    }
    if (norm_w == nullptr || out.partials == nullptr) return;
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

struct QkvRopeEpilogue {
  SkinnyQkvOut out;

  template <typename T, int MT>
  __device__ void apply(int64_t nt, int g, int t, const float (&c)[MT][4], int m) const {
    const int tiles_per_head = out.head_dim / 16;
    const int head = static_cast<int>(nt / tiles_per_head);
    const int half = out.head_dim / 2;
    const int dim = static_cast<int>(nt % tiles_per_head) * 8 + g;  // this lane's pair (dim, dim + half)
    const bool is_q = head < out.n_heads;
    const bool is_v = head >= out.n_heads + out.n_kv_heads;
    if (head >= out.n_heads + 2 * out.n_kv_heads) return;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int tok = mt * 8 + 2 * t + e;
        if (tok >= m) continue;
        float lo = c[mt][e], hi = c[mt][2 + e];
        const int pos = out.positions[tok];
        if (!is_v) {
          float s, co;
          sincosf(static_cast<float>(pos) * out.inv_freq[dim], &s, &co);
          const float rlo = lo * co - hi * s;
          const float rhi = hi * co + lo * s;
          lo = rlo;
          hi = rhi;
        }
        T* dst;
        if (is_q) {
          dst = static_cast<T*>(out.q) + tok * out.q_stride + static_cast<int64_t>(head) * out.head_dim;
        } else {
          const int kv_head = (head - out.n_heads) % out.n_kv_heads;
          const PagedKvLayout& layout = out.kv.layout;
          const int32_t block = out.kv.block_tables[static_cast<int64_t>(tok) * out.kv.max_blocks_per_seq +
                                                    pos / layout.block_size];
          dst = static_cast<T*>(is_v ? out.kv.v : out.kv.k) + layout.offset(block, kv_head, pos % layout.block_size);
        }
        dst[dim] = from_float<T>(lo);
        dst[dim + half] = from_float<T>(hi);
      }
    }
  }
};

struct SwigluEpilogue {
  SkinnySwigluOut out;

  template <typename T, int MT>
  __device__ void apply(int64_t nt, int g, int t, const float (&c)[MT][4], int m) const {
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

// One CTA owns RT row tiles (16 rows each); its WARPS warps split K into fixed ranges, each warp
// keeping U x RT 16-byte weight loads in flight, then warp 0 adds the partials in warp order and
// runs the epilogue. MT = 8-token column tiles (1 for m <= 8, 2 for m <= 16).
template <typename T, int MT, int RT, int WARPS, int U, class Epilogue>
__global__ void __launch_bounds__(WARPS * 32)
    skinny_gemm_kernel(const uint4* __restrict__ w, int64_t row_tiles, int64_t k_tiles, int64_t cols,
                       const T* __restrict__ x, int64_t x_stride, int m, SkinnyNorm norm, Epilogue epilogue) {
  __shared__ float partial_acc[WARPS > 1 ? WARPS - 1 : 1][RT][MT][4][32];
  __shared__ float rstd[kSkinnyGemmMaxTokens];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t tile0 = static_cast<int64_t>(blockIdx.x) * RT;

  const int64_t per_warp = (k_tiles + WARPS - 1) / WARPS;
  const int64_t k_begin = warp * per_warp;
  const int64_t k_end = min(k_tiles, k_begin + per_warp);

  float acc[RT][MT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][mt][i] = 0.0f;

  for (int64_t kt = k_begin; kt < k_end; kt += U) {
    uint4 a[U][RT];
    uint32_t b[U][MT][2];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool in_range = kt + u < k_end;
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        const int64_t nt = tile0 + r;
        a[u][r] = (in_range && nt < row_tiles) ? load_streaming(w + ((nt * k_tiles + kt + u) * 32 + lane))
                                               : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int tok = mt * 8 + g;
        const int64_t k = (kt + u) * 16 + 2 * t;
        const T* row = x + tok * x_stride;
        b[u][mt][0] = (in_range && tok < m && k < cols) ? load_pair(row + k) : 0u;
        b[u][mt][1] = (in_range && tok < m && k + 8 < cols) ? load_pair(row + k + 8) : 0u;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) mma_16x8x16<T>(acc[r][mt], a[u][r], b[u][mt][0], b[u][mt][1]);
  }

  if (warp > 0) {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) partial_acc[warp - 1][r][mt][i][lane] = acc[r][mt][i];
  }
  // 1/rms per token from the previous kernel's per-tile sums of squares, in a fixed order.
  if (norm.partials != nullptr) {
    for (int tok = warp; tok < m; tok += WARPS) {
      float s = 0.0f;
      for (int p = lane; p < norm.num_partials; p += 32) s += norm.partials[tok * norm.num_partials + p];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0) rstd[tok] = rsqrtf(s / norm.dim + norm.eps);
    }
  }
  __syncthreads();
  if (warp != 0) return;

#pragma unroll
  for (int w2 = 0; w2 < WARPS - 1; ++w2)
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[r][mt][i] += partial_acc[w2][r][mt][i][lane];

  if (norm.partials != nullptr) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int tok = frag_token(mt, t, i);
        const float scale = tok < m ? rstd[tok] : 0.0f;
#pragma unroll
        for (int r = 0; r < RT; ++r) acc[r][mt][i] *= scale;
      }
  }
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    if (tile0 + r < row_tiles) epilogue.template apply<T, MT>(tile0 + r, g, t, acc[r], m);
  }
}

template <typename T, int MT, class Epilogue>
Status launch_variant(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm, const Epilogue& epi,
                      SkinnyGemmVariant v, cudaStream_t stream) {
  const int64_t row_tiles = mma_tiles(w.rows), k_tiles = mma_tiles(w.cols);
  const auto* wp = static_cast<const uint4*>(w.data);
  const auto* x = static_cast<const T*>(in.x);
  auto run = [&](auto kernel, int rt, int warps) {
    const dim3 grid(static_cast<unsigned>((row_tiles + rt - 1) / rt));
    kernel<<<grid, warps * 32, 0, stream>>>(wp, row_tiles, k_tiles, w.cols, x, in.stride, in.m, norm, epi);
  };
  if (v.row_tiles == 1 && v.warps == 4) {
    run(skinny_gemm_kernel<T, MT, 1, 4, 8, Epilogue>, 1, 4);
  } else if (v.row_tiles == 1 && v.warps == 8) {
    run(skinny_gemm_kernel<T, MT, 1, 8, 8, Epilogue>, 1, 8);
  } else if (v.row_tiles == 2 && v.warps == 4) {
    run(skinny_gemm_kernel<T, MT, 2, 4, 4, Epilogue>, 2, 4);
  } else if (v.row_tiles == 2 && v.warps == 8) {
    run(skinny_gemm_kernel<T, MT, 2, 8, 4, Epilogue>, 2, 8);
  } else {
    return Status::error(str_cat("unsupported skinny GEMM variant ", v.name(),
                                 " (supported: rt1_w4, rt1_w8, rt2_w4, rt2_w8)"));
  }
  FUSELM_CUDA_RETURN_LAUNCH();
  return Status();
}

// The one dispatch point for dtype and token-tile count.
template <class Epilogue>
Status launch(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm, const Epilogue& epi,
              SkinnyGemmVariant v, cudaStream_t stream) {
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
  switch (w.dtype) {
    case DType::BF16:
      return two_tiles ? launch_variant<__nv_bfloat16, 2>(w, in, norm, epi, v, stream)
                       : launch_variant<__nv_bfloat16, 1>(w, in, norm, epi, v, stream);
    case DType::F16:
      return two_tiles ? launch_variant<__half, 2>(w, in, norm, epi, v, stream)
                       : launch_variant<__half, 1>(w, in, norm, epi, v, stream);
    default:
      return Status::error(str_cat("skinny GEMM: unsupported weight dtype=", dtype_name(w.dtype), " (supported: bf16, f16)"));
  }
}

}  // namespace

std::string SkinnyGemmVariant::name() const { return str_cat("rt", row_tiles, "_w", warps); }

std::vector<SkinnyGemmVariant> skinny_gemm_variants() { return {{1, 4}, {1, 8}, {2, 4}, {2, 8}}; }

Status skinny_gemm_store(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm, void* out,
                         DType out_dtype, int64_t out_stride, SkinnyGemmVariant variant, cudaStream_t stream) {
  if (out_dtype != DType::F32 && out_dtype != w.dtype)
    return Status::error(str_cat("skinny GEMM: output dtype ", dtype_name(out_dtype), " must be f32 or the weights' ",
                                 dtype_name(w.dtype)));
  if (out == nullptr || out_stride < w.rows) return Status::error("skinny GEMM: bad output buffer or stride");
  return launch(w, in, norm, StoreEpilogue{out, out_dtype, out_stride, w.rows}, variant, stream);
}

Status skinny_gemm_residual(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                            const SkinnyResidualOut& out, SkinnyGemmVariant variant, cudaStream_t stream) {
  if (out.residual == nullptr || out.residual_stride < w.rows)
    return Status::error("skinny GEMM residual: bad residual buffer or stride");
  if (out.next_norm_weight != nullptr && (out.xg == nullptr || out.xg_stride < w.rows))
    return Status::error("skinny GEMM residual: the normed copy needs an xg buffer with stride >= rows");
  return launch(w, in, norm, ResidualEpilogue{out, w.rows, mma_tiles(w.rows)}, variant, stream);
}

Status skinny_gemm_qkv_rope(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                            const SkinnyQkvOut& out, SkinnyGemmVariant variant, cudaStream_t stream) {
  if (out.head_dim % 16 != 0 || out.head_dim <= 0)
    return Status::error(str_cat("fused QKV: unsupported head_dim=", out.head_dim, " (must be a multiple of 16)"));
  if (w.rows != static_cast<int64_t>(out.n_heads + 2 * out.n_kv_heads) * out.head_dim)
    return Status::error(str_cat("fused QKV: packed rows ", w.rows, " != (heads + 2 kv heads) x head_dim"));
  if (out.q == nullptr || out.kv.k == nullptr || out.kv.v == nullptr || out.positions == nullptr ||
      out.inv_freq == nullptr || out.kv.block_tables == nullptr)
    return Status::error("fused QKV: null output, cache, position or frequency pointer");
  return launch(w, in, norm, QkvRopeEpilogue{out}, variant, stream);
}

Status skinny_gemm_swiglu(const PackedWeight& w, const SkinnyInput& in, const SkinnyNorm& norm,
                          const SkinnySwigluOut& out, SkinnyGemmVariant variant, cudaStream_t stream) {
  if (w.rows != mma_tiles(2 * static_cast<int64_t>(out.ffn)) * 16 && w.rows != ((out.ffn + 7) / 8) * 16)
    return Status::error(str_cat("fused gate/up: packed rows ", w.rows, " do not match ffn=", out.ffn));
  if (out.act == nullptr || out.act_stride < out.ffn) return Status::error("fused gate/up: bad activation buffer");
  return launch(w, in, norm, SwigluEpilogue{out}, variant, stream);
}

}  // namespace fuselm
