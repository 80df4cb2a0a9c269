#pragma once
// The architecture of a Llama-family decoder, independent of the file it came from.
#include <cstdint>
#include <string>
#include <vector>

namespace fuselm {

enum class RopeScaling { None, Linear, Llama3 };

struct RopeConfig {
  float theta = 10000.0f;
  RopeScaling scaling = RopeScaling::None;
  float factor = 1.0f;               // linear and llama3
  float low_freq_factor = 1.0f;      // llama3
  float high_freq_factor = 4.0f;     // llama3
  int original_max_position = 8192;  // llama3
  // Round the inverse frequencies to bf16, as HF transformers does once a model has been cast with
  // model.to(torch.bfloat16) (inv_freq is a buffer and is cast with the weights). Not read from any
  // file: set it to reproduce references computed that way; off = exact fp32 frequencies.
  bool bf16_inv_freq = false;
};

struct ModelConfig {
  std::string architecture = "llama";  // family; every supported file maps onto it
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  int gqa_group() const { return num_heads / num_kv_heads; }

  // Checks the dimensions are positive and consistent; throws Error naming the bad field
  // and `source` (the file it came from).
  void validate(const std::string& source) const;
};

// Inverse RoPE frequencies for each pair (head_dim / 2 values), with the scaling applied.
// Rotation is rotate-half (HF layout): dims i and i + head_dim/2 form pair i.
std::vector<float> rope_inv_freq(const RopeConfig& rope, int head_dim);

std::string rope_scaling_name(RopeScaling s);

}  // namespace fuselm
