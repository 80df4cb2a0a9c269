#pragma once
// CUDA-core fallback for the head_dims the tensor-core kernels do not cover (any even value in
// 8..kGenericMaxHeadDim other than 64 and 128), e.g. the 16, 32, 80, 96 and 256 of small models.
// Reached only through dispatch_head_dim from prefill_attention / decode_attention, after their
// host checks; T is __nv_bfloat16 or __half (instantiated in attention_generic.cu).
//
// One CTA of kGenericThreads per (query token, head) for prefill and per (sequence, head) for
// decode. Same semantics and guarantees as the fast kernels (attention.h): causal over the paged
// cache, fp32 math, no atomics, a reduction order that depends only on the sequence's own
// lengths (so outputs are bitwise independent of the batch), kv_len 0 in decode gives zeros and
// lengths that contradict the block table give NaN. Decode needs no workspace: there are no splits.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/paged_kv.h"

namespace fuselm::attention_detail {

template <class T>
Status prefill_attention_generic(const void* q, void* out, const AttentionShape& shape, const PagedKvView& kv,
                                 const int32_t* q_starts, const int32_t* kv_lens, int batch, int max_q_len,
                                 cudaStream_t stream);

template <class T>
Status decode_attention_generic(const void* q, void* out, const AttentionShape& shape, const PagedKvView& kv,
                                const int32_t* kv_lens, int batch, const DecodeAttentionPlan& plan,
                                cudaStream_t stream);

}  // namespace fuselm::attention_detail
