#include "plan/cuda/plan_cuda.h"

#include <cuda_runtime.h>

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"

namespace fuselm {

GpuIdentity gpu_identity(const cudaDeviceProp& prop) {
  return {prop.name, prop.major, prop.minor, prop.multiProcessorCount, static_cast<uint64_t>(prop.totalGlobalMem)};
}

GpuIdentity query_gpu_identity() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    fail("no CUDA device is usable here (", err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found none",
         ")");
  }
  int device = 0;
  FUSELM_CUDA_THROW(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  FUSELM_CUDA_THROW(cudaGetDeviceProperties(&prop, device));
  return gpu_identity(prop);
}

SkinnyGemmVariant find_skinny_gemm_variant(std::string_view name) {
  std::string known;
  for (const SkinnyGemmVariant& v : skinny_gemm_variants()) {
    const std::string n = v.name();
    if (n == name) return v;
    known += str_cat(known.empty() ? "" : ", ", n);
  }
  fail("decode GEMM variant '", name, "' is not one this build's kernels have (", known,
       "); make the plan again with this build (`fuselm tune` or `fuselm plan --json`)");
}

SkinnyGemmChoice plan_skinny_gemm_choice(const Plan& plan, PlanOp op) {
  const DecodeGemmChoice& c = plan.decode_gemm(op);
  return {find_skinny_gemm_variant(c.variant), find_skinny_gemm_variant(c.single_token_variant), c.balance_sms,
          c.single_token_balance_sms};
}

DecodeAttentionPlan plan_decode_attention(const Plan& plan, int max_seq_len) {
  const int split = plan.decode.attention.split_tokens;
  FUSELM_CHECK(split > 0 && max_seq_len > 0, "decode attention: split ", split, " and max_seq_len ", max_seq_len,
               " must be positive");
  DecodeAttentionPlan p{split, (max_seq_len + split - 1) / split};
  p.cluster_ranks = decode_attention_cluster_ranks(plan.decode.attention.kernel);  // attention.h
  p.stacked_from_batch = decode_attention_stacked_from(plan.decode.attention.kernel);
  return p;
}

}  // namespace fuselm
