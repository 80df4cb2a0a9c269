#pragma once
// What a plan's names mean to the kernels (CUDA builds): variant names resolved in the kernels' own
// lists, and the launch parameters an engine passes on. Resolving happens once, at load.
#include <cuda_runtime.h>

#include <string_view>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/skinny_gemm.h"
#include "plan/plan.h"

namespace fuselm {

// The identity check_plan_matches compares, from properties the caller already has.
GpuIdentity gpu_identity(const cudaDeviceProp& prop);

// The variant of skinny_gemm_variants() called `name`; throws Error listing the variants there are.
SkinnyGemmVariant find_skinny_gemm_variant(std::string_view name);

// The decode GEMM variants `plan` gives `op` (one of kDecodeGemmOps), resolved.
SkinnyGemmChoice plan_skinny_gemm_choice(const Plan& plan, PlanOp op);

// decode_attention's plan for sequences of up to `max_seq_len` positions, split as `plan` says.
DecodeAttentionPlan plan_decode_attention(const Plan& plan, int max_seq_len);

}  // namespace fuselm
