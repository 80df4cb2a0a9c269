// Prefill projections on Hopper's TMA and wgmma (sm_90a): out = x · Wᵀ, and the gate/up projection
// with SwiGLU in its output pass.
//
// A CTA computes a 128-token tile of the output from a tile of W_ROWS weight rows (128 or 256),
// which a 64 x W_ROWS wgmma per consumer warpgroup turns into an accumulator fragment: for the plain
// GEMM, W_ROWS consecutive output features; for SwiGLU, the gate rows n0 .. n0+127 and the up rows
// ffn+n0 .. ffn+n0+127 loaded side by side, so that a thread holds gate and up of the same feature
// (registers j and j + 64) and multiplies them in the epilogue. Three warpgroups: one thread of the
// first issues the TMA loads into a ring of kStages stages (64 of K each, 128-byte swizzle) and
// waits on the consumers' "empty" barriers; the other two take 64 tokens each and run the wgmmas,
// one stage's group in flight while the next is issued. Each output element is one CTA's full-K sum
// in a fixed order, so a token's result does not depend on how many tokens share the call.
#include "kernels/cuda/gemm_sm90.h"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudaTypedefs.h>

#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm_sm90_shapes.h"

namespace fuselm {
namespace {

constexpr int kTileTokens = 128;  // tokens per CTA: two consumer warpgroups of 64
constexpr int kTileK = 64;        // K per stage: 128 bytes per row, the swizzle's width
constexpr int kBoxRows = 128;     // weight rows per TMA box
constexpr int kStages = 4;
constexpr int kThreads = 384;     // warpgroup 0 loads, 1 and 2 compute

enum class Epilogue { Store, Swiglu };

template <int W_ROWS>
struct TileShape {
  static_assert(W_ROWS == 128 || W_ROWS == 256, "weight tiles of 128 or 256 rows");
  static constexpr int kXBytes = kTileTokens * kTileK * 2;  // 16 KB
  static constexpr int kWBytes = W_ROWS * kTileK * 2;       // 16 or 32 KB
  static constexpr int kStageBytes = kXBytes + kWBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + alignment of the ring to 1024
  static constexpr int kAccumulators = W_ROWS / 2;                 // floats per thread: 64 x W_ROWS / 128
  static_assert(kAccumulators * 128 == 64 * W_ROWS, "a warpgroup's 64 x W_ROWS fragment over its 128 threads");
};

template <class T>
struct alignas(4) Pair {  // two adjacent output features, stored at once
  T v[2];
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A wgmma shared-memory descriptor for a K-major tile of 128-byte rows in the 128-byte swizzle
// TMA writes: 8-row groups 1024 bytes apart (the stride byte offset); the leading byte offset is
// not used by swizzled K-major layouts. Advancing the start address by 32 bytes moves 16 elements
// along K inside the swizzle atom.
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t address) {
  return static_cast<uint64_t>((address & 0x3ffff) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int inner, int outer, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(shared_address(bar))
      : "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmmas.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define FUSELM_WGMMA_M64N256K16(TYPE) \
  asm volatile( \
      "{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " " \
      "{" \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define FUSELM_WGMMA_M64N128K16(TYPE) \
  asm volatile( \
      "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " " \
      "{" \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate))

// d (64 x 2N fp32, the warpgroup's accumulator fragment; N floats per thread) += A (64 x 16) *
// B (2N x 16)^T, or = when `accumulate` is 0.
template <class T, int N>
__device__ __forceinline__ void wgmma_k16(float (&d)[N], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (N == 128 && kBf16) {
    FUSELM_WGMMA_M64N256K16("bf16");
  } else if constexpr (N == 128) {
    FUSELM_WGMMA_M64N256K16("f16");
  } else if constexpr (kBf16) {
    FUSELM_WGMMA_M64N128K16("bf16");
  } else {
    FUSELM_WGMMA_M64N128K16("f16");
  }
}
#undef FUSELM_WGMMA_M64N256K16
#undef FUSELM_WGMMA_M64N128K16
#endif

// out: [n_tokens][out_features]; for SwiGLU out_features is ffn and W has 2 * ffn rows.
template <class T, int W_ROWS, Epilogue E>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map, T* out,
                     int n_tokens, int out_features, int k) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tile = TileShape<W_ROWS>;
  static_assert(E == Epilogue::Store || W_ROWS == 256, "SwiGLU pairs 128 gate rows with 128 up rows");
  constexpr int kTileFeatures = E == Epilogue::Swiglu ? W_ROWS / 2 : W_ROWS;
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: the ring starts on such a boundary.
  const uint32_t ring = (shared_address(smem_raw) + 1023) & ~1023u;
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
  const int warpgroup = threadIdx.x / 128;
  constexpr int kGroupTokenTiles = 16;
  // Tiles in groups of up to kGroupTokenTiles token tiles, token tile fastest: the CTAs that run at
  // once share weight tiles (a weight tile is read from DRAM once, then from L2) and, for long
  // prompts, a group's activations (with token tiles fastest over all of them, every weight tile
  // re-read the whole [n_tokens][k] input).
  const int token_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
  const int feature_tiles = out_features / kTileFeatures;
  const int group = blockIdx.x / (kGroupTokenTiles * feature_tiles);
  const int group_first = group * kGroupTokenTiles;
  const int group_size = min(kGroupTokenTiles, token_tiles - group_first);
  const int in_group = blockIdx.x - group * kGroupTokenTiles * feature_tiles;
  const int token0 = (group_first + in_group % group_size) * kTileTokens;
  const int feature0 = in_group / group_size * kTileFeatures;
  const int k_tiles = k / kTileK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2);  // one arrival per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warpgroup == 0) {
    if (threadIdx.x != 0) return;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % kStages;
      if (kt >= kStages) mbar_wait(&empty[s], ((kt / kStages) - 1) & 1);
      const uint32_t stage = ring + s * Tile::kStageBytes;
      // The full boxes count, rows past n_tokens included (TMA fills them with zeros).
      mbar_arrive_expect_tx(&full[s], Tile::kStageBytes);
      tma_load_2d(stage, &x_map, kt * kTileK, token0, &full[s]);
      const uint32_t w_tile = stage + Tile::kXBytes;
      constexpr int kBoxBytes = kBoxRows * kTileK * 2;
      if constexpr (E == Epilogue::Swiglu) {
        tma_load_2d(w_tile, &w_map, kt * kTileK, feature0, &full[s]);                              // gate
        tma_load_2d(w_tile + kBoxBytes, &w_map, kt * kTileK, out_features + feature0, &full[s]);  // up
      } else {
#pragma unroll
        for (int b = 0; b < W_ROWS / kBoxRows; ++b)
          tma_load_2d(w_tile + b * kBoxBytes, &w_map, kt * kTileK, feature0 + b * kBoxRows, &full[s]);
      }
    }
    return;
  }

  // Consumers: warpgroup 1 takes tokens token0 .. +63, warpgroup 2 the next 64.
  const int half = warpgroup - 1;
  float d[Tile::kAccumulators];
#pragma unroll
  for (int i = 0; i < Tile::kAccumulators; ++i) d[i] = 0.0f;
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % kStages;
    mbar_wait(&full[s], (kt / kStages) & 1);
    const uint32_t stage = ring + s * Tile::kStageBytes;
    const uint32_t a = stage + half * (Tile::kXBytes / 2);
    const uint32_t b = stage + Tile::kXBytes;
    wgmma_fence();
    fence_accumulators(d);
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk)
      wgmma_k16<T>(d, smem_descriptor(a + kk * 32), smem_descriptor(b + kk * 32), kt > 0 || kk > 0);
    wgmma_commit();
    fence_accumulators(d);
    // The previous stage's wgmmas are done once at most this stage's group is pending: its slot
    // goes back to the loader.
    wgmma_wait<1>();
    fence_accumulators(d);
    if (kt > 0 && threadIdx.x % 128 == 0) mbar_arrive(&empty[(kt - 1) % kStages]);
  }
  wgmma_wait<0>();
  fence_accumulators(d);

  // Accumulator fragment: register 4j + 2i + e holds row 16 * warp + lane / 4 + 8 * i, column
  // 8j + 2 * (lane % 4) + e of the 64 x W_ROWS result (for SwiGLU: columns 0..127 gate, 128..255 up).
  const int lane = threadIdx.x % 32;
  const int warp = (threadIdx.x / 32) % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int token = token0 + half * 64 + warp * 16 + lane / 4 + 8 * i;
    if (token >= n_tokens) continue;
    T* row = out + static_cast<int64_t>(token) * out_features + feature0 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kTileFeatures / 8; ++j) {
      float v0 = d[4 * j + 2 * i], v1 = d[4 * j + 2 * i + 1];
      if constexpr (E == Epilogue::Swiglu) {
        const float u0 = d[4 * (j + 16) + 2 * i], u1 = d[4 * (j + 16) + 2 * i + 1];
        v0 = v0 / (1.0f + expf(-v0)) * u0;
        v1 = v1 / (1.0f + expf(-v1)) * u1;
      }
      Pair<T> p;
      p.v[0] = device::from_float<T>(v0);
      p.v[1] = device::from_float<T>(v1);
      *reinterpret_cast<Pair<T>*>(row + 8 * j) = p;
    }
  }
#else
  __trap();  // launched only where gemm_sm90_unsupported_reason() found sm_90a code
#endif
}

__global__ void sm90a_probe_kernel(int* has) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *has = 1;
#else
  *has = 0;
#endif
}

// Whether this build's sm_90a code is what runs on the current device (checked once, by running it).
bool sm90a_code_runs() {
  static const bool runs = [] {
    int* flag = nullptr;
    int host = 0;
    const bool ok = cudaMalloc(&flag, sizeof(int)) == cudaSuccess &&
                    (sm90a_probe_kernel<<<1, 1>>>(flag), cudaGetLastError() == cudaSuccess) &&
                    cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    if (flag) cudaFree(flag);
    cudaGetLastError();
    return ok && host == 1;
  }();
  return runs;
}

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    cudaGetLastError();
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A row-major [rows][k] matrix as boxes of 64 elements of K by box_rows rows, 128-byte swizzled.
Status encode_tensor_map(CUtensorMap& map, const void* base, DType dtype, int64_t rows, int64_t k, int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!encode) return Status::error("gemm_sm90: the driver has no cuTensorMapEncodeTiled");
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kTileK), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUtensorMapDataType type =
      dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = encode(&map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::error(str_cat("gemm_sm90: cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(r),
                                 ") for a [", rows, "][", k, "] matrix"));
  return Status();
}

// Shape checks shared by both entry points: `features` output features per CTA tile.
std::string unsupported_reason(int64_t out_features, int64_t k, DType dtype, int features) {
  static_assert(kGemmSm90TileK == kTileK, "gemm_sm90_shapes.h describes this kernel");
  if (dtype != DType::BF16 && dtype != DType::F16) return str_cat("dtype ", dtype_name(dtype), " (bf16 or f16 only)");
  if (out_features <= 0 || out_features % features != 0)
    return str_cat("output features ", out_features, " (a positive multiple of ", features, ")");
  if (k <= 0 || k % kTileK != 0) return str_cat("k=", k, " (a positive multiple of ", kTileK, ")");
  if (!gemm_sm90_shape_ok(out_features, k, features))
    return str_cat("output features ", out_features, ", k=", k, " (too large)");
  if (!sm90a_code_runs()) return "no sm_90a code for this device in this build (Hopper's wgmma and TMA)";
  if (!tensor_map_encoder()) return "the driver has no cuTensorMapEncodeTiled";
  return "";
}

template <int W_ROWS, Epilogue E>
Status launch(const char* what, const void* x, const void* w, void* out, DType dtype, int64_t n_tokens,
              int64_t out_features, int64_t k, cudaStream_t stream) {
  constexpr int kTileFeatures = E == Epilogue::Swiglu ? W_ROWS / 2 : W_ROWS;
  if (n_tokens < 0) return Status::error(str_cat(what, ": n_tokens=", n_tokens, " must be >= 0"));
  if (const std::string why = unsupported_reason(out_features, k, dtype, kTileFeatures); !why.empty())
    return Status::error(str_cat(what, ": unsupported here: ", why));
  if (n_tokens == 0) return Status();
  for (const void* p : {x, w, static_cast<const void*>(out)})
    if (!p || reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return Status::error(str_cat(what, ": x, w and out must be non-null and 16-byte aligned"));
  const int64_t tiles = (n_tokens + kTileTokens - 1) / kTileTokens * (out_features / kTileFeatures);
  if (n_tokens > (int64_t{1} << 30) || tiles >= (int64_t{1} << 31))
    return Status::error(str_cat(what, ": n_tokens=", n_tokens, " is too many"));
  const int64_t w_rows = E == Epilogue::Swiglu ? 2 * out_features : out_features;
  CUtensorMap x_map{}, w_map{};
  if (Status s = encode_tensor_map(x_map, x, dtype, n_tokens, k, kTileTokens); !s.ok()) return s;
  if (Status s = encode_tensor_map(w_map, w, dtype, w_rows, k, kBoxRows); !s.ok()) return s;
  const auto run = [&](auto* kernel, auto* typed_out) -> Status {
    constexpr int kSmem = TileShape<W_ROWS>::kSmemBytes;
    FUSELM_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    kernel<<<static_cast<unsigned>(tiles), kThreads, kSmem, stream>>>(
        x_map, w_map, typed_out, static_cast<int>(n_tokens), static_cast<int>(out_features), static_cast<int>(k));
    FUSELM_CUDA_RETURN(cudaGetLastError());
    return Status();
  };
  if (dtype == DType::BF16)
    return run(gemm_sm90_kernel<__nv_bfloat16, W_ROWS, E>, static_cast<__nv_bfloat16*>(out));
  return run(gemm_sm90_kernel<__half, W_ROWS, E>, static_cast<__half*>(out));
}

}  // namespace

std::string gemm_sm90_unsupported_reason(int64_t n, int64_t k, DType dtype, int tile_features) {
  if (tile_features != 128 && tile_features != 256) return str_cat("tile_features=", tile_features, " (128 or 256)");
  return unsupported_reason(n, k, dtype, tile_features);
}

Status gemm_sm90(const void* x, const void* w, void* out, DType dtype, int64_t n_tokens, int64_t n, int64_t k,
                 int tile_features, cudaStream_t stream) {
  if (tile_features == 128) return launch<128, Epilogue::Store>("gemm_sm90", x, w, out, dtype, n_tokens, n, k, stream);
  if (tile_features == 256) return launch<256, Epilogue::Store>("gemm_sm90", x, w, out, dtype, n_tokens, n, k, stream);
  return Status::error(str_cat("gemm_sm90: tile_features=", tile_features, " (128 or 256)"));
}

std::string gemm_swiglu_sm90_unsupported_reason(int64_t ffn, int64_t k, DType dtype) {
  return unsupported_reason(ffn, k, dtype, 128);
}

Status gemm_swiglu_sm90(const void* x, const void* w, void* out, DType dtype, int64_t n_tokens, int64_t ffn,
                        int64_t k, cudaStream_t stream) {
  return launch<256, Epilogue::Swiglu>("gemm_swiglu_sm90", x, w, out, dtype, n_tokens, ffn, k, stream);
}

}  // namespace fuselm
