#include "kernels/cuda/gemm.h"

#include <cublasLt.h>

#include <map>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace fuselm {
namespace {

Status lt_status(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status();
  return Status::error(str_cat(what, " failed: ", cublasLtGetStatusString(s), " (", file, ":", line, ")"));
}

#define FUSELM_LT_RETURN(call)                                                 \
  do {                                                                         \
    ::fuselm::Status s_ = lt_status((call), #call, __FILE__, __LINE__);        \
    if (!s_.ok()) return s_;                                                   \
  } while (0)

cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

std::string describe(const GemmShape& s) {
  return str_cat("n=", s.n, " k=", s.k, " in=", dtype_name(s.in), " out=", dtype_name(s.out));
}

Status check_shape(const GemmShape& s) {
  if (s.n <= 0 || s.k <= 0) return Status::error(str_cat("gemm: bad shape ", describe(s)));
  if (s.in != DType::BF16 && s.in != DType::F16)
    return Status::error(str_cat("gemm: unsupported input dtype=", dtype_name(s.in), " (supported: bf16, f16)"));
  if (s.out != s.in && s.out != DType::F32)
    return Status::error(str_cat("gemm: unsupported output dtype=", dtype_name(s.out), " for input ",
                                 dtype_name(s.in), " (supported: the input dtype, f32)"));
  return Status();
}

// In cuBLAS's column-major terms the row-major out[m][n] is an n×m matrix D = op(A)·B with A = W seen
// as k×n (op = transpose) and B = x seen as k×m: the "TN" layout, cuBLASLt's fastest.
struct Descriptors {
  cublasLtMatmulDescOpaque_t op;
  cublasLtMatrixLayoutOpaque_t a, b, d;
};

Status make_descriptors(const GemmShape& s, int64_t m, Descriptors& d) {
  FUSELM_LT_RETURN(cublasLtMatmulDescInit(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  FUSELM_LT_RETURN(cublasLtMatmulDescSetAttribute(&d.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
  FUSELM_LT_RETURN(cublasLtMatmulDescSetAttribute(&d.op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none));
  FUSELM_LT_RETURN(cublasLtMatrixLayoutInit(&d.a, cuda_data_type(s.in), s.k, s.n, s.k));
  FUSELM_LT_RETURN(cublasLtMatrixLayoutInit(&d.b, cuda_data_type(s.in), s.k, m, s.k));
  FUSELM_LT_RETURN(cublasLtMatrixLayoutInit(&d.d, cuda_data_type(s.out), s.n, m, s.n));
  return Status();
}

using ShapeKey = std::tuple<int64_t, int64_t, DType, DType>;
ShapeKey key_of(const GemmShape& s) { return {s.n, s.k, s.in, s.out}; }

struct Bucket {
  int64_t max_m = 0;  // serves every m from the previous bucket's max_m + 1 up to this
  cublasLtMatmulAlgo_t algo;
};

}  // namespace

struct GemmPlan::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<ShapeKey, std::vector<Bucket>> plans;
  int64_t queries = 0;
};

GemmPlan::GemmPlan() : impl_(std::make_unique<Impl>()) {}

GemmPlan::~GemmPlan() {
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

Status GemmPlan::init(void* workspace, size_t workspace_bytes) {
  if (impl_->handle) return Status::error("gemm: plan already initialised");
  if (workspace_bytes > 0 && (!workspace || reinterpret_cast<uintptr_t>(workspace) % 256 != 0))
    return Status::error("gemm: the workspace must be set and 256-byte aligned");
  FUSELM_LT_RETURN(cublasLtCreate(&impl_->handle));
  impl_->workspace = workspace;
  impl_->workspace_bytes = workspace_bytes;
  return Status();
}

Status GemmPlan::add(const GemmShape& shape, int64_t max_m, Choice choice) {
  if (!impl_->handle) return Status::error("gemm: init() must come before add()");
  if (Status s = check_shape(shape); !s.ok()) return s;
  if (max_m <= 0) return Status::error(str_cat("gemm: max_m=", max_m, " must be positive"));
  if (impl_->plans.count(key_of(shape)) && impl_->plans[key_of(shape)].back().max_m >= max_m) return Status();

  cublasLtMatmulPreferenceOpaque_t preference;
  FUSELM_LT_RETURN(cublasLtMatmulPreferenceInit(&preference));
  const uint64_t workspace_bytes = impl_->workspace_bytes;
  FUSELM_LT_RETURN(cublasLtMatmulPreferenceSetAttribute(&preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &workspace_bytes, sizeof workspace_bytes));
  const bool invariant = choice == Choice::BatchInvariant;
  if (invariant) {
    // Split-K reductions would make a row's rounding depend on the grid, which depends on m.
    const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    FUSELM_LT_RETURN(cublasLtMatmulPreferenceSetAttribute(&preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                          &none, sizeof none));
  }
  std::vector<Bucket> buckets;
  int64_t lo = 1;
  // Batch-invariant: one bucket, 1..max_m, chosen at max_m and checked at m = 1.
  for (int64_t hi = invariant ? max_m : 1;; hi = std::min(hi * 2, max_m)) {
    Descriptors at_hi, at_lo;
    if (Status s = make_descriptors(shape, hi, at_hi); !s.ok()) return s;
    if (Status s = make_descriptors(shape, lo, at_lo); !s.ok()) return s;
    constexpr int kRequested = 8;
    cublasLtMatmulHeuristicResult_t results[kRequested] = {};
    int found = 0;
    ++impl_->queries;
    FUSELM_LT_RETURN(cublasLtMatmulAlgoGetHeuristic(impl_->handle, &at_hi.op, &at_hi.a, &at_hi.b, &at_hi.d, &at_hi.d,
                                                    &preference, kRequested, results, &found));
    // The first (fastest predicted) answer that also runs at the bucket's smallest m.
    bool chosen = false;
    for (int i = 0; i < found && !chosen; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS || results[i].workspaceSize > impl_->workspace_bytes) continue;
      cublasLtMatmulHeuristicResult_t check = {};
      if (cublasLtMatmulAlgoCheck(impl_->handle, &at_lo.op, &at_lo.a, &at_lo.b, &at_lo.d, &at_lo.d, &results[i].algo,
                                  &check) != CUBLAS_STATUS_SUCCESS ||
          check.workspaceSize > impl_->workspace_bytes)
        continue;
      if (invariant) {
        int32_t splits = 1;
        size_t written = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                 sizeof splits, &written) != CUBLAS_STATUS_SUCCESS ||
            splits > 1)
          continue;
      }
      buckets.push_back({hi, results[i].algo});
      chosen = true;
    }
    if (!chosen)
      return Status::error(str_cat("gemm: cuBLASLt has no algorithm for m=", lo, "..", hi, " ", describe(shape),
                                   " (", found, " candidates, workspace ", impl_->workspace_bytes, " bytes)"));
    if (hi == max_m) break;
    lo = hi + 1;
  }
  impl_->plans[key_of(shape)] = std::move(buckets);
  return Status();
}

Status GemmPlan::run(const GemmShape& shape, const void* x, const void* w, void* out, int64_t m,
                     cudaStream_t stream) const {
  if (m == 0) return Status();
  auto it = impl_->plans.find(key_of(shape));
  if (it == impl_->plans.end())
    return Status::error(str_cat("gemm: no plan for ", describe(shape), "; add() it at load"));
  const std::vector<Bucket>& buckets = it->second;
  if (m < 0 || m > buckets.back().max_m)
    return Status::error(str_cat("gemm: m=", m, " outside the planned range 1..", buckets.back().max_m, " for ",
                                 describe(shape)));
  for (const void* p : {x, w, static_cast<const void*>(out)})
    if (!p || reinterpret_cast<uintptr_t>(p) % 256 != 0)
      return Status::error("gemm: x, w and out must be set and 256-byte aligned");
  const Bucket* bucket = &buckets.front();
  while (bucket->max_m < m) ++bucket;
  Descriptors d;
  if (Status s = make_descriptors(shape, m, d); !s.ok()) return s;
  const float alpha = 1.0f, beta = 0.0f;
  FUSELM_LT_RETURN(cublasLtMatmul(impl_->handle, &d.op, &alpha, w, &d.a, x, &d.b, &beta, out, &d.d, out, &d.d,
                                  &bucket->algo, impl_->workspace, impl_->workspace_bytes, stream));
  FUSELM_CUDA_RETURN_LAUNCH();
  return Status();
}

int64_t GemmPlan::heuristic_queries() const { return impl_->queries; }

}  // namespace fuselm
