#pragma once
// The O projection inside decode attention's launch (attention.h, DecodeOFold): the CTAs past the
// attention clusters take one slice of the projection's rows each, in clusters of 8 whose rank p
// multiplies piece p of K (head group p's columns). A CTA loads its weights into shared memory
// before the wait for the QKV projection, then waits only for its head group's output, so the
// multiply, the ranks' sum and the residual epilogue follow attention's merge within one launch
// instead of the O kernel's release, first loads and tail after attention has ended.
//
// The same bits as the k8 skinny GEMM variants: each piece is one chain of m16n8k16 mmas over its
// k-tiles in order from zero (a warp of rt1_w8, a CTA of rt1_w4_k8_cta), the pieces are added in
// order 0..7 (sum_cluster_partials), and the residual epilogue is the GEMM's own.
#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/skinny_gemm_kernels.cuh"

namespace fuselm::attention_detail {

// What the fold's CTAs need, fixed per launch.
struct DecodeOFoldArgs {
  const uint4* w = nullptr;  // packed O weights, 32 lanes x 16 bytes per (row tile, k-tile)
  const void* x = nullptr;   // attention's output for the one sequence: [heads * head_dim]
  SkinnyResidualOut out;
  int64_t rows = 0, row_tiles = 0, k_tiles = 0;
  int piece_tiles = 0;  // k-tiles of one head group's piece
  int slice_tiles = 0;  // row tiles of one cluster's slice (a power of two, at most 8)
  int64_t attention_units = 0;  // clusters that attend (the first of the grid); the rest fold O
  int* ready = nullptr;         // [flag per head group][CTAs that saw it per head group]
  int o_clusters = 0;
};

// Shared memory of a fold CTA: the slice's weights of its piece, the piece's activations (one
// token), and the partial sums its cluster peers read.
__host__ __device__ inline int64_t decode_o_fold_smem(int slice_tiles, int piece_tiles) {
  return static_cast<int64_t>(slice_tiles) * piece_tiles * 512 + piece_tiles * 32 + slice_tiles * 4 * 32 * 4;
}

// One fold CTA: slice `slice` of the rows, piece `piece` (its cluster rank) of K. THREADS threads.
// Its timeline marks share the launch's slot with attention's: 3 when its group's output is there, 4
// after its cluster's partials are in (later than attention's marks 3-4, so the slot shows these).
template <class T, int THREADS>
__device__ __forceinline__ void decode_o_fold_cta(const DecodeOFoldArgs& fold, uint8_t* smem, int slice, int piece,
                                                  KernelTrace* trace) {
  using namespace skinny_detail;
  constexpr int kWarps = THREADS / 32;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int64_t tile0 = static_cast<int64_t>(slice) * fold.slice_tiles;
  const int tiles = static_cast<int>(fold.row_tiles - tile0 < fold.slice_tiles ? fold.row_tiles - tile0 : fold.slice_tiles);
  uint4* wsm = reinterpret_cast<uint4*>(smem);  // [slice tile][piece k-tile][lane]
  T* xs = reinterpret_cast<T*>(smem + static_cast<int64_t>(fold.slice_tiles) * fold.piece_tiles * 512);
  float* part = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(xs) + fold.piece_tiles * 32);  // [tile][4][32]

  // The weights never change within a step: issued before the wait, as the GEMMs' first stages.
  const uint64_t policy = l2_evict_first_policy();
  const int per_tile = fold.piece_tiles * 32;
  for (int idx = tid; idx < tiles * per_tile; idx += THREADS) {
    const int r = idx / per_tile, kt = (idx / 32) % fold.piece_tiles, l = idx % 32;
    const int64_t tile = mma_tile_index(tile0 + r, static_cast<int64_t>(piece) * fold.piece_tiles + kt, fold.k_tiles, 1);
    cp_async_16_evict_first(shared_address(wsm + idx), fold.w + tile * 32 + l, policy);
  }
  cp_async_commit();
  wait_for_previous_grid();
  if (tid == 0) trace_released(trace);

  // Rank p finishes row tile p of the slice: its residual and gains, read while the group attends.
  const ResidualEpilogue epilogue{fold.out, fold.rows, fold.row_tiles};
  const bool finishes = piece < tiles && warp == 0;
  ResidualEpilogue::Operands<1> operands{};
  if (finishes) {
    operands = epilogue.template prepare<T, 1>(tile0 + piece, g, t, 1);
    epilogue.template load<T, 1>(operands, tile0 + piece, g, t, 1);
  }

  // The group's output: wait for its flag; the CTA that counts itself in last leaves the flag and
  // the count at zero for the next launch (every CTA of this one has seen the flag by then).
  if (tid == 0) {
    int* flag = fold.ready + piece;
    while (device::load_acquire_gpu(flag) == 0) __nanosleep(20);
    int* seen = fold.ready + kDecodeOFoldGroups + piece;
    if (atomicAdd(seen, 1) == fold.o_clusters - 1) {
      atomicExch(seen, 0);
      atomicExch(flag, 0);
    }
    trace_mark(trace, 3);  // the head group's output is there
  }
  // The next kernel may launch once every fold CTA has its group's output: launched at the start,
  // its first weight stages competed with attention's loads (docs/kernels/attention.md).
  allow_next_grid();
  __syncthreads();
  // One token's columns of the piece, from L2 (written by other SMs during this launch).
  const uint4* x = reinterpret_cast<const uint4*>(static_cast<const T*>(fold.x) + piece * fold.piece_tiles * 16);
  for (int i = tid; i < fold.piece_tiles * 2; i += THREADS) reinterpret_cast<uint4*>(xs)[i] = __ldcg(x + i);
  cp_async_wait<0>();
  __syncthreads();

  // Each row tile's piece: one chain of mmas over the piece's k-tiles in order, from zero.
  for (int r = warp; r < fold.slice_tiles; r += kWarps) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (r < tiles) {
      const uint4* a_tile = wsm + static_cast<int64_t>(r) * per_tile + lane;
      for (int kt = 0; kt < fold.piece_tiles; ++kt) {
        uint32_t b[1][2];
        activation_fragments<T, 1>(b, xs, 0, kt, g, t, 1);
        const uint4 a = a_tile[kt * 32];
        mma_m16n8k16<T>(acc, a.x, a.y, a.z, a.w, b[0][0], b[0][1]);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) part[(r * 4 + i) * 32 + lane] = acc[i];
  }
  cluster_barrier();  // every rank's pieces are in its shared memory
  if (tid == 0) trace_mark(trace, 4);
  if (finishes) {
    float c[1][4];
    sum_cluster_partials<1>(c, part, piece, kDecodeOFoldGroups, lane);
    epilogue.template apply<T, 1>(tile0 + piece, g, t, c, 1, operands);
  }
  cluster_barrier_relaxed();  // no rank leaves while a peer may still read its partials
}

}  // namespace fuselm::attention_detail
