// `fuselm tune` on the GPU: what plan/tune.h describes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_stream.h"
#include "kernels/cuda/skinny_gemm.h"
#include "kernels/mma_packing.h"
#include "plan/cuda/plan_cuda.h"
#include "plan/tune.h"

namespace fuselm {

namespace {

// Device memory owned by the tuner.
class Buffer {
 public:
  Buffer(size_t bytes, const std::string& what) {
    if (bytes == 0) return;
    const cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      ptr_ = nullptr;
      fail("fuselm tune: cannot allocate ", bytes >> 20, " MiB of GPU memory for ", what, " (",
           cudaGetErrorString(err), "); free the GPU, or lower --max-batch / --max-seq-len");
    }
  }
  ~Buffer() {
    if (ptr_) cudaFree(ptr_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};


class EventPair {
 public:
  EventPair() {
    FUSELM_CUDA_THROW(cudaEventCreate(&start));
    FUSELM_CUDA_THROW(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  cudaEvent_t start = nullptr, stop = nullptr;
};

__global__ void fill_random_kernel(uint16_t* out, int64_t n, bool bf16, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = counter_uniform(seed, static_cast<uint64_t>(i)) * scale;
    out[i] = bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
  }
}

// Uniform values in [-scale, scale): weights and activations of a plausible magnitude, so no
// timing is flattered by zeros.
void fill_random(void* p, int64_t n, DType dtype, uint64_t seed, float scale, cudaStream_t stream) {
  fill_random_kernel<<<1024, 256, 0, stream>>>(static_cast<uint16_t*>(p), n, dtype == DType::BF16, seed, scale);
  FUSELM_CUDA_THROW(cudaGetLastError());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Median µs per launch of `launch(i)`, i = 0 .. launches-1 back to back, over options.reps timed
// repetitions after options.warmup untimed ones. Returns nothing when the first launch fails (the
// candidate does not support this shape); `why` then holds the launcher's message.
template <class Launch>
std::optional<double> time_launches(const Launch& launch, int launches, const TuneOptions& options,
                                    cudaStream_t stream, std::string& why) {
  if (Status s = launch(0); !s.ok()) {
    why = s.message();
    return std::nullopt;
  }
  EventPair ev;
  std::vector<double> samples;
  for (int rep = -options.warmup; rep < options.reps; ++rep) {
    FUSELM_CUDA_THROW(cudaEventRecord(ev.start, stream));
    for (int i = 0; i < launches; ++i) FUSELM_THROW_IF_FAILED(launch(i));
    FUSELM_CUDA_THROW(cudaEventRecord(ev.stop, stream));
    FUSELM_CUDA_THROW(cudaEventSynchronize(ev.stop));
    float ms = 0;
    FUSELM_CUDA_THROW(cudaEventElapsedTime(&ms, ev.start, ev.stop));
    if (rep >= 0) samples.push_back(ms * 1000.0 / launches);
  }
  return median(samples);
}

// Copies of a working set of `bytes` to rotate through so that the set of them is ~3x the L2 and
// every launch reads from memory, as in a real step where the other layers evict it; at least 2,
// and no more than a quarter of the free memory.
int rotating_copies(size_t bytes, size_t l2_bytes, int cap) {
  size_t free_bytes = 0, total = 0;
  FUSELM_CUDA_THROW(cudaMemGetInfo(&free_bytes, &total));
  const size_t wanted = (3 * l2_bytes + bytes - 1) / std::max<size_t>(bytes, 1);
  const size_t fit = free_bytes / 4 / std::max<size_t>(bytes, 1);
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>({std::max<size_t>(wanted, 2), fit, size_t(cap)})));
}

struct GemmResult {
  std::vector<int> measured_m;
  std::vector<GemmTiming> timings;
  GemmPick pick;
};

GemmResult tune_gemm(PlanOp op, const Plan& plan, const TuneOptions& options, size_t l2_bytes, cudaStream_t stream,
                     const TuneLog& log) {
  const auto [rows, cols] = decode_gemm_shape(op, plan.model);
  const DType dtype = plan.dtype;
  const DType out_dtype = op == PlanOp::LmHead ? DType::F32 : dtype;  // the LM head writes fp32 logits
  // Each variant is timed on the layout the engine packs for it when it runs an op alone
  // (skinny_tile_group); random data fills any layout, so one buffer with room for the largest padded
  // one (the largest group's only while group sizes divide one another).
  int64_t weight_elems = 0;
  for (const SkinnyGemmVariant& v : skinny_gemm_variants())
    weight_elems = std::max(weight_elems, mma_packed_elems(rows, cols, skinny_tile_group(SkinnyGemmChoice::same(v))));
  const size_t weight_bytes = dtype_bytes(dtype, weight_elems);
  const int copies = rotating_copies(weight_bytes, l2_bytes, 64);
  Buffer weights(weight_bytes * copies, str_cat(plan_op_name(op), " weights (", copies, " copies)"));
  for (int c = 0; c < copies; ++c)
    fill_random(weights.get<char>() + weight_bytes * c, weight_elems, dtype, 1000 + c, 0.05f, stream);
  Buffer x(dtype_bytes(dtype, int64_t{kDecodeGemmMaxTokens} * cols), "GEMM inputs");
  fill_random(x.get(), int64_t{kDecodeGemmMaxTokens} * cols, dtype, 7, 1.0f, stream);
  Buffer out(dtype_bytes(out_dtype, int64_t{kDecodeGemmMaxTokens} * rows), "GEMM outputs");

  GemmResult r;
  std::set<int> ms;
  for (int b : decode_batch_buckets(plan.limits.max_batch)) ms.insert(std::min(b, kDecodeGemmMaxTokens));
  r.measured_m.assign(ms.begin(), ms.end());
  const int launches = std::max(copies, 10);
  for (const SkinnyGemmVariant& v : skinny_gemm_variants()) {
    GemmTiming t;
    t.variant = v.name();
    std::string why;
    bool ok = true;
    const int group = skinny_tile_group(SkinnyGemmChoice::same(v));
    for (int m : r.measured_m) {
      auto launch = [&](int i) {
        PackedWeight w{weights.get<char>() + weight_bytes * (i % copies), dtype, rows, cols, group};
        return skinny_gemm_store(w, SkinnyInput{x.get(), cols, m}, SkinnyNorm{}, out.get(), out_dtype, rows, v, stream);
      };
      std::optional<double> us = time_launches(launch, launches, options, stream, why);
      if (!us) {
        ok = false;
        break;
      }
      t.us.push_back(*us);
    }
    if (!ok) {
      if (log) log(str_cat("  ", plan_op_name(op), ": ", t.variant, " skipped: ", why));
      continue;
    }
    for (int b : decode_batch_buckets(plan.limits.max_batch)) {
      const int m = std::min(b, kDecodeGemmMaxTokens);
      const size_t at = std::find(r.measured_m.begin(), r.measured_m.end(), m) - r.measured_m.begin();
      t.total_us += ((b + kDecodeGemmMaxTokens - 1) / kDecodeGemmMaxTokens) * t.us[at];
    }
    r.timings.push_back(std::move(t));
  }
  FUSELM_CHECK(!r.timings.empty(), "fuselm tune: no decode GEMM variant runs the ", plan_op_name(op), " matrix ", rows,
               "x", cols, " in ", dtype_name(dtype));
  // A k4/k8 CTA variant timed at m = 1 ran its warp-pipeline twin, unless its weights were in tile
  // groups (which the twin cannot read): the pick names what runs. (A pick pairing two variants whose
  // layouts differ runs both ungrouped in the engine; the timings here are each variant's own layout.)
  r.pick = pick_decode_gemm(r.timings, r.measured_m, [](const std::string& name) {
    const SkinnyGemmVariant v = find_skinny_gemm_variant(name);
    return skinny_tile_group(SkinnyGemmChoice::same(v)) != 1 ? name : single_token_twin(v).name();
  });
  if (log) log(str_cat(plan_op_name(op), " ", rows, "x", cols, ": ", r.pick.reason, " (", copies, " weight copies)"));
  return r;
}

struct AttentionResult {
  std::vector<AttentionCase> cases;
  std::vector<SplitTiming> timings;
  int winner = 0;
  std::string reason;
};

AttentionResult tune_attention(const Plan& plan, const TuneOptions& options, size_t l2_bytes, cudaStream_t stream,
                               const TuneLog& log) {
  const PlanModel& m = plan.model;
  const PlanLimits& limits = plan.limits;
  const DType dtype = plan.dtype;
  const int bs = plan.kv_block_size;
  AttentionResult r;
  for (int batch : options.attention_batches) {
    if (batch > limits.max_batch) continue;
    std::set<int> depths;
    for (int d : options.attention_depths) depths.insert(std::min(d, limits.max_seq_len));
    for (int d : depths) r.cases.push_back({batch, d});
  }
  if (r.cases.empty()) r.cases.push_back({1, limits.max_seq_len});

  const PagedKvLayout layout{bs, m.num_kv_heads, m.head_dim};
  const size_t block_bytes = dtype_bytes(dtype, layout.block_elems());
  const int max_blocks_per_seq = (limits.max_seq_len + bs - 1) / bs;
  // One pool serves every case: a case's copies are disjoint sets of its blocks, picked by their
  // own block tables, so rotating copies costs no extra K/V memory beyond the largest case.
  std::vector<int> copies;
  int64_t pool_blocks = 0;
  for (const AttentionCase& c : r.cases) {
    const int64_t blocks = int64_t{c.batch} * ((c.kv_len + bs - 1) / bs);
    copies.push_back(rotating_copies(2 * blocks * block_bytes, l2_bytes, 32));
    pool_blocks = std::max(pool_blocks, blocks * copies.back());
  }
  Buffer k_pool(pool_blocks * block_bytes, "the K cache");
  Buffer v_pool(pool_blocks * block_bytes, "the V cache");
  fill_random(k_pool.get(), pool_blocks * layout.block_elems(), dtype, 11, 1.0f, stream);
  fill_random(v_pool.get(), pool_blocks * layout.block_elems(), dtype, 12, 1.0f, stream);
  int max_batch = 0;
  for (const AttentionCase& c : r.cases) max_batch = std::max(max_batch, c.batch);
  const int64_t q_elems = int64_t{max_batch} * m.num_heads * m.head_dim;
  Buffer q(dtype_bytes(dtype, q_elems), "queries");
  Buffer out(dtype_bytes(dtype, q_elems), "attention outputs");
  fill_random(q.get(), q_elems, dtype, 13, 1.0f, stream);
  const AttentionShape shape{m.num_heads, m.num_kv_heads, m.head_dim, 1.0f / std::sqrt(static_cast<float>(m.head_dim))};

  for (int split : options.split_candidates) {
    FUSELM_CHECK(split > 0 && split % bs == 0, "fuselm tune: split candidate ", split,
                 " is not a positive multiple of the KV block size ", bs);
    SplitTiming t;
    t.split_tokens = split;
    const DecodeAttentionPlan attention_plan{split, (limits.max_seq_len + split - 1) / split};
    Buffer workspace(decode_attention_workspace_bytes(shape, attention_plan, max_batch), "the attention workspace");
    FUSELM_THROW_IF_FAILED(decode_attention_init_workspace(workspace.get(), shape, attention_plan, max_batch, stream));
    for (size_t ci = 0; ci < r.cases.size(); ++ci) {
      const AttentionCase& c = r.cases[ci];
      const int blocks_per_seq = (c.kv_len + bs - 1) / bs;
      std::vector<int32_t> tables(size_t(copies[ci]) * c.batch * max_blocks_per_seq, 0);
      int32_t next = 0;
      for (int copy = 0; copy < copies[ci]; ++copy)
        for (int b = 0; b < c.batch; ++b)
          for (int i = 0; i < blocks_per_seq; ++i)
            tables[(size_t(copy) * c.batch + b) * max_blocks_per_seq + i] = next++;
      Buffer tables_dev(tables.size() * sizeof(int32_t), "block tables");
      Buffer lens_dev(c.batch * sizeof(int32_t), "sequence lengths");
      const std::vector<int32_t> lens(c.batch, c.kv_len);
      FUSELM_CUDA_THROW(cudaMemcpyAsync(tables_dev.get(), tables.data(), tables.size() * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, stream));
      FUSELM_CUDA_THROW(
          cudaMemcpyAsync(lens_dev.get(), lens.data(), lens.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
      auto launch = [&](int i) {
        PagedKvView kv{k_pool.get(), v_pool.get(), layout,
                       tables_dev.get<int32_t>() + size_t(i % copies[ci]) * c.batch * max_blocks_per_seq,
                       max_blocks_per_seq};
        return decode_attention(q.get(), out.get(), dtype, shape, kv, lens_dev.get<int32_t>(), c.batch, attention_plan,
                                workspace.get(), stream);
      };
      std::string why;
      std::optional<double> us = time_launches(launch, std::max(copies[ci], 4), options, stream, why);
      FUSELM_CHECK(us.has_value(), "fuselm tune: decode attention with split ", split, " failed at batch ", c.batch,
                   ", ", c.kv_len, " tokens: ", why);
      FUSELM_CUDA_THROW(cudaStreamSynchronize(stream));  // the host tables stay alive until the runs are done
      t.us.push_back(*us);
    }
    r.timings.push_back(std::move(t));
  }
  for (size_t ci = 0; ci < r.cases.size(); ++ci) {
    double best = 1e300;
    for (const SplitTiming& t : r.timings) best = std::min(best, t.us[ci]);
    for (SplitTiming& t : r.timings) t.mean_ratio += t.us[ci] / best / r.cases.size();
  }
  const SplitTiming* win = &r.timings[0];
  for (const SplitTiming& t : r.timings)
    if (t.mean_ratio < win->mean_ratio) win = &t;
  r.winner = win->split_tokens;
  r.reason = str_cat("least mean time relative to the fastest split over ", r.cases.size(), " (batch, depth) cases on "
                     "this GPU: split ", r.winner, " at ", std::lround(1000.0 * win->mean_ratio) / 1000.0, "x");
  if (log) log(str_cat("decode attention: ", r.reason));
  return r;
}

}  // namespace

Plan tune_plan(const ModelConfig& config, DType dtype, const PlanLimits& limits, const TuneOptions& options,
               const TuneLog& log) {
  GpuIdentity gpu;
  try {
    gpu = query_gpu_identity();
  } catch (const Error& e) {
    fail("fuselm tune times kernels on the GPU that will serve, and ", e.what(), "; run it on that machine, or use "
         "`fuselm plan -m MODEL --json` (with --gpu to name the GPU) for the rule-based plan");
  }
  FUSELM_CHECK(options.reps >= 1 && options.warmup >= 0, "fuselm tune: reps must be >= 1 and warmup >= 0");
  // Every name the kernels give must be one a plan file may hold, or the result could not be loaded.
  const auto known = skinny_gemm_variant_names();
  for (const SkinnyGemmVariant& v : skinny_gemm_variants())
    FUSELM_CHECK(std::find(known.begin(), known.end(), v.name()) != known.end(), "decode GEMM variant ", v.name(),
                 " of the kernels is missing from the plan's list of variant names (kSkinnyGemmVariants in "
                 "plan/rules.cpp); add it there");

  Plan plan = make_rule_plan(config, dtype, gpu, limits);
  plan.made_by = "tune";
  int device = 0;
  FUSELM_CUDA_THROW(cudaGetDevice(&device));
  int l2 = 0;
  FUSELM_CUDA_THROW(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  if (log) log(str_cat("tuning on ", gpu.describe(), ", L2 ", l2 >> 20, " MiB, ", dtype_name(dtype), "; decode buckets up "
                       "to ", limits.max_batch, ", sequences up to ", limits.max_seq_len, " tokens"));
  CudaStream stream;

  for (DecodeGemmChoice& c : plan.decode.gemm) {
    GemmResult r = tune_gemm(c.op, plan, options, static_cast<size_t>(l2), stream.get(), log);
    c.variant = r.pick.variant;
    c.single_token_variant = r.pick.single_token_variant;
    c.origin = {"tune", r.pick.reason};
    c.measured_m = std::move(r.measured_m);
    c.timings = std::move(r.timings);
  }

  DecodeAttentionChoice& a = plan.decode.attention;
  if (a.kernel.starts_with("mma")) {
    AttentionResult r = tune_attention(plan, options, static_cast<size_t>(l2), stream.get(), log);
    a.split_tokens = r.winner;
    a.origin = {"tune", str_cat(r.reason, "; kernel: ", a.origin.reason)};
    a.measured_cases = std::move(r.cases);
    a.timings = std::move(r.timings);
  } else if (log) {
    log(str_cat("decode attention: the ", a.kernel, " kernel (head_dim ", plan.model.head_dim,
                ") does not split; split size left to the rules"));
  }
  complete_plan(plan);
  validate_plan(plan, "the tuned plan");
  return plan;
}

}  // namespace fuselm
