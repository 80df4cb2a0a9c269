#pragma once
// Row gather: out[i] = table[ids[i]], converted from the table's dtype to the output's. Used for the
// token embedding (ids = tokens) and to pick the rows that need logits (ids = row indices).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace fuselm {

// table: [rows][dim] in table_dtype; ids: device, n entries; out: [n][dim] in out_dtype.
// Both dtypes may be f32, f16 or bf16. An id outside [0, rows) yields a row of NaN rather than a
// read out of bounds, so a bad id is visible in the output.
Status embedding(const void* table, DType table_dtype, int64_t rows, int64_t dim, const int32_t* ids, int64_t n,
                 void* out, DType out_dtype, cudaStream_t stream);

}  // namespace fuselm
