// The decode FFN in one persistent launch (skinny_ffn.h): gate/up + SwiGLU, then down + residual.
//
// Each warp streams its own sequence of (row tile, K piece) items through a ring of cp.async stages
// (4 k-tiles of one row tile, 2 KB, 16 bytes a lane), the job list of its CTA in order
// (ffn_schedule.h). The ring runs on across items and jobs: a down item's weights are in flight
// while the warp still multiplies gate/up tiles, and while it waits for the activations they need.
// Activations are staged in shared memory once per launch (the gate/up input, every warp reads it)
// or once per down item (the item's K range of the SwiGLU output, when the gate/up tiles that make
// it have announced themselves through a counter). At the end of a job the warps' sums go to shared
// memory, and the first warp of each row tile adds them in piece order and runs the epilogue of the
// skinny GEMM (skinny_gemm_kernels.cuh), so the bits are that GEMM's.
#include <algorithm>

#include "kernels/cuda/skinny_ffn.h"
#include "kernels/cuda/skinny_gemm_kernels.cuh"

namespace fuselm {
namespace skinny_detail {
namespace {

constexpr int kWarps = kSkinnyFfnWarps;
// Registers capped so that two CTAs fit an SM where the ring is small enough (a plan of two CTAs
// per SM: twice the warps streaming, each SM's requests in flight from two rings).
constexpr int kMinBlocksPerSm = 2;
constexpr int kStageKTiles = 4;                 // k-tiles of one row tile per stage: 2 KB
constexpr int kStageVectors = kStageKTiles * 32;  // 16-byte vectors per stage (one per lane per k-tile)

// One matrix as the warps stream it: packed tiles (mma_packing.h) and its rounding class's K pieces.
struct FfnMatrix {
  const uint4* w = nullptr;
  int64_t row_tiles = 0;
  int64_t k_tiles = 0;
  int group = 1;
  int pieces = 1;
  int64_t piece_k_tiles = 0;
};

struct FfnArgs {
  FfnMatrix gate_up, down;
  const void* x = nullptr;  // gate/up input rows (x * g)
  int64_t x_stride = 0;
  int64_t hidden = 0;       // gate/up K, in elements
  const void* act = nullptr;  // SwiGLU output, the down input (written by this launch)
  int64_t act_stride = 0;
  int64_t ffn = 0;
  int m = 0;
  SkinnyNorm norm;
  SwigluEpilogue swiglu;
  ResidualEpilogue residual;
  const int32_t* offsets = nullptr;
  const int32_t* jobs = nullptr;
  int* counters = nullptr;  // [down pieces]: gate/up tiles done per down piece; [down pieces]: CTAs done
  uint64_t* stamps = nullptr;  // SkinnyFfnPlan::lab_stamps
  int xs_stride = 0;        // elements per staged input row
  int as_stride = 0;        // elements per staged activation row of a down item
  KernelTrace* trace = nullptr;
};

// The item a warp takes in a job: row tile `tile` of the job's matrix, k-tiles [kb, ke).
struct FfnItem {
  // The lane's 16 bytes of k-tile kb of the tile, and the distance to the next k-tile's (in 16-byte
  // vectors): the issue loop then adds instead of dividing by the tile group per k-tile, which cost
  // more issue slots than the stream can spare (a 64-bit division is ~100 instructions).
  const uint4* src = nullptr;
  int64_t kt_stride = 0;
  int pieces = 1;
  bool down = false;
  bool has_tile = false;  // the job's tile of this warp is in the matrix
  int piece = 0;
  int64_t tile = 0;
  int64_t kb = 0, ke = 0;
  int stages = 0;
};

__device__ __forceinline__ FfnItem ffn_item(const FfnArgs& a, int32_t code, int warp) {
  FfnItem it;
  it.down = (code & kFfnDownJob) != 0;
  const FfnMatrix mat = it.down ? a.down : a.gate_up;
  it.pieces = mat.pieces;
  it.piece = warp % mat.pieces;
  it.tile = static_cast<int64_t>(code & ~kFfnDownJob) + warp / mat.pieces;
  it.has_tile = it.tile < mat.row_tiles;
  it.kb = it.piece * mat.piece_k_tiles;
  it.ke = min(mat.k_tiles, it.kb + mat.piece_k_tiles);
  it.stages = it.has_tile && it.ke > it.kb ? static_cast<int>((it.ke - it.kb + kStageKTiles - 1) / kStageKTiles) : 0;
  if (it.stages > 0) {
    it.src = mat.w + mma_tile_index(it.tile, it.kb, mat.k_tiles, mat.group) * 32 + (threadIdx.x % 32);
    it.kt_stride = static_cast<int64_t>(mat.group) * 32;  // a tile group's tiles of one k-tile lie together
  }
  return it;
}

// Lab stamp `event` of this CTA (SkinnyFfnPlan::lab_stamps), from one thread.
__device__ __forceinline__ void stamp(uint64_t* stamps, int event) {
  if (stamps != nullptr) stamps[blockIdx.x * kSkinnyFfnStamps + event] = global_timer_ns();
}

// Columns [k0, k0 + width) of m activation rows into shared rows of `stride` elements, 16 bytes at a
// time from L2 (the rows may have been written by other CTAs of this launch); columns past `cols`
// are zero (the weights' padding is zero, but 0 * garbage could be NaN).
template <typename T>
__device__ __forceinline__ void stage_rows(T* dst, int stride, const T* src, int64_t src_stride, int m, int64_t cols,
                                           int64_t k0, int width, int first, int step) {
  const int chunks = width / 8;
  for (int c = first; c < m * chunks; c += step) {
    const int tok = c / chunks, j = c % chunks;
    const int64_t k = k0 + j * 8;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (k < cols) v = __ldcg(reinterpret_cast<const uint4*>(src + tok * src_stride + k));
    *reinterpret_cast<uint4*>(dst + tok * stride + j * 8) = v;
  }
}

// The warps of one row tile of a job meet here (named barriers: gate/up tiles 1..4, down tiles 5..8,
// so that a warp entering the down phase never meets a barrier still in use for gate/up tiles).
__device__ __forceinline__ void slot_barrier(const FfnItem& it, int warp) {
  if (it.pieces == 1) {
    __syncwarp();
    return;
  }
  const int id = 1 + (it.down ? kWarps / 2 : 0) + warp / it.pieces;
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(it.pieces * 32) : "memory");
}

template <typename T, int STAGES>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocksPerSm) skinny_ffn_kernel(FfnArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ float rstd[kSkinnyFfnMaxTokens];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  if (threadIdx.x == 0) {
    trace_start(a.trace);
    stamp(a.stamps, kFfnStampStart);
  }

  uint4* ring = reinterpret_cast<uint4*>(smem) + warp * STAGES * kStageVectors;
  T* xs = reinterpret_cast<T*>(smem + kWarps * STAGES * kStageVectors * 16);
  T* as = xs + a.m * a.xs_stride + warp * a.m * a.as_stride;  // this warp's down-item activations
  float* red = reinterpret_cast<float*>(xs + a.m * a.xs_stride + kWarps * a.m * a.as_stride);  // [2][warps][4][32]

  const int j0 = a.offsets[blockIdx.x], j1 = a.offsets[blockIdx.x + 1];
  const uint64_t policy = l2_evict_first_policy();

  // The issue cursor: the warp's items in job order, stage by stage, STAGES - 1 stages ahead of use.
  int issue_job = j0 - 1, issue_stage = 0;
  FfnItem issue_item;
  int issued = 0;
  bool all_issued = false;
  auto issue_next = [&]() {
    while (issue_stage >= issue_item.stages && issue_job < j1) {
      if (++issue_job < j1) issue_item = ffn_item(a, a.jobs[issue_job], warp);
      issue_stage = 0;
    }
    if (issue_job < j1) {
      uint4* dst = ring + (issued % STAGES) * kStageVectors;
      const int first = issue_stage * kStageKTiles;
      const int64_t left = issue_item.ke - issue_item.kb - first;
      const int n = left < kStageKTiles ? static_cast<int>(left) : kStageKTiles;
      const uint4* src = issue_item.src + first * issue_item.kt_stride;
#pragma unroll
      for (int u = 0; u < kStageKTiles; ++u)
        if (u < n) cp_async_16_evict_first(dst + u * 32 + lane, src + u * issue_item.kt_stride, policy);
      ++issue_stage;
      ++issued;
    } else if (!all_issued) {
      all_issued = true;
      allow_next_grid();  // every weight this warp reads is on its way
    }
    cp_async_commit();  // one group per call, empty or not: the waits below count groups
  };
#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) issue_next();

  // Everything else comes from the previous kernel (the O projection): its x * g and sums of squares.
  wait_for_previous_grid();
  if (threadIdx.x == 0) trace_released(a.trace);
  stage_rows<T>(xs, a.xs_stride, static_cast<const T*>(a.x), a.x_stride, a.m, a.hidden, 0,
                static_cast<int>(a.gate_up.k_tiles * 16), threadIdx.x, kWarps * 32);
  norm_rstd(rstd, a.norm, a.m, warp, kWarps, lane);
  __syncthreads();
  if (threadIdx.x == 0) stamp(a.stamps, kFfnStampInputsStaged);

  int consumed = 0;
  bool first_stage = true;
  bool gate_up_done = false;
  bool down_seen = false;
#pragma unroll 1
  for (int j = j0; j < j1; ++j) {
    const int32_t code = a.jobs[j];
    const FfnItem it = ffn_item(a, code, warp);
    if (it.down && !gate_up_done) {
      gate_up_done = true;
      if (threadIdx.x == 0) trace_mark(a.trace, 1);  // the CTA's gate/up jobs are done
    }
    const bool finisher = it.piece == 0 && it.has_tile;  // adds the pieces and runs the epilogue
    ResidualEpilogue::Operands<1> res_in{};
    if (it.down && finisher) {
      res_in = a.residual.template prepare<T, 1>(it.tile, g, t, a.m);
      a.residual.template load<T, 1>(res_in, it.tile, g, t, a.m);
    }
    const T* b_rows = xs;
    int b_stride = a.xs_stride;
    int64_t b_first_kt = 0;
    if (it.down && it.stages > 0) {
      // The gate/up tiles that make this piece's activations, then the activations themselves.
      const int64_t want = ffn_tiles_feeding(it.piece, a.down.piece_k_tiles, a.gate_up.row_tiles);
      while (device::load_acquire_gpu(a.counters + it.piece) < want) __nanosleep(32);
      if (lane == 0 && !down_seen) stamp(a.stamps, kFfnStampDownReady + warp);
      down_seen = true;
      stage_rows<T>(as, a.as_stride, static_cast<const T*>(a.act), a.act_stride, a.m, a.ffn, it.kb * 16,
                    static_cast<int>((it.ke - it.kb) * 16), lane, 32);
      __syncwarp();
      b_rows = as;
      b_stride = a.as_stride;
      b_first_kt = it.kb;
    }
    float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 1
    for (int s = 0; s < it.stages; ++s) {
      cp_async_wait<STAGES - 2>();
      if (first_stage) {
        first_stage = false;
        if (threadIdx.x == 0) {
          trace_mark(a.trace, 0);  // the first stage has landed
          stamp(a.stamps, kFfnStampFirstStage);
        }
      }
      const uint4* ws = ring + (consumed % STAGES) * kStageVectors;
#pragma unroll
      for (int u = 0; u < kStageKTiles; ++u) {
        const int64_t kt = it.kb + static_cast<int64_t>(s) * kStageKTiles + u;
        if (kt >= it.ke) break;
        uint32_t b[1][2];
        activation_fragments<T, 1>(b, b_rows + (kt - b_first_kt) * 16, b_stride, 0, g, t, a.m);
        const uint4 w = ws[u * 32 + lane];
        mma_m16n8k16<T>(acc[0], w.x, w.y, w.z, w.w, b[0][0], b[0][1]);
      }
      ++consumed;
      issue_next();  // into the stage used before this one: this lane's own 16 bytes, already read
    }
    // The job's sums: piece 0 + piece 1 + ... in that order, as the skinny GEMM adds warps or ranks.
    float* job_red = red + ((j - j0) & 1) * (kWarps * 4 * 32);
#pragma unroll
    for (int i = 0; i < 4; ++i) job_red[(warp * 4 + i) * 32 + lane] = acc[0][i];
    // Only the warps of one row tile wait for each other: a CTA-wide barrier made every warp wait
    // for the slowest epilogue of the job before (two buffers: a warp rewrites its entry only after
    // the next job's barrier, which its finisher passes after reading it).
    slot_barrier(it, warp);
    if (threadIdx.x == 0 && j - j0 < 16) stamp(a.stamps, kFfnStampJobEnd + (j - j0));
    if (!finisher) continue;
    const int pieces = it.pieces;
    float c[1][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) c[0][i] = job_red[(warp * 4 + i) * 32 + lane];
    for (int q = 1; q < pieces; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i) c[0][i] += job_red[((warp + q) * 4 + i) * 32 + lane];
    if (it.down) {
      a.residual.template apply<T, 1>(it.tile, g, t, c, a.m, res_in);
    } else {
      if (a.norm.partials != nullptr) scale_by_rstd<1>(c, rstd, t, a.m);
      a.swiglu.template apply<T, 1>(it.tile, g, t, c, a.m, NoOperands{});
      // Announce the tile to the down piece it feeds, after every lane's stores (the warp barrier
      // orders them before lane 0's fence). One fence a tile: one a lane stalled the finisher's ring.
      __syncwarp();
      if (lane == 0) {
        __threadfence();
        atomicAdd(a.counters + ffn_down_piece_of(it.tile, a.down.piece_k_tiles), 1);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  if (threadIdx.x == 0) {
    trace_mark(a.trace, 2);  // the CTA's last job is done
    // The last CTA out leaves the counters zero for the next launch: every CTA has read its last
    // counter before it counts itself out.
    int* ctas_done = a.counters + a.down.pieces;
    if (atomicAdd(ctas_done, 1) == static_cast<int>(gridDim.x) - 1) {
      for (int p = 0; p < a.down.pieces; ++p) atomicExch(a.counters + p, 0);
      atomicExch(ctas_done, 0);
    }
    trace_end(a.trace);
    stamp(a.stamps, kFfnStampEnd);
  }
}

// Shared memory of a launch: the rings, the staged input rows, each warp's down activations, and
// the two job reduction buffers.
struct FfnSmem {
  int xs_stride = 0, as_stride = 0;
  size_t bytes_without_ring = 0;
};

FfnSmem ffn_smem(int64_t gate_up_k_tiles, int64_t down_piece_k_tiles, int m) {
  FfnSmem s;
  s.xs_stride = static_cast<int>(gate_up_k_tiles * 16 + 8);  // +8: the B-fragment loads spread over banks
  s.as_stride = static_cast<int>(down_piece_k_tiles * 16 + 8);
  s.bytes_without_ring = (static_cast<size_t>(m) * s.xs_stride + static_cast<size_t>(kWarps) * m * s.as_stride) * 2 +
                         2 * kWarps * 4 * 32 * sizeof(float);
  return s;
}

template <int STAGES>
constexpr size_t ring_bytes() {
  return static_cast<size_t>(kWarps) * STAGES * kStageVectors * 16;
}

template <typename T, int STAGES>
Status launch_ffn(const FfnArgs& args, size_t smem, int ctas, const SkinnyGemmLaunch& options, cudaStream_t stream) {
  auto* kernel = skinny_ffn_kernel<T, STAGES>;
  FUSELM_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  // A down item waits for gate/up tiles of other CTAs: a CTA that is not resident while others
  // wait for it would never run. So every CTA must fit on the GPU at once.
  int per_sm = 0;
  FUSELM_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarps * 32, smem));
  const int sms = device_limits().sm_count;
  if (static_cast<int64_t>(per_sm) * sms < ctas)
    return Status::error(str_cat("one-launch FFN: ", ctas, " CTAs of ", smem, " bytes of shared memory; only ", per_sm,
                                 " fit an SM of ", sms, ", and every CTA must be resident at once"));
  FUSELM_CUDA_RETURN(launch_kernel(kernel, dim3(static_cast<unsigned>(ctas)), dim3(kWarps * 32), smem, stream,
                                   options.pdl, args));
  return Status();
}

}  // namespace
}  // namespace skinny_detail

using namespace skinny_detail;

int skinny_k_pieces(const SkinnyGemmVariant& v) {
  if (v.pipeline != SkinnyPipeline::kWarpSplitK) return v.k_split;
  return v.k_split == 1 ? v.warps : 0;
}

namespace {

// The K cuts the launch runs: 1, 2, 4 or 8 pieces per matrix, one warp each.
bool runs_pieces(int pieces) { return pieces > 0 && kSkinnyFfnWarps % pieces == 0; }

// Whether the two matrices are one FFN's: [2 * ffn][hidden] and [hidden][ffn].
Status check_ffn_matrices(const PackedWeight& gate_up, const PackedWeight& down) {
  if (gate_up.rows % 16 != 0 || gate_up.rows / 2 != down.cols || gate_up.cols != down.rows)
    return Status::error(str_cat("one-launch FFN: gate/up ", gate_up.rows, "x", gate_up.cols, " and down ", down.rows,
                                 "x", down.cols, " are not [2 * ffn][hidden] and [hidden][ffn] with ffn a multiple of 8"));
  return Status();
}

}  // namespace

Status skinny_ffn_schedule_shape(const PackedWeight& gate_up, const PackedWeight& down,
                                 const SkinnyGemmVariant& gate_up_variant, const SkinnyGemmVariant& down_variant,
                                 int ctas, FfnScheduleShape* shape) {
  const int gp = skinny_k_pieces(gate_up_variant), dp = skinny_k_pieces(down_variant);
  if (!runs_pieces(gp) || !runs_pieces(dp))
    return Status::error(str_cat("one-launch FFN: the rounding classes of ", gate_up_variant.name(), " and ",
                                 down_variant.name(), " cut K into ", gp, " and ", dp, " pieces; it runs cuts into 1, 2, ",
                                 "4 or 8 pieces without a warp split inside a cluster"));
  if (Status s = check_ffn_matrices(gate_up, down); !s.ok()) return s;
  if (ctas <= 0) return Status::error("one-launch FFN: no CTAs");
  shape->gate_up_tiles = mma_tiles(gate_up.rows);
  shape->gate_up_k_tiles = mma_tiles(gate_up.cols);
  shape->gate_up_pieces = gp;
  shape->down_tiles = mma_tiles(down.rows);
  shape->down_k_tiles = mma_tiles(down.cols);
  shape->down_pieces = dp;
  shape->warps = kSkinnyFfnWarps;
  shape->ctas = ctas;
  return Status();
}

Status skinny_ffn_ctas(int* ctas) {
  const DeviceLimits limits = device_limits();
  if (limits.sm_count <= 0) return Status::error("one-launch FFN: the SM count query failed");
  // One CTA per SM: the launch needs every CTA resident at once (a down piece waits for gate/up
  // tiles of other CTAs), and skinny_ffn checks that its shared memory allows one.
  *ctas = limits.sm_count;
  return Status();
}

Status skinny_ffn(const PackedWeight& gate_up, const PackedWeight& down, const SkinnyInput& in,
                  const SkinnyNorm& norm, const SkinnySwigluOut& act, const SkinnyResidualOut& out,
                  const SkinnyFfnPlan& plan, cudaStream_t stream, SkinnyGemmLaunch options) {
  const int m = in.m;
  if (m < 1 || m > kSkinnyFfnMaxTokens)
    return Status::error(str_cat("one-launch FFN: m=", m, " tokens (supported: 1..", kSkinnyFfnMaxTokens, ")"));
  if (gate_up.dtype != down.dtype || (gate_up.dtype != DType::BF16 && gate_up.dtype != DType::F16))
    return Status::error(str_cat("one-launch FFN: weights ", dtype_name(gate_up.dtype), " and ", dtype_name(down.dtype),
                                 " (supported: both bf16 or both f16)"));
  if (gate_up.data == nullptr || down.data == nullptr || in.x == nullptr || act.act == nullptr ||
      out.residual == nullptr || plan.offsets == nullptr || plan.jobs == nullptr || plan.counters == nullptr)
    return Status::error("one-launch FFN: null weight, buffer or schedule");
  if (!runs_pieces(plan.gate_up_pieces) || !runs_pieces(plan.down_pieces) || plan.ctas <= 0)
    return Status::error(str_cat("one-launch FFN: a plan of ", plan.gate_up_pieces, " and ", plan.down_pieces,
                                 " K pieces on ", plan.ctas, " CTAs (pieces: 1, 2, 4 or 8)"));
  if (Status s = check_ffn_matrices(gate_up, down); !s.ok()) return s;
  const int64_t ffn = down.cols, hidden = gate_up.cols;
  auto aligned = [](const void* p, int64_t stride) { return reinterpret_cast<uintptr_t>(p) % 16 == 0 && stride % 8 == 0; };
  if (hidden % 8 != 0 || ffn % 8 != 0 || !aligned(in.x, in.stride) || !aligned(act.act, act.act_stride) ||
      in.stride < hidden || act.act_stride < ffn || act.ffn != ffn)
    return Status::error(str_cat("one-launch FFN: hidden ", hidden, " and ffn ", ffn, " must be multiples of 8, the "
                                 "input and activation rows 16-byte aligned with strides >= them, in multiples of 8"));
  if (reinterpret_cast<uintptr_t>(gate_up.data) % 16 != 0 || reinterpret_cast<uintptr_t>(down.data) % 16 != 0)
    return Status::error("one-launch FFN: weights must be 16-byte aligned");
  if (norm.partials != nullptr && norm.dim <= 0) return Status::error("one-launch FFN: norm dim must be positive");

  FfnArgs a;
  auto matrix = [](const PackedWeight& w, int pieces) {
    FfnMatrix mat;
    mat.w = static_cast<const uint4*>(w.data);
    mat.row_tiles = mma_tiles(w.rows);
    mat.k_tiles = mma_tiles(w.cols);
    mat.group = w.tile_group;
    mat.pieces = pieces;
    mat.piece_k_tiles = ffn_piece_k_tiles(mat.k_tiles, pieces);
    return mat;
  };
  a.gate_up = matrix(gate_up, plan.gate_up_pieces);
  a.down = matrix(down, plan.down_pieces);
  a.x = in.x;
  a.x_stride = in.stride;
  a.hidden = hidden;
  a.act = act.act;
  a.act_stride = act.act_stride;
  a.ffn = ffn;
  a.m = m;
  a.norm = norm;
  a.swiglu = SwigluEpilogue{{}, act};
  a.residual = ResidualEpilogue{out, down.rows, mma_tiles(down.rows)};
  a.offsets = plan.offsets;
  a.jobs = plan.jobs;
  a.counters = plan.counters;
  a.stamps = plan.lab_stamps;
  a.trace = options.trace;
  const FfnSmem sm = ffn_smem(a.gate_up.k_tiles, a.down.piece_k_tiles, m);
  a.xs_stride = sm.xs_stride;
  a.as_stride = sm.as_stride;
  // The deepest ring that fits, up to `most`: one CTA per SM streams for the whole GPU, and a warp
  // whose ring runs dry during its epilogue or a wait for activations holds the SM's stream back.
  const DeviceLimits limits = device_limits();
  const size_t limit = limits.max_smem_per_block > 0 ? static_cast<size_t>(limits.max_smem_per_block) : 227 * 1024;
  const bool bf16 = gate_up.dtype == DType::BF16;
  // 8 by default: 12 were no faster alone (docs/kernels/skinny_ffn.md, s21e) and keep more of the SM
  // from the neighbouring kernels' CTAs.
  const int most = plan.max_stages > 0 ? plan.max_stages : 8;
  if (most >= 12 && sm.bytes_without_ring + ring_bytes<12>() <= limit)
    return bf16 ? launch_ffn<__nv_bfloat16, 12>(a, sm.bytes_without_ring + ring_bytes<12>(), plan.ctas, options, stream)
                : launch_ffn<__half, 12>(a, sm.bytes_without_ring + ring_bytes<12>(), plan.ctas, options, stream);
  if (most >= 8 && sm.bytes_without_ring + ring_bytes<8>() <= limit)
    return bf16 ? launch_ffn<__nv_bfloat16, 8>(a, sm.bytes_without_ring + ring_bytes<8>(), plan.ctas, options, stream)
                : launch_ffn<__half, 8>(a, sm.bytes_without_ring + ring_bytes<8>(), plan.ctas, options, stream);
  if (sm.bytes_without_ring + ring_bytes<4>() <= limit)
    return bf16 ? launch_ffn<__nv_bfloat16, 4>(a, sm.bytes_without_ring + ring_bytes<4>(), plan.ctas, options, stream)
                : launch_ffn<__half, 4>(a, sm.bytes_without_ring + ring_bytes<4>(), plan.ctas, options, stream);
  return Status::error(str_cat("one-launch FFN: ", m, " tokens of hidden ", hidden, " and ffn ", ffn, " need ",
                               sm.bytes_without_ring + ring_bytes<4>(), " bytes of shared memory; the GPU gives a block ",
                               limit));
}

}  // namespace fuselm
