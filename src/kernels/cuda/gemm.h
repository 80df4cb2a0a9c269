#pragma once
// Dense projections through cuBLASLt: out[m][n] = x[m][k] · W[n][k]ᵀ, W row-major [out][in] as
// stored, bf16 or fp16 operands, fp32 accumulation, output in the operands' dtype or fp32.
//
// A GemmPlan owns the cuBLASLt handle and picks algorithms once, at load: for each weight shape it
// queries the heuristic once per m bucket (powers of two up to the largest m) and caches the answer;
// or, batch-invariant, once for the largest m, keeping one split-K-free algorithm for every m.
// run() only looks the algorithm up; it never queries the heuristic and never allocates.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/status.h"

namespace fuselm {

struct GemmShape {
  int64_t n = 0;  // output features (W rows)
  int64_t k = 0;  // input features (W cols)
  DType in = DType::BF16;   // x and W: bf16 or f16
  DType out = DType::BF16;  // the input dtype or f32
};

class GemmPlan {
 public:
  // cuBLASLt's recommended workspace for Hopper.
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  GemmPlan();
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  // Creates the handle. `workspace` (device memory of `workspace_bytes`, 256-byte aligned) is shared
  // by every run, so runs must be ordered on one stream.
  Status init(void* workspace, size_t workspace_bytes);
  // How add() chooses: the fastest predicted algorithm per m bucket, or one algorithm for every m
  // with no split-K, so that a row's result does not depend on how many rows share the call.
  enum class Choice { FastestPerBucket, BatchInvariant };

  // Chooses and caches the algorithms for `shape` for every m in 1..max_m. Buffers passed to run()
  // must be 256-byte aligned (the heuristic is asked for that alignment).
  Status add(const GemmShape& shape, int64_t max_m, Choice choice = Choice::FastestPerBucket);
  // out = x · Wᵀ with x: [m][k], w: [n][k], out: [m][n] (row-major, dense). `shape` must have been
  // added with max_m >= m.
  Status run(const GemmShape& shape, const void* x, const void* w, void* out, int64_t m, cudaStream_t stream) const;

  // Number of heuristic queries made so far (they all happen inside add()).
  int64_t heuristic_queries() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fuselm
