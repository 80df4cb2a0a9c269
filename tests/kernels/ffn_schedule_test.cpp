// The one-launch FFN's schedule (kernels/cuda/ffn_schedule.h): every row tile of both matrices in
// exactly one job, each CTA's gate/up jobs before its down jobs (a down piece waits for gate/up
// tiles of every CTA, so a CTA must never hold a gate/up job behind a down job), and the work
// spread so that no CTA streams more than one job over the mean.
#include "kernels/cuda/ffn_schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace fuselm {
namespace {

// The 1B and 8B shapes as the rules run them: gate/up k2, down k8, 8 warps, 132 SMs.
FfnScheduleShape shape(int64_t hidden, int64_t ffn, int ctas) {
  FfnScheduleShape s;
  s.gate_up_tiles = 2 * ffn / 16;
  s.gate_up_k_tiles = hidden / 16;
  s.gate_up_pieces = 2;
  s.down_tiles = hidden / 16;
  s.down_k_tiles = ffn / 16;
  s.down_pieces = 8;
  s.warps = 8;
  s.ctas = ctas;
  return s;
}

void check_schedule(const FfnScheduleShape& s) {
  SCOPED_TRACE(::testing::Message() << "gate/up tiles " << s.gate_up_tiles << ", down tiles " << s.down_tiles
                                    << ", ctas " << s.ctas);
  const FfnSchedule sched = make_ffn_schedule(s);
  ASSERT_EQ(sched.offsets.size(), static_cast<size_t>(s.ctas) + 1);
  std::vector<int> gate_up_seen(s.gate_up_tiles), down_seen(s.down_tiles);
  const int gate_up_slots = s.warps / s.gate_up_pieces, down_slots = s.warps / s.down_pieces;
  int64_t total = 0, most = 0, biggest_job = 0;
  for (int c = 0; c < s.ctas; ++c) {
    bool down_started = false;
    int64_t load = 0;
    for (int j = sched.offsets[c]; j < sched.offsets[c + 1]; ++j) {
      const bool down = (sched.jobs[j] & kFfnDownJob) != 0;
      const int64_t first = sched.jobs[j] & ~kFfnDownJob;
      if (!down) {
        EXPECT_FALSE(down_started) << "CTA " << c << " has a gate/up job after a down job";
      }
      down_started = down_started || down;
      const int slots = down ? down_slots : gate_up_slots;
      std::vector<int>& seen = down ? down_seen : gate_up_seen;
      const int64_t k_tiles = down ? s.down_k_tiles : s.gate_up_k_tiles;
      for (int64_t t = first; t < first + slots && t < static_cast<int64_t>(seen.size()); ++t) {
        ++seen[t];
        load += k_tiles;
      }
      biggest_job = std::max(biggest_job, slots * k_tiles);
    }
    total += load;
    most = std::max(most, load);
  }
  for (int64_t t = 0; t < s.gate_up_tiles; ++t) EXPECT_EQ(gate_up_seen[t], 1) << "gate/up tile " << t;
  for (int64_t t = 0; t < s.down_tiles; ++t) EXPECT_EQ(down_seen[t], 1) << "down tile " << t;
  EXPECT_EQ(most, sched.max_tiles);
  EXPECT_LE(most, (total + s.ctas - 1) / s.ctas + biggest_job);
}

TEST(FfnSchedule, CoversEveryTileOnceGateUpFirstAndSpreadsTheWork) {
  check_schedule(shape(2048, 8192, 132));   // Llama-3.2-1B
  check_schedule(shape(4096, 14336, 132));  // Llama-3.1-8B
  check_schedule(shape(256, 680, 5));       // a tile count that is no multiple of the slots
  check_schedule(shape(256, 680, 400));     // more CTAs than jobs: many have none
  FfnScheduleShape k1 = shape(512, 1792, 7);
  k1.gate_up_pieces = 1;
  k1.down_pieces = 4;
  check_schedule(k1);
}

// On the 1B shape the jobs are equal (4 gate/up tiles of 128 k-tiles, or 1 down tile of 512), and
// 384 of them take 132 CTAs three rounds at most.
TEST(FfnSchedule, Llama1BShapeIsThreeJobsACtaAtMost) {
  const FfnSchedule s = make_ffn_schedule(shape(2048, 8192, 132));
  EXPECT_EQ(s.jobs.size(), 256u + 128u);
  EXPECT_EQ(s.max_tiles, 3 * 512);
}

TEST(FfnSchedule, PiecesAndTheTilesThatFeedThem) {
  // ffn 680: 43 down k-tiles in 8 pieces of 6 (the last of 1); 85 gate/up tiles, two per k-tile.
  EXPECT_EQ(ffn_piece_k_tiles(43, 8), 6);
  EXPECT_EQ(ffn_down_piece_of(0, 6), 0);
  EXPECT_EQ(ffn_down_piece_of(11, 6), 0);
  EXPECT_EQ(ffn_down_piece_of(12, 6), 1);
  EXPECT_EQ(ffn_down_piece_of(84, 6), 7);
  int64_t sum = 0;
  for (int p = 0; p < 8; ++p) sum += ffn_tiles_feeding(p, 6, 85);
  EXPECT_EQ(sum, 85);
  EXPECT_EQ(ffn_tiles_feeding(0, 6, 85), 12);
  EXPECT_EQ(ffn_tiles_feeding(7, 6, 85), 1);
  EXPECT_EQ(make_ffn_schedule(FfnScheduleShape{}).offsets.size(), 0u);  // no CTAs: nothing
}

}  // namespace
}  // namespace fuselm
