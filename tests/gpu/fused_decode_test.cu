// The fused decode step end to end on a small random model: logits of every step against the CPU
// reference engine (teacher-forced, one token per sequence per step), bitwise batch invariance,
// and bitwise equality of a CUDA-graph replay with direct launches.
// Tolerance: weights are bf16 in both; the fused step keeps activations in bf16 between kernels
// (fp32 residual stream), so logits agree to ~1e-2 relative (bound 3e-2).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/fused_decode.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/mma_packing.h"
#include "model/loader.h"
#include "runtime/cpu_engine.h"

namespace fuselm {
namespace {

bool has_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define STATUS_OK(expr)                   \
  do {                                    \
    Status s_ = (expr);                   \
    ASSERT_TRUE(s_.ok()) << s_.message(); \
  } while (0)

// Device allocations owned by the test fixture, freed at the end.
struct DeviceArena {
  std::vector<void*> ptrs;
  ~DeviceArena() {
    for (void* p : ptrs) cudaFree(p);
  }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 16)), cudaSuccess);
    ptrs.push_back(p);
    return p;
  }
  template <class T>
  T* upload(const std::vector<T>& v) {
    auto* p = static_cast<T*>(alloc(v.size() * sizeof(T)));
    EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    return p;
  }
};

std::vector<uint16_t> tensor_bits(const WeightTensor& t) {
  EXPECT_EQ(t.dtype, DType::BF16);
  std::vector<uint16_t> v(t.numel());
  std::memcpy(v.data(), t.data, v.size() * 2);
  return v;
}

// Packs the row-stacked matrices (bf16 host tensors) with `row_map` and uploads them.
PackedWeight pack_stacked(DeviceArena& arena, std::vector<const WeightTensor*> parts, const std::vector<int64_t>& row_map) {
  const int64_t cols = parts[0]->cols();
  std::vector<uint16_t> stacked;
  for (const WeightTensor* p : parts) {
    auto bits = tensor_bits(*p);
    stacked.insert(stacked.end(), bits.begin(), bits.end());
  }
  const int64_t rows = static_cast<int64_t>(stacked.size()) / cols;
  const int64_t packed_rows = row_map.empty() ? rows : static_cast<int64_t>(row_map.size());
  std::vector<uint16_t> packed(mma_packed_elems(packed_rows, cols));
  pack_mma_tiles(stacked.data(), DType::BF16, rows, cols, row_map, DType::BF16, packed.data());
  return PackedWeight{arena.upload(packed), DType::BF16, packed_rows, cols};
}

// A norm weight as the engine keeps it: fp32 (here the bf16 model's values, widened).
std::vector<float> norm_values(const WeightTensor& t) {
  std::vector<float> v(t.numel());
  convert_dtype(t.data, t.dtype, v.data(), DType::F32, t.numel());
  return v;
}

struct FusedFixture {
  DeviceArena arena;
  FusedDecodeModel model;
  FusedDecodeBuffers buffers;
  DecodeAttentionPlan attention_plan;
  int max_blocks = 0;

  FusedFixture(const Model& m, int max_seq_len) {
    const ModelConfig& c = m.config;
    model.dtype = DType::BF16;
    model.hidden = c.hidden_size;
    model.n_heads = c.num_heads;
    model.n_kv_heads = c.num_kv_heads;
    model.head_dim = c.head_dim;
    model.ffn = c.intermediate_size;
    model.vocab = c.vocab_size;
    model.eps = c.rms_norm_eps;
    model.embedding = arena.upload(tensor_bits(m.weights.token_embedding));
    model.final_norm = arena.upload(norm_values(m.weights.final_norm));
    model.lm_head = pack_stacked(arena, {&m.weights.lm_head}, {});
    model.inv_freq = arena.upload(rope_inv_freq(c.rope, c.head_dim));
    model.kv_layout = PagedKvLayout{16, c.num_kv_heads, c.head_dim};
    model.variants = FusedDecodeVariants::all(SkinnyGemmVariant{1, 8});
    max_blocks = (max_seq_len + 15) / 16;
    const int64_t blocks = static_cast<int64_t>(kSkinnyGemmMaxTokens) * max_blocks;
    for (const LayerWeights& l : m.weights.layers) {
      FusedDecodeLayer fl;
      fl.qkv = pack_stacked(arena, {&l.wq, &l.wk, &l.wv}, qkv_rope_row_map(c.num_heads, c.num_kv_heads, c.head_dim));
      fl.o = pack_stacked(arena, {&l.wo}, {});
      fl.gate_up = pack_stacked(arena, {&l.w_gate, &l.w_up}, gate_up_row_map(c.intermediate_size));
      fl.down = pack_stacked(arena, {&l.w_down}, {});
      fl.attn_norm = arena.upload(norm_values(l.attn_norm));
      fl.ffn_norm = arena.upload(norm_values(l.ffn_norm));
      fl.k_cache = arena.alloc(blocks * model.kv_layout.block_elems() * 2);
      fl.v_cache = arena.alloc(blocks * model.kv_layout.block_elems() * 2);
      model.layers.push_back(fl);
    }
    attention_plan.split_tokens = 32;
    attention_plan.max_splits_per_seq = (max_seq_len + 31) / 32;
    attention_plan.cluster_ranks = clusters_supported() ? 8 : 1;  // as FusedDecoder runs it
    const FusedDecodeBufferSizes s = fused_decode_buffer_sizes(model, attention_plan);
    buffers.residual = static_cast<float*>(arena.alloc(s.residual));
    buffers.xg = arena.alloc(s.xg);
    buffers.partials = static_cast<float*>(arena.alloc(s.partials));
    buffers.q = arena.alloc(s.q);
    buffers.attn = arena.alloc(s.attn);
    buffers.act = arena.alloc(s.act);
    buffers.logits = static_cast<float*>(arena.alloc(s.logits));
    buffers.attention_workspace = arena.alloc(s.attention_workspace);
  }
};

// Per-step device inputs for m sequences, sequence i using block rows `first_block_row + i`.
struct StepInputs {
  int32_t* tokens;
  int32_t* positions;
  int32_t* kv_lens;
  int32_t* tables;
};

const char* kSpec = "synthetic:llama?hidden=256&layers=2&heads=4&kv_heads=2&head_dim=64&ffn=512&vocab=1000&seed=5";

TEST(FusedDecode, MatchesCpuReferenceStepByStep) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device found; GPU tests run only on a machine with a GPU";
  auto model = load_model(kSpec);
  const int m = 5, steps = 40;
  FusedFixture fx(*model, 64);
  EngineOptions cpu_options;
  auto cpu = make_cpu_engine(*model, cpu_options);
  std::vector<int> seqs;
  for (int i = 0; i < m; ++i) seqs.push_back(cpu->add_sequence());
  std::mt19937 gen(11);
  std::vector<int32_t> tables(m * fx.max_blocks);
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(tables.size() - 1 - i);  // non-contiguous
  auto* tables_dev = fx.arena.upload(tables);
  auto* tokens_dev = static_cast<int32_t*>(fx.arena.alloc(m * 4));
  auto* pos_dev = static_cast<int32_t*>(fx.arena.alloc(m * 4));
  auto* lens_dev = static_cast<int32_t*>(fx.arena.alloc(m * 4));
  double worst = 0.0;
  for (int step = 0; step < steps; ++step) {
    std::vector<int32_t> tokens(m), positions(m, step), lens(m, step + 1);
    for (auto& t : tokens) t = std::uniform_int_distribution<int>(0, 999)(gen);
    CUDA_OK(cudaMemcpy(tokens_dev, tokens.data(), m * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(pos_dev, positions.data(), m * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(lens_dev, lens.data(), m * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(fx.buffers.logits, 0xff, m * 1000 * 4));
    STATUS_OK(fused_decode_step(fx.model, fx.buffers, FusedDecodeInputs{tokens_dev, pos_dev, lens_dev, tables_dev, fx.max_blocks, m},
                                fx.attention_plan, nullptr));
    std::vector<float> got(m * 1000);
    CUDA_OK(cudaMemcpy(got.data(), fx.buffers.logits, got.size() * 4, cudaMemcpyDeviceToHost));
    std::vector<SequenceChunk> chunks;
    for (int i = 0; i < m; ++i) chunks.push_back(SequenceChunk{seqs[i], std::span<const int32_t>(&tokens[i], 1), false});
    std::vector<float> want;
    cpu->forward(chunks, want);
    for (int i = 0; i < m; ++i) {
      double num = 0, den = 0;
      for (int v = 0; v < 1000; ++v) {
        const double d = got[i * 1000 + v] - want[i * 1000 + v];
        ASSERT_TRUE(std::isfinite(got[i * 1000 + v])) << "step " << step << " seq " << i;
        num += d * d;
        den += double(want[i * 1000 + v]) * want[i * 1000 + v];
      }
      worst = std::max(worst, std::sqrt(num / den));
    }
  }
  std::printf("fused decode vs CPU reference: worst relative logits error %.3g over %d steps\n", worst, steps);
  EXPECT_LE(worst, 3e-2);
}

TEST(FusedDecode, BitwiseIndependentOfBatchAndEqualUnderGraphReplay) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device found; GPU tests run only on a machine with a GPU";
  auto model = load_model(kSpec);
  const int m = 16, steps = 12;
  FusedFixture fx(*model, 64);
  std::vector<int32_t> tables(m * fx.max_blocks);
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(i);
  auto* tables_dev = fx.arena.upload(tables);
  auto* tokens_dev = static_cast<int32_t*>(fx.arena.alloc(m * 4));
  auto* pos_dev = static_cast<int32_t*>(fx.arena.alloc(m * 4));
  auto* lens_dev = static_cast<int32_t*>(fx.arena.alloc(m * 4));
  std::mt19937 gen(3);
  std::vector<std::vector<int32_t>> token_seq(steps, std::vector<int32_t>(m));
  for (auto& row : token_seq)
    for (auto& t : row) t = std::uniform_int_distribution<int>(0, 999)(gen);
  // Runs `steps` steps for the first `batch` sequences; returns sequence 0's logits of the last step.
  auto run = [&](int batch, bool graph) {
    cudaStream_t stream;
    EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    std::vector<float> out(1000);
    for (int step = 0; step < steps; ++step) {
      std::vector<int32_t> positions(m, step), lens(m, step + 1);
      EXPECT_EQ(cudaMemcpy(tokens_dev, token_seq[step].data(), m * 4, cudaMemcpyHostToDevice), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(pos_dev, positions.data(), m * 4, cudaMemcpyHostToDevice), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(lens_dev, lens.data(), m * 4, cudaMemcpyHostToDevice), cudaSuccess);
      const FusedDecodeInputs in{tokens_dev, pos_dev, lens_dev, tables_dev, fx.max_blocks, batch};
      if (graph) {
        if (exec == nullptr) {
          cudaGraph_t g;
          EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
          Status s = fused_decode_step(fx.model, fx.buffers, in, fx.attention_plan, stream);
          EXPECT_EQ(cudaStreamEndCapture(stream, &g), cudaSuccess);
          EXPECT_TRUE(s.ok()) << s.message();
          EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
          cudaGraphDestroy(g);
        }
        EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      } else {
        Status s = fused_decode_step(fx.model, fx.buffers, in, fx.attention_plan, stream);
        EXPECT_TRUE(s.ok()) << s.message();
      }
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    }
    EXPECT_EQ(cudaMemcpy(out.data(), fx.buffers.logits, 1000 * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    if (exec) cudaGraphExecDestroy(exec);
    cudaStreamDestroy(stream);
    return out;
  };
  const auto alone = run(1, false);
  for (int batch : {3, 9, 16}) {
    const auto in_batch = run(batch, false);
    EXPECT_EQ(std::memcmp(alone.data(), in_batch.data(), alone.size() * 4), 0) << "batch " << batch;
  }
  const auto replayed = run(9, true);
  EXPECT_EQ(std::memcmp(alone.data(), replayed.data(), alone.size() * 4), 0) << "graph replay";
}

}  // namespace
}  // namespace fuselm
