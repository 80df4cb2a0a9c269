#include "model/weights.h"

namespace fuselm {

int64_t WeightTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

size_t WeightTensor::nbytes() const { return dtype_bytes(dtype, numel()); }

namespace {
template <class W, class T>
std::vector<T*> collect(W& w) {
  std::vector<T*> out{&w.token_embedding};
  for (auto& l : w.layers) {
    for (auto* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
      out.push_back(t);
  }
  out.push_back(&w.final_norm);
  if (!w.tied()) out.push_back(&w.lm_head);
  return out;
}
}  // namespace

std::vector<const WeightTensor*> ModelWeights::all() const {
  return collect<const ModelWeights, const WeightTensor>(*this);
}
std::vector<WeightTensor*> ModelWeights::all_mutable() { return collect<ModelWeights, WeightTensor>(*this); }

}  // namespace fuselm
