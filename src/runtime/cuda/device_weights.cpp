#include "runtime/cuda/device_weights.h"

#include <algorithm>
#include <memory>

#include "core/error.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/cuda_check.h"

namespace fuselm {

namespace {

constexpr size_t kAlign = 256;
constexpr size_t kStagingBytes = size_t{64} << 20;

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

void check_shape(const WeightTensor& t, std::initializer_list<int64_t> expected, const std::string& source) {
  const std::vector<int64_t> want(expected);
  // A vector may come as [n] or [1][n]; a matrix must match exactly.
  const bool ok = t.shape == want || (want.size() == 1 && t.numel() == want[0] && t.rows() * t.cols() == want[0] &&
                                      (t.rows() == 1 || t.cols() == 1));
  if (ok) return;
  std::string found, expect;
  for (int64_t d : t.shape) found += (found.empty() ? "" : ", ") + std::to_string(d);
  for (int64_t d : want) expect += (expect.empty() ? "" : ", ") + std::to_string(d);
  fail(source, ": tensor '", t.name, "' has shape [", found, "], the config implies [", expect,
       "]; the file and its config do not belong together");
}

// One source tensor and where it goes: `dst` (device) in `dst_dtype`.
struct Placement {
  const WeightTensor* tensor;
  size_t offset;
  DType dst_dtype;
};

class Uploader {
 public:
  Uploader(std::byte* base, cudaStream_t stream) : base_(base), stream_(stream) {}

  void upload(const Placement& p) {
    const WeightTensor& t = *p.tensor;
    void* dst = base_ + p.offset;
    const int64_t n = t.numel();
    if (!t.has_data()) {
      FUSELM_CHECK(t.synthetic.active, "tensor '", t.name, "' has no data and is not synthetic");
      FUSELM_THROW_IF_FAILED(
          fill_synthetic_device(t.synthetic.seed, t.synthetic.scale, t.synthetic.offset, n, p.dst_dtype, dst, stream_));
      return;
    }
    if (t.dtype == p.dst_dtype) {
      FUSELM_CUDA_THROW(cudaMemcpyAsync(dst, t.data, t.nbytes(), cudaMemcpyHostToDevice, stream_));
      FUSELM_CUDA_THROW(cudaStreamSynchronize(stream_));
      return;
    }
    FUSELM_CHECK(t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16 || t.dtype == DType::Q8_0,
                 "tensor '", t.name, "' has dtype ", dtype_name(t.dtype), ", which the CUDA backend cannot upload");
    // Chunks through a device staging buffer; Q8_0 is dequantized on the host to f32 first.
    const bool q8 = t.dtype == DType::Q8_0;
    const DType src_dtype = q8 ? DType::F32 : t.dtype;
    const size_t src_elem = dtype_bytes(src_dtype, 1);
    int64_t chunk = static_cast<int64_t>(kStagingBytes / src_elem);
    if (q8) chunk = chunk / kQ8_0BlockSize * kQ8_0BlockSize;
    ensure_staging(q8);
    for (int64_t start = 0; start < n; start += chunk) {
      const int64_t count = std::min(chunk, n - start);
      const void* src;
      if (q8) {
        dequantize_q8_0(static_cast<const std::byte*>(t.data) + dtype_bytes(DType::Q8_0, start), count,
                        host_f32_.get());
        src = host_f32_.get();
      } else {
        src = static_cast<const std::byte*>(t.data) + start * src_elem;
      }
      FUSELM_CUDA_THROW(
          cudaMemcpyAsync(staging_.data(), src, count * src_elem, cudaMemcpyHostToDevice, stream_));
      FUSELM_THROW_IF_FAILED(convert_dtype_device(staging_.data(), src_dtype,
                                                  static_cast<std::byte*>(dst) + dtype_bytes(p.dst_dtype, start),
                                                  p.dst_dtype, count, stream_));
      // The next chunk reuses the staging buffers.
      FUSELM_CUDA_THROW(cudaStreamSynchronize(stream_));
    }
  }

 private:
  void ensure_staging(bool need_host) {
    if (!staging_.data()) staging_ = DeviceBuffer::allocate(kStagingBytes, "weight upload staging");
    if (need_host && !host_f32_) host_f32_ = std::make_unique<float[]>(kStagingBytes / sizeof(float));
  }

  std::byte* base_;
  cudaStream_t stream_;
  DeviceBuffer staging_;
  std::unique_ptr<float[]> host_f32_;
};

}  // namespace

DeviceWeights upload_weights(const Model& model, DType dtype, cudaStream_t stream) {
  const ModelConfig& c = model.config;
  const ModelWeights& w = model.weights;
  const std::string& src = model.source;
  const int64_t hidden = c.hidden_size, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ffn = c.intermediate_size,
                vocab = c.vocab_size;
  FUSELM_CHECK(static_cast<int>(w.layers.size()) == c.num_layers, src, ": the config has ", c.num_layers,
               " layers but the weights have ", w.layers.size());

  // Offsets first (one allocation), then the uploads.
  std::vector<Placement> placements;
  size_t total = 0;
  auto place = [&](const WeightTensor& t, DType dst_dtype) {
    const size_t offset = total;
    placements.push_back({&t, offset, dst_dtype});
    total += dtype_bytes(dst_dtype, t.numel());
    return offset;
  };
  auto start_region = [&] {
    total = align_up(total);
    return total;
  };

  check_shape(w.token_embedding, {vocab, hidden}, src);
  const size_t embedding_at = start_region();
  place(w.token_embedding, dtype);
  struct LayerOffsets {
    size_t qkv, wo, gate_up, down, attn_norm, ffn_norm;
  };
  std::vector<LayerOffsets> layer_at;
  for (const LayerWeights& l : w.layers) {
    check_shape(l.wq, {q_dim, hidden}, src);
    check_shape(l.wk, {kv_dim, hidden}, src);
    check_shape(l.wv, {kv_dim, hidden}, src);
    check_shape(l.wo, {hidden, q_dim}, src);
    check_shape(l.w_gate, {ffn, hidden}, src);
    check_shape(l.w_up, {ffn, hidden}, src);
    check_shape(l.w_down, {hidden, ffn}, src);
    check_shape(l.attn_norm, {hidden}, src);
    check_shape(l.ffn_norm, {hidden}, src);
    LayerOffsets o;
    o.qkv = start_region();
    place(l.wq, dtype);  // q, k and v rows back to back: one [q_dim + 2 kv_dim][hidden] matrix
    place(l.wk, dtype);
    place(l.wv, dtype);
    o.wo = start_region();
    place(l.wo, dtype);
    o.gate_up = start_region();
    place(l.w_gate, dtype);
    place(l.w_up, dtype);
    o.down = start_region();
    place(l.w_down, dtype);
    o.attn_norm = start_region();
    place(l.attn_norm, DType::F32);
    o.ffn_norm = start_region();
    place(l.ffn_norm, DType::F32);
    layer_at.push_back(o);
  }
  check_shape(w.final_norm, {hidden}, src);
  const size_t final_norm_at = start_region();
  place(w.final_norm, DType::F32);
  size_t lm_head_at = embedding_at;
  if (!w.tied()) {
    check_shape(w.lm_head, {vocab, hidden}, src);
    lm_head_at = start_region();
    place(w.lm_head, dtype);
  }
  const std::vector<float> inv_freq = rope_inv_freq(c.rope, c.head_dim);
  const size_t inv_freq_at = start_region();
  total += inv_freq.size() * sizeof(float);
  total = align_up(total);

  DeviceWeights d;
  d.dtype = dtype;
  d.storage = DeviceBuffer::allocate(total, "the model weights");
  Uploader uploader(d.storage.at<std::byte>(0), stream);
  for (const Placement& p : placements) uploader.upload(p);
  FUSELM_CUDA_THROW(cudaMemcpyAsync(d.storage.at<float>(inv_freq_at), inv_freq.data(), inv_freq.size() * sizeof(float),
                                    cudaMemcpyHostToDevice, stream));
  FUSELM_CUDA_THROW(cudaStreamSynchronize(stream));

  d.embedding = d.storage.at<void>(embedding_at);
  for (const LayerOffsets& o : layer_at) {
    d.layers.push_back({d.storage.at<void>(o.qkv), d.storage.at<void>(o.wo), d.storage.at<void>(o.gate_up),
                        d.storage.at<void>(o.down), d.storage.at<float>(o.attn_norm), d.storage.at<float>(o.ffn_norm)});
  }
  d.final_norm = d.storage.at<float>(final_norm_at);
  d.lm_head = d.storage.at<void>(lm_head_at);
  d.rope_inv_freq = d.storage.at<float>(inv_freq_at);
  return d;
}

}  // namespace fuselm
