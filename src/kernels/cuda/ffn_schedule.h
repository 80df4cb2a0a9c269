#pragma once
// Which CTA of the one-launch FFN (skinny_ffn.h) computes what. Host code with no CUDA, so the
// schedule is tested without a GPU.
//
// The launch is persistent: one CTA per SM (every CTA resident at once), each working through its
// own list of jobs, all of its gate/up jobs before any down job. A job is one round of the CTA's
// warps over (row tile, K piece) pairs of one matrix: with the matrix cut into `pieces` pieces of K
// (its rounding class, see skinny_rounding_class in plan/plan.h), warp w takes piece w % pieces of
// the job's tile w / pieces. So a gate/up job of a k2 matrix on 8 warps covers 4 row tiles and a
// down job of a k8 matrix covers 1.
//
// Jobs go to the CTA with the least work so far (in 16-row x 16-column weight tiles), gate/up jobs
// in row order first: the gate/up tiles that feed the first down pieces are done first, and the
// down jobs fill the CTAs that got fewer gate/up tiles.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/hd.h"

namespace fuselm {

// A job, as the kernel reads it: the first row tile, with this bit set for a down job.
inline constexpr int32_t kFfnDownJob = int32_t{1} << 30;

// K ranges, in 16-wide k-tiles, of the pieces a rounding class of `pieces` cuts K into: each piece
// takes ceil(k_tiles / pieces) k-tiles (the last may take fewer, or none), as the skinny GEMM's
// K split does (k_tiles_per_rank in skinny_gemm_kernels.cuh).
FUSELM_HD int64_t ffn_piece_k_tiles(int64_t k_tiles, int pieces) { return (k_tiles + pieces - 1) / pieces; }

// The down piece that activation row tile `gate_up_tile` feeds: a gate/up tile holds 8 activations
// (gate rows 0-7, up rows 8-15), so tiles 2j and 2j + 1 make the down projection's k-tile j.
FUSELM_HD int ffn_down_piece_of(int64_t gate_up_tile, int64_t down_piece_k_tiles) {
  return static_cast<int>(gate_up_tile / 2 / down_piece_k_tiles);
}

// Gate/up tiles that down piece p waits for (those of its k-tiles, within the matrix).
FUSELM_HD int64_t ffn_tiles_feeding(int piece, int64_t down_piece_k_tiles, int64_t gate_up_tiles) {
  const int64_t first = 2 * piece * down_piece_k_tiles;
  const int64_t end = first + 2 * down_piece_k_tiles;
  const int64_t last = end < gate_up_tiles ? end : gate_up_tiles;
  return last > first ? last - first : 0;
}

struct FfnScheduleShape {
  int64_t gate_up_tiles = 0;    // row tiles of the gate/up matrix (2 * ffn / 16)
  int64_t gate_up_k_tiles = 0;  // hidden / 16
  int gate_up_pieces = 1;       // its rounding class's K pieces
  int64_t down_tiles = 0;       // hidden / 16
  int64_t down_k_tiles = 0;     // ffn / 16
  int down_pieces = 1;
  int warps = 8;                // warps a CTA; a multiple of both piece counts
  int ctas = 0;
};

// Per CTA c, jobs[offsets[c] .. offsets[c + 1]).
struct FfnSchedule {
  std::vector<int32_t> offsets;
  std::vector<int32_t> jobs;
  int64_t max_tiles = 0;  // the most weight tiles a CTA streams (the launch's critical path)
};

inline FfnSchedule make_ffn_schedule(const FfnScheduleShape& s) {
  FfnSchedule out;
  if (s.ctas <= 0 || s.warps <= 0 || s.gate_up_pieces <= 0 || s.down_pieces <= 0) return out;
  const int gate_up_slots = s.warps / s.gate_up_pieces, down_slots = s.warps / s.down_pieces;
  std::vector<int64_t> load(static_cast<size_t>(s.ctas), 0);
  std::vector<std::vector<int32_t>> per_cta(static_cast<size_t>(s.ctas));
  auto assign = [&](int64_t first, int64_t tiles, int64_t k_tiles, bool down) {
    // The least loaded CTA; the lowest index among equals, so equal jobs go round the CTAs in order.
    const size_t c = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[c] += tiles * k_tiles;
    per_cta[c].push_back(static_cast<int32_t>(first) | (down ? kFfnDownJob : 0));
  };
  for (int64_t t = 0; t < s.gate_up_tiles; t += gate_up_slots)
    assign(t, std::min<int64_t>(gate_up_slots, s.gate_up_tiles - t), s.gate_up_k_tiles, false);
  for (int64_t t = 0; t < s.down_tiles; t += down_slots)
    assign(t, std::min<int64_t>(down_slots, s.down_tiles - t), s.down_k_tiles, true);
  out.offsets.push_back(0);
  for (const auto& jobs : per_cta) {
    out.jobs.insert(out.jobs.end(), jobs.begin(), jobs.end());
    out.offsets.push_back(static_cast<int32_t>(out.jobs.size()));
  }
  out.max_tiles = *std::max_element(load.begin(), load.end());
  return out;
}

}  // namespace fuselm
