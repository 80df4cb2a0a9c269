// Decode attention with a cluster's cut of the keys, computed by one CTA ("stacked" ranks).
//
// In clusters (attention_decode.cu), a split of a sequence is attended by `ranks` CTAs, each taking
// its own stretch of keys, and merged in rank order through distributed shared memory. That suits a
// small batch: a short sequence spreads over many SMs. At batch 16 it runs 128 items of 8 CTAs over
// ~30 clusters, four rounds of ~65-80 keys per CTA, each round a chain of latencies (block numbers,
// prologue, two key steps, two cluster barriers) during which DRAM is mostly idle.
//
// This kernel cuts the keys the same way and runs a head group's ranks in one CTA, with the
// arithmetic of a rank unchanged: the same 64-key steps from the rank's first key, the same 16-key
// slice per warp, the warps merged in warp order into the rank's state, then the ranks' states
// merged in rank order. So the output bits equal the clusters' (tested bit for bit), and a launch
// may use either. The CTA holds two teams of four warps; a team attends every other pass (one rank
// of one head group) with its own ring of K/V stages that runs on across its passes, so the next
// rank's keys are in flight while a rank's warps merge. One team alone was bound by the latency of a
// step's dependent instructions (docs/kernels/attention.md, "Stacked ranks"). An item is two passes:
// a head group's ranks, or two head groups of a sequence short enough for one rank.
//
// Shared memory: the two teams' K/V rings, the query tiles of an item's head groups, each team's
// warp states, the item's pass states, and the split's block numbers.
#include <algorithm>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_limits.h"

namespace fuselm::attention_detail {
namespace {

// Two teams of four warps share a CTA: each team attends every other rank of an item (its own
// ring of K/V stages), so that an SM keeps eight warps at work, as two cluster CTAs would; one team
// alone is bound by the latency of a step's dependent instructions (~2.4 us per 64 keys).
inline constexpr int kTeams = 2;

// Byte offsets in the kernel's dynamic shared memory, from the shape and the plan.
struct StackedSmem {
  uint32_t q = 0;          // q tiles, one per head group of an item
  uint32_t warp_o = 0;     // per team: [warp][row][HEAD_DIM + 4] fp32, then [warp][row][max, sum]
  uint32_t warp_bytes = 0;
  uint32_t rank_o = 0;     // [pass][row][HEAD_DIM] fp32 (unnormalised), then [pass][row][max, sum]
  uint32_t blocks = 0;     // the split's block numbers
  uint32_t bytes = 0;
  int rows = 0;            // query heads kept per head group (rows past them are padding)
  int max_blocks = 0;      // block numbers a split may span
};

template <int HEAD_DIM, int STAGES>
StackedSmem stacked_smem(const AttentionShape& shape, const DecodeAttentionPlan& plan, int block_size) {
  using Cfg = DecodeConfig<HEAD_DIM, STAGES>;
  const auto align128 = [](int64_t b) { return static_cast<uint32_t>((b + 127) / 128 * 128); };
  const int group = shape.n_heads / shape.n_kv_heads;
  const int n_groups = shape.n_kv_heads * ((group + Cfg::kRows - 1) / Cfg::kRows);
  const int cluster = plan.cluster_ranks;
  StackedSmem s;
  s.rows = std::min(group, Cfg::kRows);
  // A split is up to `cluster` stretches of at most split_tokens keys, starting on a block boundary
  // (decode_items.h); one block more covers a start inside a block all the same.
  s.max_blocks = cluster * plan.split_tokens / block_size + 1;
  uint32_t at = align128(int64_t{kTeams} * 2 * STAGES * Cfg::kKvTileBytes);  // the teams' rings first
  s.q = at;
  at += align128(int64_t{std::min(kTeams, n_groups)} * Cfg::kQTileBytes);  // items of kTeams passes (below)
  s.warp_o = at;
  s.warp_bytes = align128(int64_t{Cfg::kWarps} * s.rows * (Cfg::kMergeStride + 2) * 4);
  at += kTeams * s.warp_bytes;
  // An item's passes (head groups x ranks) number max(kTeams, ranks) <= `cluster` (decode_items.h).
  s.rank_o = at;
  at += align128(int64_t{cluster} * s.rows * (HEAD_DIM + 2) * 4);
  s.blocks = at;
  at += align128(int64_t{s.max_blocks} * 4);
  s.bytes = at;
  return s;
}

// A barrier for one team's 128 threads (named barrier 1 + team; 0 is __syncthreads').
__device__ __forceinline__ void team_sync(int team) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + team) : "memory");
}

template <class T, int HEAD_DIM, int STAGES>
__global__ void __launch_bounds__(kTeams * DecodeConfig<HEAD_DIM, STAGES>::kThreads, 1)
    decode_stacked_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k_pool,
                          const uint16_t* __restrict__ v_pool, PagedKvLayout layout,
                          const int32_t* __restrict__ block_tables, int max_blocks_per_seq,
                          const int32_t* __restrict__ kv_lens, int batch, int n_heads, int group, int head_tiles,
                          int n_groups, DecodeSplitRule rule, float scale_log2, DecodeWorkspaceLayout ws_layout,
                          StackedSmem sm, uint8_t* __restrict__ workspace, uint16_t* __restrict__ out,
                          KernelTrace* trace) {
  using Cfg = DecodeConfig<HEAD_DIM, STAGES>;
  constexpr int kThreads = kTeams * Cfg::kThreads;
  constexpr int kChunks = HEAD_DIM / 8;
  constexpr int kQuads = HEAD_DIM / 4;
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int merges;  // bit g: this CTA merges head group g of the item's splits
  __shared__ int64_t claimed;

  allow_next_grid();
  const int tid = threadIdx.x;
  if (tid == 0) trace_start(trace);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int team = warp / Cfg::kWarps;
  const int team_warp = warp % Cfg::kWarps;  // the warp's slice of each stage, as in one cluster CTA
  const int team_tid = tid % Cfg::kThreads;
  const int64_t capacity = static_cast<int64_t>(max_blocks_per_seq) * layout.block_size;
  const int block_shift = __ffs(layout.block_size) - 1;
  const uint32_t base = shared_address(smem);
  const uint32_t ring = base + team * 2 * STAGES * Cfg::kKvTileBytes;
  auto k_tile = [&](int stage) { return ring + stage * 2 * Cfg::kKvTileBytes; };
  auto v_tile = [&](int stage) { return k_tile(stage) + Cfg::kKvTileBytes; };
  const uint32_t q_tiles = base + sm.q;
  float* warp_o = reinterpret_cast<float*>(smem + sm.warp_o + team * sm.warp_bytes);  // [warp][row][kMergeStride]
  float* warp_stats = warp_o + Cfg::kWarps * sm.rows * Cfg::kMergeStride;               // [warp][row][max, sum]
  float* rank_o = reinterpret_cast<float*>(smem + sm.rank_o);                          // [pass][row][HEAD_DIM]
  float* rank_stats = rank_o + rule.cluster * sm.rows * HEAD_DIM;                       // [pass][row][max, sum]
  int32_t* split_blocks = reinterpret_cast<int32_t*>(smem + sm.blocks);

  // Items as in clusters: CTA x takes item x, then claims the next unclaimed one.
  const int64_t units = gridDim.x;
  const int64_t unit = blockIdx.x;
  int* next_unclaimed = reinterpret_cast<int*>(workspace);
  int* ctas_done = next_unclaimed + 1;
  uint8_t* records = workspace + DecodeWorkspaceLayout::kHeaderBytes;
  WarpSeqWindow seqs{kv_lens, batch, capacity, n_groups, rule, lane};
  const auto fill_window = [&](int first_seq) { return seqs.fill(first_seq); };
  const auto locate_in_window = [&](int64_t rel, int& i, int& before, int& len) { seqs.locate(rel, i, before, len); };
  DecodeItemWindow<32> window;
  window.start(batch, fill_window);
  const int64_t launch_items = decode_launch_items(batch, window);
  DecodeItemCursor cursor;
  bool waited = false;
  int64_t next_item = 0;
  for (int64_t item = unit;
       window.seek(item, batch, fill_window, locate_in_window, cursor, capacity, n_groups, rule);
       item = next_item) {
    // The previous item's reads of shared memory (block numbers, q, states, the claim) are done.
    if (item != unit) __syncthreads();
    if (item == unit && tid == 0) trace_mark(trace, 3);  // the first item is located
    const int seq = cursor.seq, kv_len = cursor.kv_len, n_splits = cursor.n_splits;
    const int ranks = cursor.ranks;
    const int rank_shift = cursor.rank_shift;
    const int rank_tokens = cursor.rank_tokens;
    const int split = cursor.split_of(item);
    const int first_group = cursor.group_of(item);
    // The item's head groups: those the cluster's CTAs would take (cluster / ranks), within the heads.
    const int item_groups = min(cursor.groups_per_item, n_groups - first_group);
    const int passes = item_groups << rank_shift;  // pass p: head group p / ranks, rank p % ranks
    uint8_t* record = records + seq * ws_layout.record_bytes;
    float* lse_all = reinterpret_cast<float*>(record + ws_layout.lse_offset);  // [head][split]
    float* out_all = reinterpret_cast<float*>(record + ws_layout.out_offset);  // [head][split][HEAD_DIM]
    const int32_t* block_table = block_tables + static_cast<int64_t>(seq) * max_blocks_per_seq;
    const int newest = kv_len - 1;
    const int split_begin = split * ranks * rank_tokens;
    const int split_end = min(kv_len, split_begin + ranks * rank_tokens);
    const int first_block = split_begin >> block_shift;
    const int n_blocks = ((split_end - 1) >> block_shift) - first_block + 1;
    for (int i = tid; i < n_blocks; i += kThreads) split_blocks[i] = block_table[first_block + i];
    __syncthreads();
    if (item == unit && tid == 0) trace_mark(trace, 4);  // its block numbers are staged

    // Rank r's keys (as cluster rank r would take them): rank_begin(r) .. rank_end(r) - 1.
    const auto rank_begin = [&](int r) { return split_begin + r * rank_tokens; };
    const auto rank_end = [&](int r) { return min(split_end, rank_begin(r) + rank_tokens); };
    const auto rank_steps = [&](int r) {
      const int n = rank_end(r) - rank_begin(r);
      return n > 0 ? (n + Cfg::kKeys - 1) / Cfg::kKeys : 0;
    };
    // A team's walk over its K/V steps: its passes (every kTeams-th, from its own), step by step.
    // Rank 0 of a split always has keys (its first); ranks past the split's last key have none and
    // are skipped (weight 0 in the merge).
    struct Walk {
      int p = 0, step = 0, steps = 0;
    };
    const auto walk_settle = [&](Walk& w) {
      while (w.p < passes && rank_steps(w.p & (ranks - 1)) == 0) w.p += kTeams;
      w.steps = w.p < passes ? rank_steps(w.p & (ranks - 1)) : 0;
    };
    const auto walk_start = [&] {
      Walk w{team, 0, 0};
      walk_settle(w);
      return w;
    };
    const auto walk_next = [&](Walk& w) {
      if (++w.step < w.steps) return;
      w.step = 0;
      w.p += kTeams;
      walk_settle(w);
    };
    // One step's K and V rows (zero-filled past the rank's keys, the row at `skip` left for later).
    auto load_step = [&](const Walk& w, int stage, int skip) {
      const int r = w.p & (ranks - 1);
      const int kv_head = (first_group + (w.p >> rank_shift)) / head_tiles;
      const int first = rank_begin(r) + w.step * Cfg::kKeys;
      const int end = rank_end(r);
      issue_kv_rows<HEAD_DIM, Cfg::kKeys, Cfg::kThreads>(k_tile(stage), v_tile(stage), k_pool, v_pool, layout,
                                                          split_blocks, first_block, block_shift, kv_head, first, end,
                                                          skip, team_tid);
    };

    // Prologue, per team: its steps 0 .. STAGES-2, one commit group each. Before the wait for the
    // QKV projection the newest row is left out (that projection writes it); it follows the wait.
    const int skip = waited ? -1 : newest;
    Walk load = walk_start();
#pragma unroll 1
    for (int stage = 0; stage < STAGES - 1; ++stage) {
      if (load.p < passes) {
        load_step(load, stage, skip);
        walk_next(load);
      }
      cp_async_commit();
    }
    if (!waited) {
      if (tid == 0) trace_mark(trace, 5);  // the first item's prologue is issued
      wait_for_previous_grid();
      waited = true;
      if (tid == 0) trace_released(trace);
      // The newest row of every prologue step that holds it (one per head group of a short sequence).
      Walk w = walk_start();
      for (int stage = 0; stage < STAGES - 1 && w.p < passes; ++stage, walk_next(w)) {
        const int r = w.p & (ranks - 1);
        const int first = rank_begin(r) + w.step * Cfg::kKeys;
        if (newest < first || newest >= min(first + Cfg::kKeys, rank_end(r))) continue;
        const int kv_head = (first_group + (w.p >> rank_shift)) / head_tiles;
        load_kv_row<HEAD_DIM>(k_tile(stage), k_pool, layout, split_blocks, block_shift, kv_head, first, newest,
                              team_tid, first_block);
        load_kv_row<HEAD_DIM>(v_tile(stage), v_pool, layout, split_blocks, block_shift, kv_head, first, newest,
                              team_tid, first_block);
      }
    }
    // The item's query vectors, one tile per head group (rows past the group zero-filled).
    for (int idx = tid; idx < item_groups * Cfg::kRows * kChunks; idx += kThreads) {
      const int g = idx / (Cfg::kRows * kChunks);
      const int r = idx / kChunks % Cfg::kRows;
      const int chunk = idx % kChunks;
      const int group_index = first_group + g;
      const int head_tile = group_index % head_tiles;
      const int head0 = group_index / head_tiles * group + head_tile * Cfg::kRows;
      const bool valid = r < min(Cfg::kRows, group - head_tile * Cfg::kRows);
      const uint16_t* src = valid ? q + (static_cast<int64_t>(seq) * n_heads + head0 + r) * HEAD_DIM + chunk * 8 : q;
      cp_async_16(q_tiles + g * Cfg::kQTileBytes + SwizzledTile<HEAD_DIM>::offset(r, chunk), src, valid);
    }
    cp_async_commit();
    // The next item's claim, while q and the K/V land (its round trip waits at the claim: see the
    // split kernel).
    int claim = 0;
    if (tid == 0) claim = atomicAdd(next_unclaimed, 1);
    // Both teams read the q tiles: every copy has landed after this barrier, the prologues included.
    cp_async_wait<0>();
    __syncthreads();
    if (item == unit && tid == 0) trace_mark(trace, 0);  // q and the prologue's K/V have landed

    WarpState<HEAD_DIM, 1> st;
    st.init();
    QOperand<HEAD_DIM, 1, true> q_operand;
    Walk at = walk_start();
    for (int t = 0; at.p < passes; ++t) {
      // Step t's group is complete once at most STAGES-2 newer ones are pending. After the team's
      // barrier no warp of the team still reads the stage the prefetch overwrites.
      if (t > 0) {
        cp_async_wait<STAGES - 2>();
        team_sync(team);
      }
      const int r = at.p & (ranks - 1);
      if (at.step == 0) q_operand.load(q_tiles + (at.p >> rank_shift) * Cfg::kQTileBytes, 0, lane);
      if (load.p < passes) {
        load_step(load, (t + STAGES - 1) % STAGES, -1);
        walk_next(load);
      }
      cp_async_commit();

      const int end = rank_end(r);
      const int key_pos0 = rank_begin(r) + at.step * Cfg::kKeys + team_warp * 16;
      const int last_visible[1][2] = {{end - 1, end - 1}};
      if (key_pos0 < end)
        warp_attend<T, HEAD_DIM, 16>(st, q_operand, k_tile(t % STAGES), v_tile(t % STAGES), team_warp * 16,
                                     key_pos0, last_visible, key_pos0 + 15 >= end, scale_log2, lane);
      const Walk now = at;
      walk_next(at);
      if (now.step + 1 < now.steps) continue;

      // The rank's keys are done: its warps' states, merged in warp order, become the pass's state.
      // (The team's previous reads of its warp area ended before this step's barrier.)
      const int group_index = first_group + (now.p >> rank_shift);
      const int n_rows = min(Cfg::kRows, group - group_index % head_tiles * Cfg::kRows);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = lane / 4 + 8 * half;
        const float sum = quad_sum(st.row_sum[0][half]);
        if (row >= n_rows) continue;
        if ((lane & 3) == 0) {
          warp_stats[(team_warp * sm.rows + row) * 2 + 0] = st.row_max[0][half];
          warp_stats[(team_warp * sm.rows + row) * 2 + 1] = sum;
        }
        float* dst = warp_o + (team_warp * sm.rows + row) * Cfg::kMergeStride + 2 * (lane & 3);
#pragma unroll
        for (int n = 0; n < HEAD_DIM / 8; ++n)
          *reinterpret_cast<float2*>(dst + n * 8) = make_float2(st.o[0][n][2 * half], st.o[0][n][2 * half + 1]);
      }
      st.init();
      team_sync(team);
      for (int idx = team_tid; idx < n_rows * kQuads; idx += Cfg::kThreads) {
        const int row = idx / kQuads;
        const int d = (idx % kQuads) * 4;
        // Warp 0 always holds the rank's first key; a warp that saw no visible key has max -inf.
        const SoftmaxState merged = merge_softmax_parts<Cfg::kWarps>(Cfg::kWarps, [&](int w) {
          return SoftmaxState{warp_stats[(w * sm.rows + row) * 2], warp_stats[(w * sm.rows + row) * 2 + 1],
                              *reinterpret_cast<const float4*>(warp_o + (w * sm.rows + row) * Cfg::kMergeStride + d)};
        });
        *reinterpret_cast<float4*>(rank_o + (now.p * sm.rows + row) * HEAD_DIM + d) = merged.o;
        if (d == 0) {
          rank_stats[(now.p * sm.rows + row) * 2] = merged.max;
          rank_stats[(now.p * sm.rows + row) * 2 + 1] = merged.sum;
        }
      }
    }

    // Every pass's state is written: each head group's ranks, added in rank order, are the split's
    // result (the output, or the split's partial for the merge of a longer sequence's splits). A
    // rank without keys has max -inf, sum 0 and o 0 (weight 0), as in clusters.
    __syncthreads();
    if (item == unit && tid == 0) trace_mark(trace, 1);  // the item's keys are done
    for (int idx = tid; idx < item_groups * sm.rows * kQuads; idx += kThreads) {
      const int g = idx / (sm.rows * kQuads);
      const int row = idx / kQuads % sm.rows;
      const int d = (idx % kQuads) * 4;
      const int group_index = first_group + g;
      const int head_tile = group_index % head_tiles;
      if (row >= min(Cfg::kRows, group - head_tile * Cfg::kRows)) continue;
      const int head0 = group_index / head_tiles * group + head_tile * Cfg::kRows;
      float rank_max[kMaxClusterRanks], rank_sum[kMaxClusterRanks];
      float4 o[kMaxClusterRanks];
#pragma unroll
      for (int r = 0; r < kMaxClusterRanks; ++r) {
        if (r >= ranks) break;
        const int p = (g << rank_shift) + r;
        const bool has_keys = rank_steps(r) > 0;
        rank_max[r] = has_keys ? rank_stats[(p * sm.rows + row) * 2] : -INFINITY;
        rank_sum[r] = has_keys ? rank_stats[(p * sm.rows + row) * 2 + 1] : 0.0f;
        o[r] = has_keys ? *reinterpret_cast<const float4*>(rank_o + (p * sm.rows + row) * HEAD_DIM + d)
                        : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      // Rank 0 always has the split's first key, so the merged max is finite.
      const SoftmaxState merged = merge_softmax_parts<kMaxClusterRanks>(
          ranks, [&](int r) { return SoftmaxState{rank_max[r], rank_sum[r], o[r]}; });
      const float4 acc = merged.o;
      const float inv_sum = 1.0f / merged.sum;
      if (n_splits == 1) {
        uint16_t* group_out = out + (static_cast<int64_t>(seq) * n_heads + head0) * HEAD_DIM;
        *reinterpret_cast<uint2*>(group_out + row * HEAD_DIM + d) =
            make_uint2(Mma<T>::pack(acc.x * inv_sum, acc.y * inv_sum), Mma<T>::pack(acc.z * inv_sum, acc.w * inv_sum));
      } else {
        const int64_t slot = static_cast<int64_t>(head0 + row) * rule.max_splits + split;
        *reinterpret_cast<float4*>(out_all + slot * HEAD_DIM + d) =
            make_float4(acc.x * inv_sum, acc.y * inv_sum, acc.z * inv_sum, acc.w * inv_sum);
        if (d == 0) lse_all[slot] = merged.max + log2f(merged.sum);
      }
    }

    // The claim, and for a sequence of several splits the count of each head group's partial, which
    // every thread fenced; the CTA that counts a group's last split merges the group.
    if (tid == 0) claimed = units + static_cast<int64_t>(claim);
    if (tid == 0) reset_after_last_claim(claim, launch_items, next_unclaimed);
    if (n_splits > 1) __threadfence();
    __syncthreads();
    next_item = claimed;
    if (tid == 0) trace_mark(trace, 2);  // the item's outputs (or partials) are written
    if (n_splits == 1) continue;
    if (tid == 0) merges = 0;
    __syncthreads();
    if (tid < item_groups) {
      int* counter = reinterpret_cast<int*>(record) + first_group + tid;
      if (atomicAdd(counter, 1) == n_splits - 1) {
        atomicExch(counter, 0);  // ready for the next launch
        atomicOr(&merges, 1 << tid);
      }
      __threadfence();
    }
    __syncthreads();
    for (int g = 0; g < item_groups; ++g) {
      if (!(merges >> g & 1)) continue;
      const int group_index = first_group + g;
      const int head_tile = group_index % head_tiles;
      const int head0 = group_index / head_tiles * group + head_tile * Cfg::kRows;
      merge_split_partials<T, HEAD_DIM, kThreads>(
          lse_all + static_cast<int64_t>(head0) * rule.max_splits,
          out_all + static_cast<int64_t>(head0) * rule.max_splits * HEAD_DIM, rule.max_splits, n_splits,
          min(Cfg::kRows, group - head_tile * Cfg::kRows),
          out + (static_cast<int64_t>(seq) * n_heads + head0) * HEAD_DIM, tid);
    }
  }  // items

  finish_decode_launch<T, HEAD_DIM, kThreads>(kv_lens, batch, capacity, rule, n_heads, out, waited, next_unclaimed,
                                              ctas_done, launch_items < 0, trace, tid, static_cast<int>(gridDim.x));
}

template <class F>
Status dispatch_stacked(const DecodeVariant& variant, int head_dim, F&& f) {
  const auto tensor_core = [&](auto head_dim_tag) {
    return dispatch_stages(variant.stages, [&](auto stages_tag) { return f(head_dim_tag, stages_tag); });
  };
  return dispatch_head_dim(head_dim, tensor_core, [&] {
    return Status::error(str_cat("decode_attention: the stacked kernel has no head_dim=", head_dim,
                                 " (supported: 64, 128)"));
  });
}

}  // namespace

bool decode_stacked_fits(const DecodeVariant& variant, const AttentionShape& shape, const DecodeAttentionPlan& plan,
                         int block_size) {
  if (shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0 || block_size <= 0 || plan.cluster_ranks < 2)
    return false;
  uint32_t bytes = 0;
  const Status s = dispatch_stacked(variant, shape.head_dim, [&](auto head_dim_tag, auto stages_tag) {
    bytes = stacked_smem<decltype(head_dim_tag)::value, decltype(stages_tag)::value>(shape, plan, block_size).bytes;
    return Status();
  });
  const int limit = device_limits().max_smem_per_block;
  return s.ok() && limit > 0 && bytes <= static_cast<uint32_t>(limit);
}

Status decode_attention_stacked(const DecodeVariant& variant, const void* q, void* out, DType dtype,
                                const AttentionShape& shape, const PagedKvView& kv, const int32_t* kv_lens, int batch,
                                const DecodeAttentionPlan& plan, void* workspace, cudaStream_t stream) {
  // decode_attention_variant checked the shapes, the plan and the workspace.
  const int group = shape.n_heads / shape.n_kv_heads;
  const int head_tiles = (group + 15) / 16;
  const int n_groups = shape.n_kv_heads * head_tiles;
  const int ranks = plan.cluster_ranks;
  return dispatch_dtype(dtype, [&](auto type_tag) {
    using T = decltype(type_tag);
    return dispatch_stacked(variant, shape.head_dim, [&](auto head_dim_tag, auto stages_tag) -> Status {
      constexpr int kHeadDim = decltype(head_dim_tag)::value;
      constexpr int kStages = decltype(stages_tag)::value;
      using Cfg = DecodeConfig<kHeadDim, kStages>;
      const StackedSmem sm = stacked_smem<kHeadDim, kStages>(shape, plan, kv.layout.block_size);
      const int limit = device_limits().max_smem_per_block;
      if (limit > 0 && sm.bytes > static_cast<uint32_t>(limit))
        return Status::error(str_cat("decode_attention: the stacked kernel needs ", sm.bytes,
                                     " bytes of shared memory for this shape (", plan.cluster_ranks, " ranks, ",
                                     group, " query heads per KV head, split_tokens=", plan.split_tokens,
                                     "); the GPU gives a block ", limit, ": use clusters"));
      auto kernel = decode_stacked_kernel<T, kHeadDim, kStages>;
      FUSELM_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sm.bytes));
      int per_sm = 0;
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kTeams * Cfg::kThreads, sm.bytes) !=
          cudaSuccess) {
        cudaGetLastError();
        per_sm = 1;
      }
      const int sms = device_limits().sm_count > 0 ? device_limits().sm_count : 132;
      const int64_t wave = static_cast<int64_t>(sms) * std::max(1, per_sm);
      // An item holds at least one head group, as in clusters.
      const int64_t most_items = decode_items_bound(batch, n_groups, plan, ranks);
      const int64_t units = std::min<int64_t>(variant.ctas > 0 ? variant.ctas : wave, most_items);
      // The clusters' cut, with items of kTeams passes: a head group's ranks, or kTeams head groups of
      // a one-rank sequence, so that short sequences spread over as many SMs as long ones.
      const DecodeSplitRule rule{plan.split_tokens, ranks, plan.max_splits_per_seq, plan.min_rank_keys, kTeams};
      FUSELM_CUDA_RETURN(launch_kernel(
          kernel, dim3(static_cast<unsigned>(units)), dim3(kTeams * Cfg::kThreads), sm.bytes, stream, plan.pdl,
          static_cast<const uint16_t*>(q), static_cast<const uint16_t*>(kv.k), static_cast<const uint16_t*>(kv.v),
          kv.layout, kv.block_tables, kv.max_blocks_per_seq, kv_lens, batch, shape.n_heads, group, head_tiles,
          n_groups, rule, shape.scale * 1.4426950408889634f, decode_workspace_layout(shape, plan), sm,
          static_cast<uint8_t*>(workspace), static_cast<uint16_t*>(out), plan.trace));
      return Status();
    });
  });
}

}  // namespace fuselm::attention_detail
