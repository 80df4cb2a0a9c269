#pragma once
// `fuselm tune`: times the candidate kernel variants on this GPU at the model's shapes and returns
// the rule plan with the winners (and every candidate's timings) in place of the rule choices.
//
// Decode GEMMs: every variant of skinny_gemm_variants() for each op, at each token count a decode
// bucket launches with (m = min(bucket, 16)); pick_decode_gemm chooses from the timings. One
// rounding class per op, never per bucket: a request's bits must not depend on its batch. Weights
// are random, at the model's shapes, in enough rotating copies that no launch is served from L2.
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

// The decode GEMM choice from the timings of every candidate (GemmTiming::us at each of
// measured_m, which holds 1; total_us over the decode buckets, the batch-1 bucket being one launch
// at m = 1): per rounding class (skinny_rounding_class), the variant fastest for one token and the
// one with the least total over the buckets of 2+ sequences; the class whose pair has the least
// total wins. `reason` says so and names the runner-up class. `one_token_kernel` maps a variant to
// what runs it for one token (the kernels' single_token_twin; none = itself): the timings at m = 1
// are that kernel's, and the pick names it. Throws Error for no timings or no m = 1. Host code, so
// that CI tests it.
struct GemmPick {
  std::string variant;               // for 2+ tokens
  std::string single_token_variant;  // for one token, same class
  double total_us = 0;
  std::string reason;
};
GemmPick pick_decode_gemm(const std::vector<GemmTiming>& timings, const std::vector<int>& measured_m,
                          const std::function<std::string(const std::string&)>& one_token_kernel = {});

// Needs a CUDA GPU: throws Error saying so when this build has no CUDA backend or no device is usable.
Plan tune_plan(const ModelConfig& config, DType dtype, const PlanLimits& limits, const TuneOptions& options = {},
               const TuneLog& log = {});

}  // namespace fuselm
