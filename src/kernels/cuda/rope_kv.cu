#include "kernels/cuda/rope_kv.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"

namespace fuselm {
namespace {

using namespace device;

// Rotates `width` consecutive pairs starting at pair i0 of one head: src[i], src[i + half] -> dst.
template <class T, int kWidth>
__device__ __forceinline__ void rotate_pairs(const T* src, T* dst, int half, int i0, int position,
                                             const float* inv_freq) {
  float a[kWidth], b[kWidth];
  if constexpr (kWidth == kVec) {
    load8(src + i0, a);
    load8(src + i0 + half, b);
  } else {
    a[0] = to_float(src[i0]);
    b[0] = to_float(src[i0 + half]);
  }
#pragma unroll
  for (int j = 0; j < kWidth; ++j) {
    // The angle is rounded to fp32 before sin/cos, exactly as the CPU reference does.
    const float angle = static_cast<float>(position) * inv_freq[i0 + j];
    float s, c;
    sincosf(angle, &s, &c);
    const float x = a[j], y = b[j];
    a[j] = x * c - y * s;
    b[j] = y * c + x * s;
  }
  if constexpr (kWidth == kVec) {
    store8(dst + i0, a);
    store8(dst + i0 + half, b);
  } else {
    dst[i0] = from_float<T>(a[0]);
    dst[i0 + half] = from_float<T>(b[0]);
  }
}

// One block per token. Work items: q pair groups, then k pair groups, then v element groups,
// each group kWidth wide (8 with 16-byte accesses when head_dim allows, else 1).
template <class T, int kWidth>
__global__ void rope_kv_kernel(const T* __restrict__ qkv, T* __restrict__ q_out, RopeKvShape shape,
                               const int32_t* __restrict__ positions, const int32_t* __restrict__ token_batch,
                               const float* __restrict__ inv_freq, T* __restrict__ k_pool, T* __restrict__ v_pool,
                               PagedKvLayout layout, const int32_t* __restrict__ block_tables,
                               int max_blocks_per_seq) {
  const int64_t t = blockIdx.x;
  const int hd = shape.head_dim, half = hd / 2;
  const int q_dim = shape.n_heads * hd, kv_dim = shape.n_kv_heads * hd;
  const T* row = qkv + t * (q_dim + 2 * kv_dim);
  const int position = positions[t];
  const int32_t block =
      block_tables[static_cast<int64_t>(token_batch[t]) * max_blocks_per_seq + position / layout.block_size];
  const int slot = position % layout.block_size;

  const int pair_groups = half / kWidth, v_groups = hd / kWidth;
  const int q_items = shape.n_heads * pair_groups, k_items = shape.n_kv_heads * pair_groups;
  const int total = q_items + k_items + shape.n_kv_heads * v_groups;
  for (int item = threadIdx.x; item < total; item += blockDim.x) {
    if (item < q_items) {
      const int h = item / pair_groups, i0 = (item % pair_groups) * kWidth;
      rotate_pairs<T, kWidth>(row + h * hd, q_out + t * q_dim + h * hd, half, i0, position, inv_freq);
    } else if (item < q_items + k_items) {
      const int k_item = item - q_items;
      const int h = k_item / pair_groups, i0 = (k_item % pair_groups) * kWidth;
      rotate_pairs<T, kWidth>(row + q_dim + h * hd, k_pool + layout.offset(block, h, slot), half, i0, position,
                              inv_freq);
    } else {
      const int v_item = item - q_items - k_items;
      const int h = v_item / v_groups, c = (v_item % v_groups) * kWidth;
      const T* src = row + q_dim + kv_dim + h * hd + c;
      T* dst = v_pool + layout.offset(block, h, slot) + c;
      if constexpr (kWidth == kVec) {
        *reinterpret_cast<Packed128<T>*>(dst) = *reinterpret_cast<const Packed128<T>*>(src);
      } else {
        *dst = *src;
      }
    }
  }
}

}  // namespace

Status rope_kv(const void* qkv, void* q_out, DType dtype, const RopeKvShape& shape, int64_t n_tokens,
               const int32_t* positions, const int32_t* token_batch, const float* inv_freq, const PagedKvView& kv,
               cudaStream_t stream) {
  if (n_tokens == 0) return Status();
  if (n_tokens < 0 || n_tokens > 0x7fffffff)
    return Status::error(str_cat("rope_kv: n_tokens=", n_tokens, " out of range"));
  if (shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.head_dim <= 0 || shape.head_dim % 2 != 0)
    return Status::error(str_cat("rope_kv: bad shape n_heads=", shape.n_heads, " n_kv_heads=", shape.n_kv_heads,
                                 " head_dim=", shape.head_dim, " (head_dim must be even)"));
  if (kv.layout.n_kv_heads != shape.n_kv_heads || kv.layout.head_dim != shape.head_dim)
    return Status::error(str_cat("rope_kv: KV layout (n_kv_heads=", kv.layout.n_kv_heads, ", head_dim=",
                                 kv.layout.head_dim, ") does not match the shape (n_kv_heads=", shape.n_kv_heads,
                                 ", head_dim=", shape.head_dim, ")"));
  if (kv.layout.block_size <= 0 || kv.max_blocks_per_seq <= 0)
    return Status::error(str_cat("rope_kv: bad cache geometry block_size=", kv.layout.block_size,
                                 " max_blocks_per_seq=", kv.max_blocks_per_seq));
  if (!qkv || !q_out || !positions || !token_batch || !inv_freq || !kv.k || !kv.v || !kv.block_tables)
    return Status::error("rope_kv: every buffer must be set");
  // 8 consecutive pairs per access: a head's halves and every row must start on 16 bytes.
  const bool vectorized = (shape.head_dim / 2) % kVec == 0 && aligned16(qkv) && aligned16(q_out) &&
                          aligned16(kv.k) && aligned16(kv.v);
  return dispatch_half_dtype(dtype, "rope_kv", [&](auto tag) -> Status {
    using T = decltype(tag);
    const int threads = 128;
    const auto* in = static_cast<const T*>(qkv);
    auto* q = static_cast<T*>(q_out);
    auto* k_pool = static_cast<T*>(kv.k);
    auto* v_pool = static_cast<T*>(kv.v);
    const auto grid = static_cast<unsigned>(n_tokens);
    if (vectorized)
      rope_kv_kernel<T, kVec><<<grid, threads, 0, stream>>>(in, q, shape, positions, token_batch, inv_freq, k_pool,
                                                            v_pool, kv.layout, kv.block_tables, kv.max_blocks_per_seq);
    else
      rope_kv_kernel<T, 1><<<grid, threads, 0, stream>>>(in, q, shape, positions, token_batch, inv_freq, k_pool,
                                                         v_pool, kv.layout, kv.block_tables, kv.max_blocks_per_seq);
    FUSELM_CUDA_RETURN_LAUNCH();
    return Status();
  });
}

}  // namespace fuselm
