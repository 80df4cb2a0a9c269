#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace fuselm::cpu {

namespace {

// Eight independent partial sums, so the compiler can vectorise the loop (a single running sum
// fixes the order and keeps it scalar). The order is fixed, so results are deterministic.
template <class Load>
float dot(const float* x, int64_t k, Load load) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += x[i + l] * load(i + l);
  }
  float tail = 0.0f;
  for (; i < k; ++i) tail += x[i] * load(i);
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

// Dot product of an fp32 vector with one stored row.
float dot_row(const float* x, const MatrixRef& w, int64_t row) {
  const int64_t k = w.cols;
  switch (w.dtype) {
    case DType::F32: {
      const float* r = static_cast<const float*>(w.data) + row * k;
      return dot(x, k, [r](int64_t i) { return r[i]; });
    }
    case DType::BF16: {
      const uint16_t* r = static_cast<const uint16_t*>(w.data) + row * k;
      return dot(x, k, [r](int64_t i) { return bf16_bits_to_f32(r[i]); });
    }
    case DType::F16: {
      const uint16_t* r = static_cast<const uint16_t*>(w.data) + row * k;
      return dot(x, k, [r](int64_t i) { return f16_bits_to_f32(r[i]); });
    }
    case DType::Q8_0: {  // rows are whole blocks: cols is a multiple of 32
      const auto* r = static_cast<const uint8_t*>(w.data) + row * (k / kQ8_0BlockSize) * kQ8_0BlockBytes;
      float acc = 0.0f;
      for (int64_t b = 0; b < k / kQ8_0BlockSize; ++b) {
        const uint8_t* block = r + b * kQ8_0BlockBytes;
        uint16_t scale_bits;
        memcpy(&scale_bits, block, 2);
        const auto* q = reinterpret_cast<const int8_t*>(block + 2);
        acc += f16_bits_to_f32(scale_bits) *
               dot(x + b * kQ8_0BlockSize, kQ8_0BlockSize, [q](int64_t i) { return static_cast<float>(q[i]); });
      }
      return acc;
    }
  }
  return 0.0f;
}

// Below this many multiply-adds a loop runs on one thread: waking a team costs more than it
// saves, and far more on a loaded machine, where every barrier can wait out a descheduled thread.
constexpr int64_t kParallelWork = int64_t{1} << 18;

}  // namespace

void matmul(const float* x, int64_t m, const MatrixRef& w, float* out) {
  const int64_t n = w.rows;
  // Rows of W outer so each weight row is read once (from memory) for every input row.
#pragma omp parallel for schedule(static) if (n * m * w.cols >= kParallelWork)
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) out[i * n + j] = dot_row(x + i * w.cols, w, j);
  }
}

void embedding(const MatrixRef& table, const int32_t* ids, int64_t n, float* out) {
  const int64_t d = table.cols;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t base = static_cast<int64_t>(ids[t]) * d;
    if (table.dtype == DType::Q8_0) {
      dequantize_q8_0(static_cast<const uint8_t*>(table.data) + dtype_bytes(DType::Q8_0, base), d, out + t * d);
      continue;
    }
    for (int64_t i = 0; i < d; ++i) out[t * d + i] = load_as_f32(table.data, table.dtype, base + i);
  }
}

void rmsnorm(const float* x, const MatrixRef& weight, float eps, int64_t n, int64_t dim, float* out) {
#pragma omp parallel for schedule(static) if (n > 1 && n * dim >= kParallelWork)
  for (int64_t t = 0; t < n; ++t) {
    const float* row = x + t * dim;
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(row[i]) * row[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / dim) + eps);
    for (int64_t i = 0; i < dim; ++i)
      out[t * dim + i] = row[i] * inv * load_as_f32(weight.data, weight.dtype, i);
  }
}

void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* inv_freq) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      const float c = std::cos(angle), s = std::sin(angle);
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void attention(const float* q, const float* k, const float* v, const int32_t* positions,
               int64_t n_tokens, int64_t kv_len, int n_heads, int n_kv_heads, int head_dim,
               float scale, float* out) {
  const int group = n_heads / n_kv_heads;
  // Work is about n_tokens * n_heads * kv_len * head_dim * 2 (scores, then the weighted sum).
#pragma omp parallel for collapse(2) schedule(static) if (n_tokens * n_heads * kv_len * head_dim * 2 >= kParallelWork)
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / group;
      const float* qv = q + (t * n_heads + h) * head_dim;
      const int64_t last = std::min<int64_t>(positions[t], kv_len - 1);
      std::vector<float> scores(last + 1);
      float max_s = -INFINITY;
      for (int64_t p = 0; p <= last; ++p) {
        const float* kv = k + (p * n_kv_heads + kvh) * head_dim;
        float s = 0.0f;
        for (int d = 0; d < head_dim; ++d) s += qv[d] * kv[d];
        scores[p] = s * scale;
        max_s = std::max(max_s, scores[p]);
      }
      double sum = 0.0;
      for (int64_t p = 0; p <= last; ++p) {
        scores[p] = std::exp(scores[p] - max_s);
        sum += scores[p];
      }
      float* o = out + (t * n_heads + h) * head_dim;
      std::fill(o, o + head_dim, 0.0f);
      for (int64_t p = 0; p <= last; ++p) {
        const float w = static_cast<float>(scores[p] / sum);
        const float* vv = v + (p * n_kv_heads + kvh) * head_dim;
        for (int d = 0; d < head_dim; ++d) o[d] += w * vv[d];
      }
    }
  }
}

void add_inplace(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += x[i];
}

}  // namespace fuselm::cpu
