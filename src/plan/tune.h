#pragma once
// `fuselm tune`: times the candidate kernel variants on this GPU at the model's shapes and returns
// the rule plan with the winners (and every candidate's timings) in place of the rule choices.
//
// Decode GEMMs: every variant of skinny_gemm_variants() for each op, at each token count a decode
// bucket launches with (m = min(bucket, 16)); the winner per op is the variant with the least
// total time over the decode buckets, one launch per 16 sequences of a bucket. One variant per op,
// never per bucket: a request's bits must not depend on its batch. Weights are random, at the
// model's shapes, in enough rotating copies that no launch is served from L2.
// Decode attention: each candidate split size at a few (batch, KV depth) cases; the winner has the
// least mean ratio to the fastest split of each case, so every case counts once.
// Timings are CUDA-event medians per launch. The GEMMs are timed with the plain store epilogue:
// the fused epilogues write m rows of outputs and leave the weight stream, which sets the time,
// unchanged.
#include <functional>
#include <string>
#include <vector>

#include "model/config.h"
#include "plan/plan.h"

namespace fuselm {

struct TuneOptions {
  int reps = 15;   // timed repetitions of each candidate at each point; the median is kept
  int warmup = 3;  // untimed repetitions before them
  std::vector<int> split_candidates = {128, 256, 512};
  std::vector<int> attention_batches = {1, 16, 64};       // those above limits.max_batch are left out
  std::vector<int> attention_depths = {512, 2048, 8192};  // capped at limits.max_seq_len
};

using TuneLog = std::function<void(const std::string& line)>;

// Needs a CUDA GPU: throws Error saying so when this build has no CUDA backend or no device is usable.
Plan tune_plan(const ModelConfig& config, DType dtype, const PlanLimits& limits, const TuneOptions& options = {},
               const TuneLog& log = {});

}  // namespace fuselm
