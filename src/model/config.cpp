#include "model/config.h"

#include <cmath>

#include "core/dtype.h"
#include "core/error.h"

namespace fuselm {

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](int v, const char* name) {
    FUSELM_CHECK(v > 0, source, ": model config field '", name, "' must be positive, found ", v);
  };
  positive(hidden_size, "hidden_size");
  positive(num_layers, "num_hidden_layers");
  positive(num_heads, "num_attention_heads");
  positive(num_kv_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(intermediate_size, "intermediate_size");
  positive(vocab_size, "vocab_size");
  FUSELM_CHECK(num_heads % num_kv_heads == 0, source, ": num_attention_heads (", num_heads,
               ") must be a multiple of num_key_value_heads (", num_kv_heads, ")");
  FUSELM_CHECK(head_dim % 2 == 0, source, ": head_dim must be even for RoPE, found ", head_dim);
  FUSELM_CHECK(rms_norm_eps > 0, source, ": rms_norm_eps must be positive, found ", rms_norm_eps);
  FUSELM_CHECK(rope.theta > 0, source, ": rope_theta must be positive, found ", rope.theta);
}

std::vector<float> rope_inv_freq(const RopeConfig& rope, int head_dim) {
  const int half = head_dim / 2;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    // Computed in double, then rounded once, to match reference implementations closely.
    double f = 1.0 / std::pow(static_cast<double>(rope.theta), (2.0 * i) / head_dim);
    switch (rope.scaling) {
      case RopeScaling::None: break;
      case RopeScaling::Linear: f /= rope.factor; break;
      case RopeScaling::Llama3: {
        const double low_wavelen = rope.original_max_position / rope.low_freq_factor;
        const double high_wavelen = rope.original_max_position / rope.high_freq_factor;
        const double wavelen = 2.0 * M_PI / f;
        if (wavelen > low_wavelen) {
          f /= rope.factor;
        } else if (wavelen >= high_wavelen) {
          double smooth = (rope.original_max_position / wavelen - rope.low_freq_factor) /
                          (rope.high_freq_factor - rope.low_freq_factor);
          f = (1.0 - smooth) * f / rope.factor + smooth * f;
        }
        break;
      }
    }
    inv[i] = rope.bf16_inv_freq ? round_to(DType::BF16, static_cast<float>(f)) : static_cast<float>(f);
  }
  return inv;
}

std::string rope_scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::None: return "default";
    case RopeScaling::Linear: return "linear";
    case RopeScaling::Llama3: return "llama3";
  }
  return "?";
}

}  // namespace fuselm
