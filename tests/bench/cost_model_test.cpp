// Byte and FLOP counting for known shapes, against numbers computed by hand from the dimensions.
#include "bench/cost_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace fuselm::bench {
namespace {

ModelConfig llama31_8b() {
  ModelConfig c;
  c.hidden_size = 4096;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 14336;
  c.vocab_size = 128256;
  c.max_position_embeddings = 131072;
  return c;
}

ModelConfig llama32_1b() {
  ModelConfig c;
  c.hidden_size = 2048;
  c.num_layers = 16;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.intermediate_size = 8192;
  c.vocab_size = 128256;
  c.max_position_embeddings = 131072;
  c.tie_word_embeddings = true;
  return c;
}

TEST(CostModel, Llama31_8bParametersAndBytesInBf16) {
  const CostModel m = make_cost_model(llama31_8b(), DType::BF16, DType::BF16, DType::BF16);
  // wq 4096x4096 + wk, wv 1024x4096 + wo 4096x4096 + gate, up, down 14336x4096
  EXPECT_EQ(m.matmul_params_per_layer(), 218103808);
  EXPECT_EQ(m.matmul_params(), 6979321856);
  // + 2 norms per layer, final norm, embedding and untied LM head: the published 8.03 B.
  EXPECT_EQ(m.parameter_count(), 8030261248);
  EXPECT_EQ(m.weight_bytes(), 2 * 8030261248);
  // 2 (K and V) * 32 layers * 8 kv heads * 128 dims * 2 bytes
  EXPECT_EQ(m.kv_bytes_per_token(), 131072);
}

TEST(CostModel, Llama31_8bDecodeStepBytes) {
  const CostModel m = make_cost_model(llama31_8b(), DType::BF16, DType::BF16, DType::BF16);
  // Every layer (matrices + norms), the final norm and the LM head once; the embedding table is
  // not read whole in decode, only one 4096-element row per sequence.
  const int64_t shared = 2 * (int64_t{218112000} * 32 + 4096 + int64_t{128256} * 4096);
  const StepBytes one = decode_step_bytes(m, 1, 0);
  EXPECT_EQ(one.weights, shared + 2 * 4096);
  EXPECT_EQ(one.kv_read, 0);
  EXPECT_EQ(one.kv_write, 131072);
  // Per layer 4096 + 6144 + 4096 + 4096 + 4096 + 14336 + 4096 = 40960 bf16 values written and
  // read; the final-norm output likewise; 128256 fp32 logits written and read.
  EXPECT_EQ(one.activations, 40960 * 2 * 2 * 32 + 4096 * 2 * 2 + 128256 * 4 * 2);

  const StepBytes four = decode_step_bytes(m, 4, 1000);
  EXPECT_EQ(four.weights, shared + 4 * 2 * 4096);
  EXPECT_EQ(four.kv_read, int64_t{131072} * 1000 * 4);
  EXPECT_EQ(four.kv_write, int64_t{131072} * 4);
  EXPECT_EQ(four.activations, 4 * one.activations);
  EXPECT_EQ(four.total(), four.weights + four.kv_read + four.kv_write + four.activations);

  // Ragged lengths: the KV read is the sum of the lengths.
  const std::vector<int64_t> lens = {10, 0, 990};
  const StepBytes ragged = decode_step_bytes(m, lens);
  EXPECT_EQ(ragged.kv_read, int64_t{131072} * 1000);
  EXPECT_EQ(ragged.kv_write, int64_t{131072} * 3);
}

TEST(CostModel, TiedEmbeddingIsReadOnceAsTheLmHead) {
  const CostModel m = make_cost_model(llama32_1b(), DType::BF16, DType::BF16, DType::BF16);
  EXPECT_EQ(m.parameter_count(), 1235814400);  // Llama 3.2 1B
  EXPECT_EQ(m.weight_bytes(), int64_t{2} * 1235814400);
  // 2 * 16 layers * 8 kv heads * 64 dims * 2 bytes
  EXPECT_EQ(m.kv_bytes_per_token(), 32768);
  // No extra embedding rows: the tied table is already read whole for the logits.
  EXPECT_EQ(decode_step_bytes(m, 8, 0).weights, m.weight_bytes());
}

TEST(CostModel, DtypesChangeTheBytes) {
  const CostModel fp32_kv = make_cost_model(llama31_8b(), DType::BF16, DType::F32, DType::F32);
  EXPECT_EQ(fp32_kv.kv_bytes_per_token(), 2 * 131072);
  const CostModel f16 = make_cost_model(llama31_8b(), DType::F16, DType::F16, DType::F16);
  EXPECT_EQ(f16.weight_bytes(), 2 * 8030261248);
  // Q8_0: 34 bytes per 32 weights; norms stay f32.
  const CostModel q8 = make_cost_model(llama31_8b(), DType::Q8_0, DType::F16, DType::F16);
  EXPECT_EQ(q8.lm_head_bytes(), int64_t{128256} * 4096 / 32 * 34);
  EXPECT_EQ(q8.layer_weight_bytes(), 218103808 / 32 * 34 + 2 * 4096 * 4);
}

TEST(CostModel, CausalContextSum) {
  EXPECT_EQ(causal_context_sum(0, 4), 1 + 2 + 3 + 4);
  EXPECT_EQ(causal_context_sum(10, 3), 11 + 12 + 13);
  EXPECT_EQ(causal_context_sum(0, 512), 512 * 513 / 2);
  EXPECT_EQ(causal_context_sum(7, 0), 0);
}

TEST(CostModel, Llama31_8bFlops) {
  const CostModel m = make_cost_model(llama31_8b(), DType::BF16, DType::BF16, DType::BF16);
  // 2 * 6979321856 * 512 + 2 * 128256 * 4096 (last position) + 4 * 32 * 32 * 128 * (512 * 513 / 2)
  EXPECT_DOUBLE_EQ(prefill_flops(m, 0, 512), 7216729948160.0);
  // Continuing from 10 cached tokens, logits for all 3 new positions: context 11 + 12 + 13.
  EXPECT_DOUBLE_EQ(prefill_flops(m, 10, 3, 3), 45046824960.0);
  // Two sequences with 100 cached tokens each: the new token sees 101.
  EXPECT_DOUBLE_EQ(decode_step_flops(m, 2, 100), 30124539904.0);
}

}  // namespace
}  // namespace fuselm::bench
