#include "kernels/cuda/embedding.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"

namespace fuselm {
namespace {

using namespace device;

// One block per output row; kVectorized moves 8 elements per access (dim % 8 == 0, aligned rows).
template <class TableT, class OutT, bool kVectorized>
__global__ void embedding_kernel(const TableT* __restrict__ table, int64_t rows, int64_t dim,
                                 const int32_t* __restrict__ ids, OutT* __restrict__ out) {
  const int64_t i = blockIdx.x;
  const int32_t id = ids[i];
  OutT* dst = out + i * dim;
  if (id < 0 || id >= rows) {
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = from_float<OutT>(__int_as_float(0x7fc00000));
    return;
  }
  const TableT* src = table + static_cast<int64_t>(id) * dim;
  if constexpr (kVectorized) {
    for (int64_t c = threadIdx.x * kVec; c < dim; c += blockDim.x * kVec) {
      float v[kVec];
      load8(src + c, v);
      store8(dst + c, v);
    }
  } else {
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = from_float<OutT>(to_float(src[c]));
  }
}

}  // namespace

Status embedding(const void* table, DType table_dtype, int64_t rows, int64_t dim, const int32_t* ids, int64_t n,
                 void* out, DType out_dtype, cudaStream_t stream) {
  if (n == 0) return Status();
  if (n < 0 || rows <= 0 || dim <= 0)
    return Status::error(str_cat("embedding: bad shape rows=", rows, " dim=", dim, " n=", n));
  if (!table || !ids || !out) return Status::error("embedding: table, ids and out must be set");
  if (n > 0x7fffffff) return Status::error(str_cat("embedding: n=", n, " exceeds the grid limit"));
  const bool vectorized = dim % kVec == 0 && aligned16(table) && aligned16(out);
  return dispatch_float_dtype(table_dtype, "embedding (table)", [&](auto table_tag) {
    using TableT = decltype(table_tag);
    return dispatch_float_dtype(out_dtype, "embedding (out)", [&](auto out_tag) -> Status {
      using OutT = decltype(out_tag);
      const int threads = 128;
      const auto* t = static_cast<const TableT*>(table);
      auto* o = static_cast<OutT*>(out);
      if (vectorized)
        embedding_kernel<TableT, OutT, true><<<static_cast<unsigned>(n), threads, 0, stream>>>(t, rows, dim, ids, o);
      else
        embedding_kernel<TableT, OutT, false><<<static_cast<unsigned>(n), threads, 0, stream>>>(t, rows, dim, ids, o);
      FUSELM_CUDA_RETURN_LAUNCH();
      return Status();
    });
  });
}

}  // namespace fuselm
