// Split-KV paged decode attention (one query token per sequence), in one kernel:
//
// 1. Work items: one fixed-size chunk (split) of one sequence's cache for the (up to) 16 query
//    heads of one GQA group, so every K/V byte of the chunk is read once for the whole group. One
//    wave of CTAs takes the step's items in turn (DecodeItemWindow), so the grid, fixed when a
//    graph is captured, never depends on the lengths. K/V move global -> shared with 16-byte
//    cp.async copies through a ring of 64-key stages (2-4: attention_variants.h), so one or more
//    stages are in flight while one is consumed; S = QK^T and PV run on tensor cores (the group's
//    heads are the 16 rows of the mma tile, padded with zero rows). The four warps take fixed
//    16-key slices of each stage and are merged in warp order; the normalised partial output and
//    its log2-sum-exp go to the workspace.
// 2. The CTA that finishes the last split of a (sequence, head group), found with a counter in the
//    workspace, merges the group's splits in split order and writes the output: whichever CTA it
//    is, the merge reads the same partials in the same order, so the bits do not depend on timing.
//    This spares a combine kernel per layer (its launch and its wait for the split kernel). A
//    sequence of one split is written straight to the output.
// 3. With thread-block clusters (sm_90), an item belongs to a whole cluster: each head group's
//    split is attended by `ranks` CTAs, each taking its own stretch of the split's keys, and the
//    ranks' states are merged in rank order through distributed shared memory. How a sequence is
//    cut follows its own length (decode_items.h): a sequence of up to cluster * split_tokens
//    tokens is one split, written straight to the output with no partial, fence, counter or
//    re-read; a short one spreads over up to `cluster` SMs per head group (at least 128 keys
//    each), every CTA's keys loaded before the wait for the QKV projection; and a cluster whose
//    item needs fewer ranks takes several head groups at once.
//
// Decode is memory-bound (each K/V byte feeds group * 4 FLOPs), so tensor cores are used for
// their issue economy, not their rate: one mma replaces the 16-lane shuffle reductions a
// CUDA-core dot product would need per (token, head).
#include <algorithm>
#include <atomic>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_decode_o.cuh"
#include "kernels/cuda/attention_generic.cuh"
#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/cluster.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/decode_items.h"
#include "kernels/cuda/device_limits.h"
#include "kernels/cuda/pdl.cuh"

namespace fuselm {
namespace attention_detail {

DecodeWorkspaceLayout decode_workspace_layout(const AttentionShape& shape, const DecodeAttentionPlan& plan) {
  const auto align16 = [](int64_t bytes) { return (bytes + 15) / 16 * 16; };
  const int64_t groups = static_cast<int64_t>(shape.n_kv_heads) * ((shape.n_heads / shape.n_kv_heads + 15) / 16);
  const int64_t slots = static_cast<int64_t>(shape.n_heads) * plan.max_splits_per_seq;
  DecodeWorkspaceLayout l;
  l.lse_offset = align16(groups * 4);
  l.out_offset = l.lse_offset + align16(slots * 4);
  l.record_bytes = l.out_offset + slots * shape.head_dim * 4;
  return l;
}

namespace {

// FOLD_O: the grid's CTAs past fold.attention_units clusters run the folded O projection
// (attention_decode_o.cuh), and each head group's output is announced to them.
template <class T, int HEAD_DIM, int STAGES, bool FOLD_O = false>
__global__ void __launch_bounds__(DecodeConfig<HEAD_DIM, STAGES>::kThreads)
    decode_split_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k_pool,
                        const uint16_t* __restrict__ v_pool, PagedKvLayout layout,
                        const int32_t* __restrict__ block_tables, int max_blocks_per_seq,
                        const int32_t* __restrict__ kv_lens, int batch, int n_heads, int group, int head_tiles,
                        int n_groups, DecodeSplitRule rule, float scale_log2, DecodeWorkspaceLayout ws_layout,
                        uint8_t* __restrict__ workspace, uint16_t* __restrict__ out, KernelTrace* trace,
                        DecodeOFoldArgs fold) {
  using Cfg = DecodeConfig<HEAD_DIM, STAGES>;
  constexpr int kChunks = HEAD_DIM / 8;
  constexpr int kQuads = HEAD_DIM / 4;  // float4 groups per row
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int merges;

  // CTAs past the attending clusters run the folded O projection.
  const int cluster = rule.cluster;  // CTAs per item (a power of two)
  const int cluster_shift = log2_of_pow2(cluster);
  const bool folds_o = FOLD_O && blockIdx.x >= (fold.attention_units << cluster_shift);
  // The next kernel may launch at once: it waits for this grid before its reads. (A folded O
  // projection's CTAs let it launch only once their head group's output is there: its first weight
  // stages would otherwise compete with attention's loads.)
  if (!folds_o) allow_next_grid();
  const int tid = threadIdx.x;
  if (tid == 0) trace_start(trace);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int64_t capacity = static_cast<int64_t>(max_blocks_per_seq) * layout.block_size;
  const int block_shift = __ffs(layout.block_size) - 1;
  const uint32_t q_tile = shared_address(smem);
  auto k_tile = [&](int stage) { return q_tile + Cfg::kQTileBytes + stage * 2 * Cfg::kKvTileBytes; };
  auto v_tile = [&](int stage) { return k_tile(stage) + Cfg::kKvTileBytes; };

  // The grid is one wave of CTAs (of clusters, with ranks > 1), fixed when a graph is captured,
  // while the items follow the sequences' lengths: CTA (cluster) x takes item x, then claims the
  // next unclaimed item from a counter while it works on the current one (the same work per item
  // whoever does it). So no CTA is launched for nothing, a long sequence's splits spread over the
  // GPU, and CTAs that finish early take more items (taking every gridDim.x-th item instead was
  // 6-35% slower at batch 8-256 with 1k-8k tokens: docs/kernels/attention.md).
  // The lengths and block tables are step inputs the host wrote before the step, and every cached
  // position but the newest was written by earlier steps: only q and the newest K/V row come from
  // the previous kernel (the QKV projection). So the first item's K/V prologue is issued before
  // waiting for it, and overlaps its tail; q and the newest row follow the wait.
  const int cluster_rank = static_cast<int>(blockIdx.x) & (cluster - 1);
  if constexpr (FOLD_O) {
    if (folds_o) {
      decode_o_fold_cta<T, Cfg::kThreads>(fold, smem, static_cast<int>((blockIdx.x >> cluster_shift) - fold.attention_units),
                                          cluster_rank, trace);
      __syncthreads();
      if (tid == 0) trace_end(trace);
      return;
    }
  }
  // CTAs, or clusters, that take items
  const int64_t units = FOLD_O ? fold.attention_units : gridDim.x >> cluster_shift;
  const int64_t unit = blockIdx.x >> cluster_shift;
  int* next_unclaimed = reinterpret_cast<int*>(workspace);  // items past the first `units`
  int* ctas_done = next_unclaimed + 1;
  uint8_t* records = workspace + DecodeWorkspaceLayout::kHeaderBytes;
  __shared__ int64_t claimed;  // in rank 0: the cluster's next item
  __shared__ int32_t split_blocks[kDecodeMaxSplitBlocks];
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
    // The barrier: the previous item's shared-memory reads (and of `claimed`) are done. Claims
    // only grow, so a CTA's items come in increasing order, as the cursor needs. (With clusters the
    // previous item ended at a cluster barrier.)
    if (item != unit && cluster == 1) __syncthreads();
    if (item == unit && tid == 0) trace_mark(trace, 3);  // the first item is located
    const int seq = cursor.seq, kv_len = cursor.kv_len, n_splits = cursor.n_splits;
    // The item's head groups take `ranks` CTAs each: this CTA is rank `rank` of group group_index
    // (past the last group when the item has fewer groups than the cluster has room for: idle).
    const int ranks = cursor.ranks;
    const int rank = cluster_rank & (ranks - 1);
    const int group_index = cursor.group_of(item) + (cluster_rank >> cursor.rank_shift);
    const bool idle = group_index >= n_groups;
    const int split = cursor.split_of(item);
    const int kv_head = group_index / head_tiles;
    const int head_tile = group_index % head_tiles;
    const int head0 = kv_head * group + head_tile * Cfg::kRows;
    const int n_rows = min(Cfg::kRows, group - head_tile * Cfg::kRows);
    uint8_t* record = records + seq * ws_layout.record_bytes;
    float* lse_all = reinterpret_cast<float*>(record + ws_layout.lse_offset);  // [head][split]
    float* out_all = reinterpret_cast<float*>(record + ws_layout.out_offset);  // [head][split][HEAD_DIM]
    uint16_t* group_out = out + (static_cast<int64_t>(seq) * n_heads + head0) * HEAD_DIM;
    // A (row, 4 columns) unit of a result: normalised into the group's output, or as the split's
    // partial with its log2-sum-exp, for the merge of the sequence's splits.
    auto write_output = [&](int row, int d, float4 acc, float inv_sum) {
      *reinterpret_cast<uint2*>(group_out + row * HEAD_DIM + d) =
          make_uint2(Mma<T>::pack(acc.x * inv_sum, acc.y * inv_sum), Mma<T>::pack(acc.z * inv_sum, acc.w * inv_sum));
    };
    auto write_partial = [&](int row, int d, float4 acc, float row_max, float sum) {
      const float inv_sum = 1.0f / sum;
      const int64_t slot = static_cast<int64_t>(head0 + row) * rule.max_splits + split;
      *reinterpret_cast<float4*>(out_all + slot * HEAD_DIM + d) =
          make_float4(acc.x * inv_sum, acc.y * inv_sum, acc.z * inv_sum, acc.w * inv_sum);
      if (d == 0) lse_all[slot] = row_max + log2f(sum);
    };
    const int32_t* block_table = block_tables + static_cast<int64_t>(seq) * max_blocks_per_seq;
    const int newest = kv_len - 1;

    // This CTA's keys: the split's, or with clusters its rank's stretch of them (possibly none,
    // when a short sequence leaves the last ranks without keys).
    const int rank_tokens = cursor.rank_tokens;
    const int split_begin = (split * ranks + rank) * rank_tokens;
    const int split_end = min(kv_len, split_begin + rank_tokens);
    const int n_steps =
        !idle && split_begin < split_end ? (split_end - split_begin + Cfg::kKeys - 1) / Cfg::kKeys : 0;
    // The split's stretch of the block table, read once into shared memory: read from global
    // memory, each tile row's lookup was a round trip between 16-byte copies (the copies' memory
    // clobber keeps the compiler from batching them), and made the K/V issue the item's tail.
    const int first_block = split_begin >> block_shift;
    const int n_blocks = n_steps > 0 ? ((split_end - 1) >> block_shift) - first_block + 1 : 0;
    // (A split spans at most kDecodeMaxSplitBlocks blocks: the launcher checks split_tokens.)
    for (int i = tid; i < n_blocks; i += Cfg::kThreads) split_blocks[i] = block_table[first_block + i];
    __syncthreads();
    if (item == unit && tid == 0) trace_mark(trace, 4);  // its block numbers are staged
    // One stage's K and V rows (zero-filled past the split, the row at `skip` left for load_kv_row).
    auto load_kv = [&](int step, int stage, int skip) {
      issue_kv_rows<HEAD_DIM, Cfg::kKeys, Cfg::kThreads>(k_tile(stage), v_tile(stage), k_pool, v_pool, layout,
                                                          split_blocks, first_block, block_shift, kv_head,
                                                          split_begin + step * Cfg::kKeys, split_end, skip, tid);
    };

    // Prologue: K/V stages 0 .. STAGES-2 as one commit group each, without the newest row; then,
    // after the wait, one more group with the group's query vectors (contiguous in q; rows past the
    // group zero-filled) and the newest row if one of those stages holds it.
    #pragma unroll 1
    for (int stage = 0; stage < STAGES - 1; ++stage) {
      // Empty groups past the split keep the group count, and so the waits below, uniform.
      if (stage < n_steps) load_kv(stage, stage, newest);
      cp_async_commit();
    }
    if (!waited) {
      if (tid == 0) trace_mark(trace, 5);  // the first item's prologue is issued
      wait_for_previous_grid();
      waited = true;
      if (tid == 0) trace_released(trace);
    }
    static_assert((Cfg::kRows * kChunks) % Cfg::kThreads == 0, "Q chunks must split evenly over the threads");
    #pragma unroll
    for (int i = 0; i < Cfg::kRows * kChunks / Cfg::kThreads; ++i) {
      const int idx = tid + i * Cfg::kThreads;
      const int r = idx / kChunks;
      const int chunk = idx % kChunks;
      const bool valid = r < n_rows && !idle;
      const uint16_t* src = valid ? q + (static_cast<int64_t>(seq) * n_heads + head0 + r) * HEAD_DIM + chunk * 8 : q;
      cp_async_16(q_tile + SwizzledTile<HEAD_DIM>::offset(r, chunk), src, valid);
    }
    if (!idle && newest >= split_begin && newest < split_end) {
      const int newest_step = (newest - split_begin) / Cfg::kKeys;
      if (newest_step < STAGES - 1) {
        const int first = split_begin + newest_step * Cfg::kKeys;
        load_kv_row<HEAD_DIM>(k_tile(newest_step), k_pool, layout, split_blocks, block_shift, kv_head, first, newest,
                              tid, first_block);
        load_kv_row<HEAD_DIM>(v_tile(newest_step), v_pool, layout, split_blocks, block_shift, kv_head, first, newest,
                              tid, first_block);
      }
    }
    cp_async_commit();
    // The next item's claim, first needed after the key loop. It goes out while q and the K/V land:
    // the compiler aggregates an atomic on one address over the warp, and the shuffle that hands out
    // its answer waits for the round trip right there (earlier, the item's first loads waited too).
    int claim = 0;
    if (tid == 0 && cluster_rank == 0) claim = atomicAdd(next_unclaimed, 1);

    const int last_visible[1][2] = {{split_end - 1, split_end - 1}};
    WarpState<HEAD_DIM, 1> st;
    st.init();
    QOperand<HEAD_DIM, 1, true> q_operand;

    for (int step = 0; step < n_steps; ++step) {
      // Step 0 needs the whole prologue (q came last). Later, the group of stage `step` is complete
      // once at most STAGES-2 newer ones are pending. After the barrier stage step % STAGES is
      // visible to all, and no warp still reads stage (step-1) % STAGES, which the prefetch below
      // overwrites.
      if (step == 0)
        cp_async_wait<0>();
      else
        cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (step == 0 && tid == 0) trace_mark(trace, 0);  // q and the prologue's K/V have landed
      if (step == 0) q_operand.load(q_tile, 0, lane);
      const int next = step + STAGES - 1;
      if (next < n_steps) load_kv(next, next % STAGES, -1);
      cp_async_commit();

      const int stage = step % STAGES;
      const int key_pos0 = split_begin + step * Cfg::kKeys + warp * 16;
      if (key_pos0 >= split_end) continue;
      warp_attend<T, HEAD_DIM, 16>(st, q_operand, k_tile(stage), v_tile(stage), warp * 16, key_pos0, last_visible,
                                   key_pos0 + 15 >= split_end, scale_log2, lane);
    }

    // Merge the four warps' states in warp order. The barrier also retires every read of the K/V
    // stages, which the merge area overwrites (and publishes the claim).
    if (tid == 0 && cluster_rank == 0) claimed = units + static_cast<int64_t>(claim);
    if (tid == 0 && cluster_rank == 0) reset_after_last_claim(claim, launch_items, next_unclaimed);
    cp_async_wait<0>();
    __syncthreads();
    if (tid == 0) trace_mark(trace, 1);  // the key loop is done
    float* merge_o = reinterpret_cast<float*>(smem + Cfg::kQTileBytes);           // [warp][row][kMergeStride]
    float* merge_stats = merge_o + Cfg::kWarps * Cfg::kRows * Cfg::kMergeStride;  // [warp][row][max, sum]
    float* rank_o = merge_stats + Cfg::kWarps * Cfg::kRows * 2;                   // [row][HEAD_DIM]
    float* rank_stats = rank_o + Cfg::kRows * HEAD_DIM;                           // [row][max, sum]
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = lane / 4 + 8 * r;
      const float sum = quad_sum(st.row_sum[0][r]);
      if ((lane & 3) == 0) {
        merge_stats[(warp * Cfg::kRows + row) * 2 + 0] = st.row_max[0][r];
        merge_stats[(warp * Cfg::kRows + row) * 2 + 1] = sum;
      }
      float* dst = merge_o + (warp * Cfg::kRows + row) * Cfg::kMergeStride + 2 * (lane & 3);
      #pragma unroll
      for (int n = 0; n < HEAD_DIM / 8; ++n)
        *reinterpret_cast<float2*>(dst + n * 8) = make_float2(st.o[0][n][2 * r], st.o[0][n][2 * r + 1]);
    }
    __syncthreads();

    for (int idx = tid; idx < Cfg::kRows * kQuads; idx += Cfg::kThreads) {
      const int row = idx / kQuads;
      const int d = (idx % kQuads) * 4;
      if (row >= n_rows || idle) continue;
      if (n_steps == 0) {  // a rank without keys: weight 0 in the cluster's merge
        *reinterpret_cast<float4*>(rank_o + row * HEAD_DIM + d) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (d == 0) rank_stats[row * 2] = -INFINITY, rank_stats[row * 2 + 1] = 0.0f;
        continue;
      }
      // Warp 0 always holds the split's first key; a warp that saw no visible key has max -inf.
      const SoftmaxState merged = merge_softmax_parts<Cfg::kWarps>(Cfg::kWarps, [&](int w) {
        return SoftmaxState{merge_stats[(w * Cfg::kRows + row) * 2], merge_stats[(w * Cfg::kRows + row) * 2 + 1],
                            *reinterpret_cast<const float4*>(merge_o + (w * Cfg::kRows + row) * Cfg::kMergeStride + d)};
      });
      if (cluster > 1) {  // unnormalised, for the cluster's merge
        *reinterpret_cast<float4*>(rank_o + row * HEAD_DIM + d) = merged.o;
        if (d == 0) rank_stats[row * 2] = merged.max, rank_stats[row * 2 + 1] = merged.sum;
        continue;
      }
      // A sequence of one split is done here (the same bits as its merge of one split: weight 1).
      if (n_splits == 1)
        write_output(row, d, merged.o, 1.0f / merged.sum);
      else
        write_partial(row, d, merged.o, merged.max, merged.sum);
    }

    if (cluster > 1) {
      // The cluster's merge: every rank's state is visible after the barrier; a head group's ranks
      // (cluster ranks first_peer ..) share its (row, 4 columns) units, and each adds the ranks'
      // states in rank order, so the bits depend on the split alone. A sequence of one split is
      // done here; otherwise this is the split's partial, counted as below.
      cluster_barrier();
      next_item = *cluster_peer(&claimed, 0);
      const int first_peer = cluster_rank - rank;
      const int my_units = idle ? 0 : n_rows * kQuads;
      for (int idx = rank * Cfg::kThreads + tid; idx < my_units; idx += ranks * Cfg::kThreads) {
        const int row = idx / kQuads;
        const int d = (idx % kQuads) * 4;
        // All the ranks' loads are issued before their uses (unrolled to the largest cluster).
        // Rank 0 always has the split's first key, so the merged max is finite.
        float rank_max[kMaxClusterRanks], rank_sum[kMaxClusterRanks];
        float4 o[kMaxClusterRanks];
        #pragma unroll
        for (int r = 0; r < kMaxClusterRanks; ++r) {
          if (r >= ranks) break;
          const float* stats = cluster_peer(rank_stats, first_peer + r);
          rank_max[r] = stats[row * 2];
          rank_sum[r] = stats[row * 2 + 1];
          o[r] = *reinterpret_cast<const float4*>(cluster_peer(rank_o, first_peer + r) + row * HEAD_DIM + d);
        }
        // A rank without keys has max -inf, sum 0 and o 0: weight 0.
        const SoftmaxState merged = merge_softmax_parts<kMaxClusterRanks>(
            ranks, [&](int r) { return SoftmaxState{rank_max[r], rank_sum[r], o[r]}; });
        if (n_splits == 1)
          write_output(row, d, merged.o, 1.0f / merged.sum);
        else
          write_partial(row, d, merged.o, merged.max, merged.sum);
      }
      // No rank leaves (and reuses its shared memory) while another may still read it. A sequence of
      // one split orders nothing else here (the cluster's item is one sequence, so every rank takes
      // the same branch); a partial must be visible before rank 0 counts it in.
      if (n_splits == 1) {
        // The relaxed arrive orders no load either: the claim read from rank 0 must have landed
        // (rank 0 writes the next one after this barrier), so it is used here (claims are never
        // negative), and the instruction that reads the register waits for it.
        if (next_item < 0) __trap();
        if constexpr (FOLD_O) {
          // Every rank's stores are visible before the group's rank 0 announces them.
          cluster_barrier();
          if (tid == 0 && rank == 0 && !idle) announce_group_output(fold.ready, group_index);
        } else {
          cluster_barrier_relaxed();
        }
      } else {
        if (!idle) __threadfence();
        cluster_barrier();
      }
      if (tid == 0) trace_mark(trace, 2);  // the split's output (or partial) is written
      if (n_splits == 1 || rank != 0 || idle) continue;
      // The group's rank 0 counts the split in, as a lone CTA does below (every rank fenced its
      // partial writes before the barrier).
    } else {
      // Each split counts itself in for its head group. Every thread fences its own partial
      // writes before the count, and the merging CTA reads the partials from L2.
      if (n_splits > 1) __threadfence();
      __syncthreads();
      next_item = claimed;
      if (n_splits == 1) {
        if (tid == 0) trace_mark(trace, 2);
        if (FOLD_O && tid == 0) announce_group_output(fold.ready, group_index);
        continue;
      }
    }
    if (tid == 0) {
      int* counter = reinterpret_cast<int*>(record) + group_index;
      merges = atomicAdd(counter, 1) == n_splits - 1;
      if (merges) atomicExch(counter, 0);  // ready for the next launch
      __threadfence();
    }
    __syncthreads();
    if (tid == 0) trace_mark(trace, 2);  // the split's partial is written and counted
    if (!merges) continue;

    merge_split_partials<T, HEAD_DIM, Cfg::kThreads>(lse_all + static_cast<int64_t>(head0) * rule.max_splits,
                                                     out_all + static_cast<int64_t>(head0) * rule.max_splits * HEAD_DIM,
                                                     rule.max_splits, n_splits, n_rows, group_out, tid);
    if constexpr (FOLD_O) {
      __syncthreads();
      if (tid == 0) announce_group_output(fold.ready, group_index);
    }
  }  // items

  finish_decode_launch<T, HEAD_DIM, Cfg::kThreads>(kv_lens, batch, capacity, rule, n_heads, out, waited, next_unclaimed,
                                                  ctas_done, launch_items < 0, trace, tid,
                                                  static_cast<int>(units << cluster_shift),
                                                  FOLD_O ? fold.ready : nullptr, n_groups);
}

// Clusters of `ranks` CTAs of `kernel` (with Cfg's block and shared memory) resident at once; 0 when
// the query fails.
template <class Cfg, class Kernel>
int active_clusters(Kernel kernel, int ranks) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(ranks));
  config.blockDim = dim3(Cfg::kThreads);
  config.dynamicSmemBytes = Cfg::kSmemBytes;
  LaunchAttributes cluster_only(ranks, false);
  config.attrs = cluster_only.attrs;
  config.numAttrs = cluster_only.count;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) clusters = 0;
  cudaGetLastError();
  return clusters;
}

// One wave of the split kernel: the CTAs (clusters of `ranks`) that fit on the GPU at once, queried
// once per kernel instance and cluster size (a failed query gives one CTA per SM, one cluster per
// `ranks` SMs).
template <class T, int HEAD_DIM, int STAGES>
int decode_wave(int ranks) {
  using Cfg = DecodeConfig<HEAD_DIM, STAGES>;
  auto split_kernel = decode_split_kernel<T, HEAD_DIM, STAGES>;
  static std::atomic<int> wave_units[kMaxClusterRanks + 1] = {};
  int wave = wave_units[ranks].load(std::memory_order_relaxed);
  if (wave != 0) return wave;
  if (cudaFuncSetAttribute(split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) != cudaSuccess)
    cudaGetLastError();
  const int queried_sms = device_limits().sm_count;
  const int sms = queried_sms > 0 ? queried_sms : 132;
  int per_sm = 0;
  if (ranks == 1) {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, split_kernel, Cfg::kThreads, Cfg::kSmemBytes) !=
        cudaSuccess)
      per_sm = 1;
    wave = std::max(1, sms * std::max(1, per_sm));
  } else {
    const int clusters = active_clusters<Cfg>(split_kernel, ranks);
    wave = std::max(1, clusters > 0 ? clusters : sms / ranks);
  }
  wave_units[ranks].store(wave, std::memory_order_relaxed);
  return wave;
}

// Clusters of the fold's kernel instance resident at once (queried once per instance; 0 when the
// query fails).
template <class T, int HEAD_DIM, int STAGES>
int fold_wave_clusters() {
  using Cfg = DecodeConfig<HEAD_DIM, STAGES>;
  static std::atomic<int> cached{-1};
  int wave = cached.load(std::memory_order_relaxed);
  if (wave >= 0) return wave;
  auto kernel = decode_split_kernel<T, HEAD_DIM, STAGES, true>;
  wave = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) == cudaSuccess
             ? active_clusters<Cfg>(kernel, kDecodeOFoldGroups)
             : 0;
  cudaGetLastError();
  cached.store(wave, std::memory_order_relaxed);
  return wave;
}

// The fold's fixed arguments for `shape` and `plan` in a kernel of `smem_bytes` of shared memory,
// or why it cannot run (the pointers and the grid are the launcher's). Called only for the
// tensor-core kernels' head_dim, 64 or 128.
Status fold_setup(const AttentionShape& shape, const DecodeAttentionPlan& plan, const PackedWeight& o, int smem_bytes,
                  DecodeOFoldArgs& args) {
  const int group = shape.n_heads / shape.n_kv_heads;
  const int n_groups = shape.n_kv_heads * ((group + 15) / 16);
  const auto refuse = [](auto&&... what) {
    return Status::error(str_cat("decode_attention: the O projection cannot run in its launch: ", what...));
  };
  if (plan.cluster_ranks != kDecodeOFoldGroups) return refuse("clusters of ", plan.cluster_ranks, ", not 8");
  if (n_groups != kDecodeOFoldGroups || group > 16) return refuse(n_groups, " head groups, not 8");
  const int64_t q_dim = static_cast<int64_t>(shape.n_heads) * shape.head_dim;
  if (o.cols != q_dim || o.rows <= 0)
    return refuse("weights of ", o.rows, "x", o.cols, " against attention's ", q_dim, " outputs");
  if (o.tile_group != 1) return refuse("weights in tile groups of ", o.tile_group, " (1 needed)");
  args.piece_tiles = group * shape.head_dim / 16;
  args.k_tiles = mma_tiles(q_dim);
  args.rows = o.rows;
  args.row_tiles = mma_tiles(o.rows);
  args.slice_tiles = 0;
  for (int tiles = 8; tiles >= 1 && args.slice_tiles == 0; tiles /= 2)
    if (decode_o_fold_smem(tiles, args.piece_tiles) <= smem_bytes) args.slice_tiles = tiles;
  if (args.slice_tiles == 0) return refuse("a piece of ", args.piece_tiles, " k-tiles does not fit ", smem_bytes, " bytes");
  args.o_clusters = static_cast<int>((args.row_tiles + args.slice_tiles - 1) / args.slice_tiles);
  return Status();
}

}  // namespace

DecodeVariant choose_decode_variant(int head_dim, int max_smem_per_block) {
  // The kernel's registers (~204 per thread at head_dim 128) allow 2 CTAs per multiprocessor with
  // 2 or 3 K/V stages, so the third stage (one more 64-key load in flight) costs no residency;
  // 4 stages (132 KB) allow one CTA. Measured on H200 (docs/kernels/attention.md): 3 stages within
  // 2% of the best at every batch and depth; 4 stages 1-3% faster at batch 1 with short sequences
  // and 40-60% slower at 32k tokens, so they are not used: one graph serves every length. The
  // stage count changes no bit. Three stages need 100 KB at head_dim 128, more than some GPUs
  // give a block: two there.
  const int three_stage_smem = head_dim == 64 ? DecodeConfig<64, 3>::kSmemBytes : DecodeConfig<128, 3>::kSmemBytes;
  return DecodeVariant{three_stage_smem <= max_smem_per_block ? 3 : 2};
}

int decode_wave_units(const DecodeVariant& variant, int head_dim, int cluster_ranks) {
  int wave = 0;
  const auto query = [&](auto head_dim_tag) {
    constexpr int kHeadDim = decltype(head_dim_tag)::value;
    return dispatch_stages(variant.stages, [&](auto stages_tag) -> Status {
      wave = decode_wave<__nv_bfloat16, kHeadDim, decltype(stages_tag)::value>(cluster_ranks);
      return Status();
    });
  };
  (void)dispatch_head_dim(head_dim, query, [] { return Status(); });
  return wave;
}

Status decode_attention_variant(const DecodeVariant& variant, const void* q, void* out, DType dtype,
                                const AttentionShape& shape, const PagedKvView& kv, const int32_t* kv_lens, int batch,
                                const DecodeAttentionPlan& plan, void* workspace, cudaStream_t stream,
                                const DecodeOFold* fold) {
  if (Status s = check_common(q, out, shape, kv, batch); !s.ok()) return s;
  if (plan.split_tokens <= 0 || plan.split_tokens % kv.layout.block_size != 0)
    return Status::error(str_cat("decode_attention: split_tokens=", plan.split_tokens,
                                 " must be a positive multiple of block_size=", kv.layout.block_size));
  if (plan.split_tokens / kv.layout.block_size + 1 > kDecodeMaxSplitBlocks)
    return Status::error(str_cat("decode_attention: split_tokens=", plan.split_tokens, " spans more than ",
                                 kDecodeMaxSplitBlocks - 1, " blocks of ", kv.layout.block_size,
                                 " tokens; use at most ", (kDecodeMaxSplitBlocks - 1) * kv.layout.block_size));
  if (plan.max_splits_per_seq <= 0)
    return Status::error(str_cat("decode_attention: max_splits_per_seq=", plan.max_splits_per_seq,
                                 " must be > 0 (ceil(max_seq_len / split_tokens))"));
  const int ranks = plan.cluster_ranks;
  if (ranks != 1 && ranks != 2 && ranks != 4 && ranks != kMaxClusterRanks)
    return Status::error(str_cat("decode_attention: cluster_ranks=", ranks, " (supported: 1, 2, 4, 8)"));
  if (ranks > 1 && plan.min_rank_keys < 16)
    return Status::error(str_cat("decode_attention: min_rank_keys=", plan.min_rank_keys, " must be >= 16"));
  if (ranks > 1 && !clusters_supported())
    return Status::error(str_cat("decode_attention: cluster_ranks=", ranks,
                                 " needs thread-block clusters (sm_90 code on an sm_90+ GPU); use 1 here"));
  if (batch == 0) return Status();
  if (!kv_lens) return Status::error("decode_attention: kv_lens must be set");
  if (!workspace || reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    return Status::error(
        "decode_attention: workspace must be set and 16-byte aligned "
        "(size it with decode_attention_workspace_bytes)");
  if (fold != nullptr) {
    if (batch != 1) return Status::error(str_cat("decode_attention: the O projection runs in its launch at batch 1, not ", batch));
    if (variant.stacked) return Status::error("decode_attention: the O projection cannot run in the stacked kernel's launch");
    if (shape.head_dim != 64 && shape.head_dim != 128)
      return Status::error(str_cat("decode_attention: the O projection runs in the launch of head_dim 64 or 128, not ",
                                   shape.head_dim));
    if (fold->o.dtype != dtype || fold->o.data == nullptr || fold->ready == nullptr || fold->out.residual == nullptr)
      return Status::error("decode_attention: the folded O projection needs weights of the activations' dtype, "
                           "its ready flags and a residual stream");
  }
  if (variant.stacked && ranks > 1)
    return decode_attention_stacked(variant, q, out, dtype, shape, kv, kv_lens, batch, plan, workspace, stream);
  const int group = shape.n_heads / shape.n_kv_heads;
  const int head_tiles = (group + 15) / 16;
  const float scale_log2 = shape.scale * 1.4426950408889634f;
  const bool pdl = plan.pdl;  // launch_kernel drops it where this build's code has no griddepcontrol

  return dispatch_dtype(dtype, [&](auto type_tag) {
    using T = decltype(type_tag);
    const auto generic = [&] { return decode_attention_generic<T>(q, out, shape, kv, kv_lens, batch, plan, stream); };
    const auto tensor_core = [&](auto head_dim_tag) {
      constexpr int kHeadDim = decltype(head_dim_tag)::value;
      return dispatch_stages(variant.stages, [&](auto stages_tag) -> Status {
        constexpr int kStages = decltype(stages_tag)::value;
        using Cfg = DecodeConfig<kHeadDim, kStages>;
        auto split_kernel = decode_split_kernel<T, kHeadDim, kStages>;
        FUSELM_CUDA_RETURN(
            cudaFuncSetAttribute(split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
        const int wave = decode_wave<T, kHeadDim, kStages>(ranks);
        // No more CTAs (clusters) than the step can have items.
        const int n_groups = shape.n_kv_heads * head_tiles;
        const int64_t most_items = decode_items_bound(batch, n_groups, plan, ranks);
        const int64_t units =
            std::min<int64_t>(variant.ctas > 0 ? std::max(1, variant.ctas / ranks) : wave, most_items);
        const DecodeSplitRule rule{plan.split_tokens, ranks, plan.max_splits_per_seq, plan.min_rank_keys};
        const auto launch = [&](auto kernel, int64_t grid_units, const DecodeOFoldArgs& fold_args) {
          return launch_kernel_in_clusters(
              kernel, dim3(static_cast<unsigned>(grid_units * ranks)), dim3(Cfg::kThreads), Cfg::kSmemBytes, stream,
              pdl, ranks, static_cast<const uint16_t*>(q), static_cast<const uint16_t*>(kv.k),
              static_cast<const uint16_t*>(kv.v), kv.layout, kv.block_tables, kv.max_blocks_per_seq, kv_lens, batch,
              shape.n_heads, group, head_tiles, n_groups, rule, scale_log2, decode_workspace_layout(shape, plan),
              static_cast<uint8_t*>(workspace), static_cast<uint16_t*>(out), plan.trace, fold_args);
        };
        if (fold == nullptr) {
          FUSELM_CUDA_RETURN(launch(split_kernel, units, DecodeOFoldArgs{}));
          return Status();
        }
        // The fold's CTAs wait for the attending ones: every cluster of the launch must be resident
        // at once, so the attending clusters are capped (any count gives the same bits).
        if constexpr (kStages == 3) {
          DecodeOFoldArgs args;
          if (Status s = fold_setup(shape, plan, fold->o, Cfg::kSmemBytes, args); !s.ok()) return s;
          auto fold_kernel = decode_split_kernel<T, kHeadDim, kStages, true>;
          FUSELM_CUDA_RETURN(
              cudaFuncSetAttribute(fold_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
          const int resident = fold_wave_clusters<T, kHeadDim, kStages>();
          args.attention_units = std::min<int64_t>(units, resident - args.o_clusters);
          if (args.attention_units < 1)
            return Status::error(str_cat("decode_attention: the folded O projection's ", args.o_clusters,
                                         " clusters leave no room for attention's (", resident, " resident at once)"));
          args.w = static_cast<const uint4*>(fold->o.data);
          args.x = out;
          args.out = fold->out;
          args.ready = fold->ready;
          FUSELM_CUDA_RETURN(launch(fold_kernel, args.attention_units + args.o_clusters, args));
          return Status();
        } else {
          return Status::error(str_cat("decode_attention: the O projection runs in a 3-stage kernel's launch, not ",
                                       kStages, " stages"));
        }
      });
    };
    return dispatch_head_dim(shape.head_dim, tensor_core, generic);
  });
}

}  // namespace attention_detail

size_t decode_attention_workspace_bytes(const AttentionShape& shape, const DecodeAttentionPlan& plan, int max_batch) {
  if (max_batch <= 0 || shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.head_dim <= 0 ||
      plan.max_splits_per_seq <= 0)
    return 0;
  return attention_detail::DecodeWorkspaceLayout::kHeaderBytes +
         static_cast<size_t>(max_batch) * attention_detail::decode_workspace_layout(shape, plan).record_bytes;
}

Status decode_attention_init_workspace(void* workspace, const AttentionShape& shape, const DecodeAttentionPlan& plan,
                                       int max_batch, cudaStream_t stream) {
  if (decode_attention_workspace_bytes(shape, plan, max_batch) == 0) return Status();
  if (!workspace) return Status::error("decode_attention_init_workspace: workspace must be set");
  const attention_detail::DecodeWorkspaceLayout layout = attention_detail::decode_workspace_layout(shape, plan);
  // The header and the counters at the head of each sequence's record: the partials need no
  // initial value.
  FUSELM_CUDA_RETURN(cudaMemsetAsync(workspace, 0, attention_detail::DecodeWorkspaceLayout::kHeaderBytes, stream));
  FUSELM_CUDA_RETURN(cudaMemset2DAsync(static_cast<uint8_t*>(workspace) + attention_detail::DecodeWorkspaceLayout::kHeaderBytes,
                                       static_cast<size_t>(layout.record_bytes), 0,
                                       static_cast<size_t>(layout.lse_offset), static_cast<size_t>(max_batch), stream));
  return Status();
}

bool decode_o_fold_fits(const AttentionShape& shape, const DecodeAttentionPlan& plan, const PackedWeight& o_weights) {
  using namespace attention_detail;
  if (!clusters_supported() || (o_weights.dtype != DType::BF16 && o_weights.dtype != DType::F16)) return false;
  if (choose_decode_variant(shape.head_dim, device_limits().max_smem_per_block).stages != 3) return false;
  bool fits = false;
  const auto check = [&](auto head_dim_tag) {
    constexpr int kHeadDim = decltype(head_dim_tag)::value;
    DecodeOFoldArgs args;
    if (!fold_setup(shape, plan, o_weights, DecodeConfig<kHeadDim, 3>::kSmemBytes, args).ok()) return Status();
    const int resident = o_weights.dtype == DType::BF16 ? fold_wave_clusters<__nv_bfloat16, kHeadDim, 3>()
                                                        : fold_wave_clusters<__half, kHeadDim, 3>();
    fits = resident - args.o_clusters >= 1;
    return Status();
  };
  (void)dispatch_head_dim(shape.head_dim, check, [] { return Status(); });
  return fits;
}

Status decode_attention(const void* q, void* out, DType dtype, const AttentionShape& shape, const PagedKvView& kv,
                        const int32_t* kv_lens, int batch, const DecodeAttentionPlan& plan, void* workspace,
                        cudaStream_t stream, const DecodeOFold* fold) {
  // 0 (a failed query) chooses two stages, which every GPU can hold.
  attention_detail::DecodeVariant variant =
      attention_detail::choose_decode_variant(shape.head_dim, device_limits().max_smem_per_block);
  if (plan.cluster_ranks > 1 && plan.stacked_from_batch > 0 && batch >= plan.stacked_from_batch) {
    attention_detail::DecodeVariant stacked = variant;
    stacked.stacked = true;
    stacked.stages = attention_detail::kStackedStages;
    if (attention_detail::decode_stacked_fits(stacked, shape, plan, kv.layout.block_size)) variant = stacked;
  }
  return attention_detail::decode_attention_variant(variant, q, out, dtype, shape, kv, kv_lens, batch, plan, workspace,
                                                    stream, fold);
}

}  // namespace fuselm
