#pragma once
// CPU reference kernels: fp32 compute on weights of any stored dtype (F32, F16, BF16; Q8_0 for
// matmul and embedding, whose rows are whole 32-value blocks).
// Clear over clever, threaded with OpenMP; every GPU kernel is tested against these.
// Kernels know nothing of the model: they take raw buffers, dtypes and sizes.
#include <cstdint>

#include "core/dtype.h"

namespace fuselm::cpu {

// A row-major [rows][cols] matrix (or a vector: rows = 1) in its stored dtype.
struct MatrixRef {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
};

// out[m][n] = sum_k x[m][k] * w[n][k]  (x: [m, w.cols] fp32; out: [m, w.rows] fp32).
void matmul(const float* x, int64_t m, const MatrixRef& w, float* out);

// out[i] = table[ids[i]]  (out: [n, table.cols]); ids must be in range.
void embedding(const MatrixRef& table, const int32_t* ids, int64_t n, float* out);

// out[t] = x[t] / rms(x[t]) * weight, for n rows of `dim` values; out may alias x.
void rmsnorm(const float* x, const MatrixRef& weight, float eps, int64_t n, int64_t dim, float* out);

// In-place rotate-half RoPE on x: [n_tokens, n_heads, head_dim]. Pair i is (i, i + head_dim/2),
// rotated by positions[t] * inv_freq[i].
void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* inv_freq);

// out = silu(gate) * up, n values.
void swiglu(const float* gate, const float* up, int64_t n, float* out);

// Causal GQA attention of n_tokens queries against a sequence's cache.
// q: [n_tokens, n_heads, head_dim]; k, v: [kv_len, n_kv_heads, head_dim] (cache positions 0..kv_len-1);
// query t attends to cache positions 0..positions[t]. out: [n_tokens, n_heads, head_dim].
void attention(const float* q, const float* k, const float* v, const int32_t* positions,
               int64_t n_tokens, int64_t kv_len, int n_heads, int n_kv_heads, int head_dim,
               float scale, float* out);

// out[i] += x[i]
void add_inplace(float* out, const float* x, int64_t n);

}  // namespace fuselm::cpu
