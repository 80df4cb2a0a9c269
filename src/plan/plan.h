#pragma once
// The plan: for every op and every shape bucket (decode batch buckets, prefill chunk buckets), the
// kernel variant, launch shape and workspace, decided once at load. Nothing is chosen during
// inference: the engine only looks its choices up here.
//
// Choices come from one rule table (plan_rules(): rows keyed by op, dtype, shape bucket, SM
// architecture, SM count and memory; the first matching row wins), or from `fuselm tune`, which
// times the candidates on the GPU and stores the winners next to their timings (plan/tune.h).
// A plan is made for one GPU, one set of model shapes and one dtype; check_plan_matches refuses a
// plan made for anything else.
//
// Host-only C++: CPU builds and tests use all of it. What needs CUDA (the device query, the lookup
// of variant names in the kernels' own lists, the tuner) is in plan/cuda/ and plan/tune.h.
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace fuselm {

inline constexpr std::string_view kPlanFormat = "fuselm-plan";
inline constexpr int kPlanFormatVersion = 1;

// ---------------------------------------------------------------------------------------------
// What a plan is made for.

// A GPU as far as kernel choices care. Filled from cudaGetDeviceProperties (query_gpu_identity)
// or by hand (tests, `fuselm plan --gpu h200` on a machine without a GPU).
struct GpuIdentity {
  std::string name;  // cudaDeviceProp::name, e.g. "NVIDIA H200"
  int sm_major = 0;  // compute capability
  int sm_minor = 0;
  int sm_count = 0;
  uint64_t memory_bytes = 0;  // cudaDeviceProp::totalGlobalMem

  int sm() const { return sm_major * 10 + sm_minor; }  // 90 for sm_90
  std::string describe() const;                         // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
  bool operator==(const GpuIdentity&) const = default;
};

// Identities of common GPUs for planning without one (names and sizes as CUDA reports them;
// memory is approximate except for the H200, read from one). Throws Error naming the presets.
GpuIdentity gpu_preset(std::string_view name);
std::vector<std::string> gpu_preset_names();
// "90", "9.0", "sm_90", "sm_90a", "8.6", "120" -> {major, minor}; throws Error otherwise.
std::array<int, 2> parse_sm_arch(std::string_view text);

// The CUDA device in use. Throws Error when there is none, or when this build has no CUDA backend.
GpuIdentity query_gpu_identity();

// The model shapes that decide kernel choices (weights play no part).
struct PlanModel {
  std::string architecture;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  bool operator==(const PlanModel&) const = default;
};
PlanModel plan_model(const ModelConfig& config);
// 16 hex digits of FNV-1a 64 over a canonical text of the shapes and the dtype: the same on every
// machine and build, and different when any shape or the dtype differs.
std::string model_fingerprint(const PlanModel& model, DType dtype);

// The engine limits that decide the buckets and workspace sizes.
struct PlanLimits {
  int max_batch = 256;            // sequences in one decode step
  int max_prefill_tokens = 8192;  // tokens in one forward call
  int max_seq_len = 8192;         // positions per sequence (sizes the decode attention splits)
  bool operator==(const PlanLimits&) const = default;
};
// The CUDA engine's cap on max_seq_len when it is left to the model (kDefaultMaxSeqLenCap in
// runtime/cuda/memory_plan.h; tests/gpu/plan_kernels_test.cu checks they agree).
inline constexpr int kPlanDefaultMaxSeqLen = 8192;
// Checks the numbers; max_seq_len 0 = the model's context, capped as the CUDA engine caps it.
PlanLimits make_plan_limits(const ModelConfig& config, int max_batch, int max_prefill_tokens, int max_seq_len);

// ---------------------------------------------------------------------------------------------
// Ops and the rule table.

enum class PlanOp : uint8_t {
  Qkv,               // decode GEMMs (the skinny GEMM of kernels/cuda/skinny_gemm.h): one variant each
  O,
  GateUp,
  Down,
  LmHead,
  DecodeAttention,   // decode attention kernel: "mma" (head_dim 64, 128), "mma_c8" (the same in clusters of 8,
                     // sm_90), "mma_c8_s<N>" (clusters of 8, each cluster's work in one CTA from batch N) or "generic"
  DecodeSplit,       // decode attention split size in tokens
  PrefillAttention,  // prefill attention kernel: "mma_r32_k64", "mma_r32_k32" or "generic"
  PrefillGemm,       // GEMM path of a prefill chunk bucket: "sm90_w128", "sm90_w256" or "cublaslt"
  KvBlock,           // tokens per paged KV block
};
inline constexpr int kPlanOpCount = 10;
inline constexpr std::array<PlanOp, 5> kDecodeGemmOps = {PlanOp::Qkv, PlanOp::O, PlanOp::GateUp, PlanOp::Down,
                                                         PlanOp::LmHead};
std::string_view plan_op_name(PlanOp op);  // "qkv", "o", "gate_up", "down", "lm_head", "decode_attention", ...

// Rows and columns (K) of the matrix a decode GEMM op streams, at `model`'s shapes.
std::array<int64_t, 2> decode_gemm_shape(PlanOp op, const PlanModel& model);

// What a rule's shape bucket measures, per op:
//   decode GEMMs: 16-row tiles per SM, ceil(rows / 16) / sm_count (how full one wave of CTAs is);
//   attention ops: head_dim; PrefillGemm: the chunk bucket's tokens; DecodeSplit, KvBlock: 0.
double rule_shape_measure(PlanOp op, const PlanModel& model, const GpuIdentity& gpu, int prefill_tokens = 0);

// [lo, hi); hi = kUnbounded for open ranges.
struct RuleRange {
  double lo = 0;
  double hi = 0;
  bool contains(double v) const { return v >= lo && v < hi; }
};
inline constexpr double kUnbounded = 1e300;

// One row of the rule table. Keys left at their defaults match anything.
struct PlanRule {
  uint32_t ops = 0;                         // bit (1 << PlanOp) per op the row applies to
  uint32_t dtypes = 0;                      // bit (1 << DType); 0 = any
  RuleRange shape{0, kUnbounded};           // rule_shape_measure
  RuleRange sm{0, kUnbounded};              // compute capability, major * 10 + minor
  RuleRange sm_count{0, kUnbounded};
  RuleRange memory_gib{0, kUnbounded};
  std::string_view choice;                  // variant or kernel name, or a number of tokens
  std::string_view single_token{};          // decode GEMMs: the variant for one-token launches; empty = choice
  bool balance_sms = false;                 // decode GEMMs: DecodeGemmChoice::balance_sms (2+ tokens)
  bool single_token_balance_sms = false;    // and for one token
  std::string_view evidence;                // the measurement (or the reasoning) behind the row
};
std::span<const PlanRule> plan_rules();

// The first row of plan_rules() matching the keys; throws Error naming the keys when none does.
const PlanRule& find_plan_rule(PlanOp op, DType dtype, double shape, const GpuIdentity& gpu);

// The names a plan may give for each kind of choice. The decode GEMM variants mirror
// skinny_gemm_variants() (kernels/cuda/skinny_gemm.h), which CPU-only builds cannot call;
// tests/gpu/plan_kernels_test.cu checks the two lists agree.
std::span<const std::string_view> skinny_gemm_variant_names();
std::span<const std::string_view> decode_attention_kernel_names();
std::span<const std::string_view> prefill_attention_kernel_names();
std::span<const std::string_view> prefill_gemm_path_names();

// Decode GEMM variants with the same rounding class give bitwise-equal results for every token
// count: they cut K into the same pieces, accumulate each piece k-tile by k-tile from zero, and add
// the pieces in the same order. The CTA pipeline with a cluster K split of k is class "k<k>"; the
// warp pipeline without a cluster split and w warps is "k<w>" too (its warps take the same pieces:
// the single-token twin of kernels/cuda/skinny_gemm.h); with a cluster split k it adds per-CTA
// sums of w warps, class "k<k>x<w>". Throws Error for an unknown name. Checked bitwise on the GPU
// (tests/gpu/skinny_gemm_test.cu).
std::string skinny_rounding_class(std::string_view variant);

// Whether a decode GEMM variant needs compute capability 9.0 (thread-block clusters, and for the
// CTA pipeline mbarrier-completed bulk copies): a cluster K split (_k<n>) or the CTA pipeline
// (_cta). A plan naming one for an older GPU is refused at load, not at its first launch.
bool skinny_variant_needs_sm90(std::string_view variant);

// CTAs per thread-block cluster of a decode attention kernel: 8 for mma_c8, 1 (no clusters) for the
// others. More than one needs compute capability 9.0.
int decode_attention_cluster_ranks(std::string_view kernel);
// The batch from which a decode attention kernel computes each cluster's work in one CTA ("stacked",
// the same bits: kernels/cuda/attention_decode_stacked.cu): N for mma_c8_s<N>, 0 (never) otherwise.
int decode_attention_stacked_from(std::string_view kernel);

// Bytes of decode_attention's workspace (kernels/cuda/attention.h) and cuBLASLt's workspace
// (GemmPlan::kWorkspaceBytes), computed the same way here for CPU builds; checked against the
// kernels in tests/gpu/plan_kernels_test.cu.
uint64_t decode_attention_workspace(const PlanModel& model, int split_tokens, int max_seq_len, int max_batch);
inline constexpr uint64_t kCublasLtWorkspaceBytes = uint64_t{32} << 20;
// Tokens a decode GEMM launch takes at most (kSkinnyGemmMaxTokens); a bucket of more sequences
// runs ceil(batch / 16) launches, so a token's bits never depend on how many others there are.
inline constexpr int kDecodeGemmMaxTokens = 16;
// Tokens the one-launch FFN takes at most (kSkinnyFfnMaxTokens).
inline constexpr int kDecodeFfnOneLaunchMaxTokens = 8;

// ---------------------------------------------------------------------------------------------
// The plan.

// Where a choice came from: "rule" (reason = the rule row's evidence) or "tune" (reason = what
// the measurement found).
struct ChoiceOrigin {
  std::string source;
  std::string reason;
  bool operator==(const ChoiceOrigin&) const = default;
};

// One candidate decode GEMM variant as `fuselm tune` timed it.
struct GemmTiming {
  std::string variant;
  std::vector<double> us;  // median µs per launch at each of DecodeGemmChoice::measured_m
  double total_us = 0;     // over the decode buckets: sum of launches(bucket) * us(m of the bucket)
  bool operator==(const GemmTiming&) const = default;
};

struct DecodeGemmChoice {
  PlanOp op = PlanOp::Qkv;
  std::string variant;  // skinny GEMM variant name; the engine resolves it with find_skinny_gemm_variant
  // The variant of one-token launches (the batch-1 bucket); same rounding class as `variant`, so a
  // token's bits do not change with the batch while each side runs what is fastest for it.
  std::string single_token_variant;
  // Pad the launches' shared memory so that the grid spreads evenly over the SMs (the kernels'
  // SkinnyGemmLaunch::balance_sms): same bits, a different placement. For 2+ tokens, and for one.
  bool balance_sms = false;
  bool single_token_balance_sms = false;
  int64_t rows = 0;     // the matrix: rows (output features) x cols (K)
  int64_t cols = 0;
  ChoiceOrigin origin;
  std::vector<int> measured_m;       // tune only: the token counts timed
  std::vector<GemmTiming> timings;   // tune only: every candidate
  bool operator==(const DecodeGemmChoice&) const = default;
};

// One candidate split size as `fuselm tune` timed it.
struct SplitTiming {
  int split_tokens = 0;
  std::vector<double> us;  // median µs of decode attention (both kernels) per measured case
  double mean_ratio = 0;   // mean over the cases of us / the fastest split's us: each case counts once
  bool operator==(const SplitTiming&) const = default;
};

struct AttentionCase {
  int batch = 0;
  int kv_len = 0;
  bool operator==(const AttentionCase&) const = default;
};

struct DecodeAttentionChoice {
  std::string kernel;           // decode_attention_kernel_names()
  int split_tokens = 0;         // fixed split (DecodeAttentionPlan::split_tokens)
  int max_splits_per_seq = 0;   // ceil(limits.max_seq_len / split_tokens)
  uint64_t workspace_bytes = 0; // at limits.max_batch
  ChoiceOrigin origin;
  std::vector<AttentionCase> measured_cases;  // tune only
  std::vector<SplitTiming> timings;           // tune only
  bool operator==(const DecodeAttentionChoice&) const = default;
};

// A decode batch bucket: one CUDA graph, captured for `batch` sequences (fewer are padded up).
struct DecodeBucket {
  int batch = 0;
  int gemm_launches = 0;                 // per decode GEMM op: ceil(batch / 16)
  std::array<int, 3> attention_grid{};   // decode attention's work items at most (plan.cpp attention_grid)
  bool operator==(const DecodeBucket&) const = default;
};

struct DecodePlan {
  // A request's logits must be bitwise identical whatever else is in the batch, and a different
  // K split or split size changes the order of the floating-point sums. So each op has one
  // rounding class (skinny_rounding_class) and there is one split size, shared by every bucket
  // (they may depend on the matrix shape, dtype and GPU, never on the batch). Within its class an
  // op may run one variant for one token and another for more; a bucket carries only its graph
  // size and launch grids.
  std::vector<DecodeGemmChoice> gemm;  // one per op of kDecodeGemmOps, in that order
  DecodeAttentionChoice attention;
  std::vector<DecodeBucket> buckets;   // ascending batch; the last is limits.max_batch
  // Decode launches of up to this many tokens run the gate/up and down projections in one launch
  // (kernels/cuda/skinny_ffn.h: the same bits as the two), at most kDecodeFfnOneLaunchMaxTokens;
  // 0 = always two launches.
  int ffn_one_launch_tokens = 0;
  // One-sequence decode steps run the O projection inside decode attention's launch (kernels/cuda/
  // attention.h, DecodeOFold: the same bits as its launch), where the shapes allow; the O
  // projection must round as k8 and the attention kernel run in clusters of 8.
  bool o_in_attention = false;
  bool operator==(const DecodePlan&) const = default;
};

// A prefill chunk bucket: chunks of up to `tokens` tokens run their GEMMs on `gemm`.
struct PrefillBucket {
  int tokens = 0;
  std::string gemm;  // prefill_gemm_path_names()
  bool operator==(const PrefillBucket&) const = default;
};

struct PrefillPlan {
  std::string attention_kernel;  // prefill_attention_kernel_names(); fixed per head_dim, never per chunk
  ChoiceOrigin attention_origin;
  uint64_t gemm_workspace_bytes = 0;
  ChoiceOrigin gemm_origin;
  std::vector<PrefillBucket> buckets;  // ascending tokens; the last is limits.max_prefill_tokens
  bool operator==(const PrefillPlan&) const = default;
};

struct Plan {
  int version = kPlanFormatVersion;
  std::string made_by;  // "rules" or "tune"
  GpuIdentity gpu;
  PlanModel model;
  DType dtype = DType::BF16;
  std::string fingerprint;  // model_fingerprint(model, dtype)
  PlanLimits limits;
  int kv_block_size = 0;
  ChoiceOrigin kv_block_origin;
  DecodePlan decode;
  PrefillPlan prefill;

  const DecodeGemmChoice& decode_gemm(PlanOp op) const;  // throws Error for a non-GEMM op
  // The smallest bucket holding `batch` sequences / `tokens` tokens; throws Error past the last.
  const DecodeBucket& decode_bucket(int batch) const;
  const PrefillBucket& prefill_bucket(int tokens) const;
  bool operator==(const Plan&) const = default;
};

// Decode batch buckets: 1, 2, 4, ... up to max_batch, plus max_batch itself when it is not a power
// of two. Prefill chunk buckets: 64, 128, ... up to max_prefill_tokens (plus it, likewise).
std::vector<int> decode_batch_buckets(int max_batch);
std::vector<int> prefill_chunk_buckets(int max_prefill_tokens);

// The plan the rule table gives. Throws Error when the dtype is not bf16/f16 or no rule covers the
// GPU (the CUDA backend needs compute capability 8.0 or newer).
Plan make_rule_plan(const ModelConfig& config, DType dtype, const GpuIdentity& gpu, const PlanLimits& limits);

// Fills the derived fields of `plan` (fingerprint, buckets, splits, workspaces) from its model,
// limits and choices. make_rule_plan and the tuner call it after setting the choices.
void complete_plan(Plan& plan);

// Checks a plan's own consistency (known names, fingerprint, buckets, shapes); `where` names it in
// the error.
void validate_plan(const Plan& plan, const std::string& where);

// Throws Error when `plan` was made for another GPU, other model shapes or another dtype, saying
// what differs and what to do; `plan_name` (e.g. the file) names the plan in the message.
void check_plan_matches(const Plan& plan, const ModelConfig& config, DType dtype, const GpuIdentity& gpu,
                        std::string_view plan_name = "the plan");
// Throws Error when the engine's limits need buckets or workspace the plan does not have.
void check_plan_covers(const Plan& plan, const PlanLimits& limits, std::string_view plan_name = "the plan");

// ---------------------------------------------------------------------------------------------
// Serialisation.

// Keys keep the order they are written in (format and version first), so files read top down.
using PlanJson = nlohmann::ordered_json;
PlanJson plan_to_json(const Plan& plan);
// Throws Error naming `where`, the key path and what was expected for any missing or ill-typed key,
// unknown name, or version other than kPlanFormatVersion.
Plan plan_from_json(const PlanJson& j, const std::string& where);
// Reads and validates a plan file; recognises empty files, HTML pages, LFS pointers and malformed JSON.
Plan load_plan_file(const std::string& path);
void save_plan_file(const Plan& plan, const std::string& path);

// The readable table `fuselm plan` prints.
std::string render_plan(const Plan& plan);
std::string render_plan_rules();

}  // namespace fuselm
