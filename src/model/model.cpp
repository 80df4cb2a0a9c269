#include "model/model.h"

#include "core/error.h"
#include "core/rng.h"

namespace fuselm {

std::string model_format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::HfDirectory: return "hf";
    case ModelFormat::Gguf: return "gguf";
    case ModelFormat::Llama2c: return "llama2c";
    case ModelFormat::Synthetic: return "synthetic";
  }
  return "?";
}

std::byte* Model::allocate(size_t bytes) {
  owned.push_back(std::make_unique<std::byte[]>(bytes));
  return owned.back().get();
}

void fill_synthetic(const SyntheticInit& init, int64_t numel, DType dtype, void* dst) {
  FUSELM_CHECK(dtype != DType::Q8_0, "synthetic tensors are generated as f32, f16 or bf16");
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < numel; ++i) {
    float v = init.offset + init.scale * counter_uniform(init.seed, static_cast<uint64_t>(i));
    switch (dtype) {
      case DType::F32: static_cast<float*>(dst)[i] = v; break;
      case DType::F16: static_cast<uint16_t*>(dst)[i] = f32_to_f16_bits(v); break;
      default: static_cast<uint16_t*>(dst)[i] = f32_to_bf16_bits(v); break;
    }
  }
}

void Model::materialize_synthetic(DType dtype) {
  for (WeightTensor* t : weights.all_mutable()) {
    if (t->has_data() || !t->synthetic.active) continue;
    t->dtype = dtype;
    std::byte* buf = allocate(t->nbytes());
    fill_synthetic(t->synthetic, t->numel(), dtype, buf);
    t->data = buf;
  }
  if (config.tie_word_embeddings) weights.lm_head = weights.token_embedding;
}

int64_t Model::parameter_count() const {
  int64_t n = 0;
  for (const WeightTensor* t : weights.all()) n += t->numel();
  return n;
}

size_t Model::weight_bytes() const {
  size_t n = 0;
  for (const WeightTensor* t : weights.all()) n += t->nbytes();
  return n;
}

}  // namespace fuselm
