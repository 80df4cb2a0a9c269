// The plan's data: the rule table, the names a plan may use, and GPU presets.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <iterator>

#include "core/error.h"
#include "plan/plan.h"

namespace fuselm {

namespace {

constexpr uint32_t bit(PlanOp op) { return 1u << static_cast<unsigned>(op); }
constexpr uint32_t kDecodeGemms =
    bit(PlanOp::Qkv) | bit(PlanOp::O) | bit(PlanOp::GateUp) | bit(PlanOp::Down) | bit(PlanOp::LmHead);
constexpr RuleRange kAny{0, kUnbounded};
constexpr RuleRange kHopper{90, 100};
constexpr RuleRange kAmpereOrNewer{80, kUnbounded};
constexpr RuleRange exactly(double v) { return {v, v + 1}; }
constexpr uint32_t kHalfPrecision =
    (1u << static_cast<unsigned>(DType::BF16)) | (1u << static_cast<unsigned>(DType::F16));

// Read top to bottom; the first row whose keys all match gives the choice. Architecture-specific
// rows (measured there) come before the sm_80+ rows that carry the same choice to GPUs where
// nothing has been measured yet. No row matches below sm_80: the CUDA backend needs bf16 tensor
// cores. Measurements: docs/kernels/*.md and bench/results/.
constexpr PlanRule kRules[] = {
    // Decode GEMMs. The shape bucket is 16-row tiles per SM. On Hopper: the CTA pipeline with one
    // row tile per warp (activations staged once per 64 weight rows, so m = 16 costs little more
    // than m = 1), K split across a cluster until the grid has >= 2.5 CTAs per SM
    // (default_skinny_variant in kernels/cuda/skinny_gemm.h; docs/kernels/skinny_gemm.md).
    // The gate/up projection of large FFNs: 7 row tiles a CTA, K split in two, in tile groups (one 7 KB
    // copy a stage), the grid spread evenly: 512 CTAs on the 8B shape, four on 128 SMs (clusters of
    // four place 16-tile CTAs on at most 124 SMs, and the SMs with the most CTAs end the kernel).
    {.ops = bit(PlanOp::GateUp), .shape = {10, kUnbounded}, .sm = kHopper, .choice = "rt1_w7_k2_cta",
     .balance_sms = true, .single_token_balance_sms = true,
     .evidence = "H200 bf16, 8B gate_up 28672x4096 (13.6 row tiles/SM) in the whole step against rt2_w8_k4_cta "
                 "(16 tiles a CTA, K in four): batch 1 256.2-256.9 against 250.2-250.4 tok/s, batch 16 3,127-3,133 "
                 "against 3,098-3,099 output tok/s; unbalanced 2,948-2,974 at batch 16 (its gate/up 69.8 against "
                 "59.2 us a layer) (bench/results/dev/ab/s19/)"},
    // Large matrices: K split in two across a cluster, 8 one-tile warps per CTA at every m, the grid
    // spread evenly at every m (on the measured shapes, the LM heads).
    {.ops = kDecodeGemms, .shape = {10, kUnbounded}, .sm = kHopper, .choice = "rt1_w8_k2_cta", .balance_sms = true,
     .single_token_balance_sms = true,
     .evidence = "Grids spread evenly for 2+ tokens: H200 bf16, with every decode GEMM of the 1B shape so, batch 16 "
                 "14,708-14,789 against 13,797-13,956 output tok/s (bench/results/dev/ab/s19/). "
                 "And for one token: the LM head 32000x2048 (500 CTAs, five on 85 SMs unspread), batch 1 1B "
                 "1,381.8-1,382.1 against 1,371.1-1,371.6 tok/s; 32000x4096 8B 266.8 against 266.3 "
                 "(bench/results/dev/ab/s35/b/). "
                 "H200 bf16, 8B gate_up 28672x4096 (13.6 row tiles/SM): one token 60.7 us in fuselm tune, against "
                 "62.9 for rt1_w4_cta (bench/results/invariance/README.md). For 2+ tokens, in the whole step: batch "
                 "2-64 output tok/s +5-9% against rt2_w4_k2_cta (2,942-2,998 against 2,785-2,796 at batch 16), "
                 "which fuselm tune had ranked first in isolation; the LM head 32000x4096 alike within noise "
                 "(bench/results/dev/ab/s13/)"},
    {.ops = kDecodeGemms, .shape = {5, 10}, .sm = kHopper, .choice = "rt1_w4_k2_cta", .balance_sms = true,
     .single_token_balance_sms = true,
     .evidence = "H200 bf16, 1B gate_up 16384x2048 (7.8 row tiles/SM): 23.0 us at m=1, 23.4 us at m=16 "
                 "(bench/results/h200-skinny-gemm-lab3.txt). Its 512 CTAs spread evenly (at most 4 an SM, where "
                 "62 SMs took 6): batch 1 1,166-1,173 against 1,107-1,124 tok/s; batch 16 with every 1B GEMM "
                 "so 14,708-14,789 against 13,797-13,956 output tok/s, with this one alone 13,487-13,563 "
                 "(bench/results/dev/ab/s19/)"},
    // One token on the warp-pipeline twin of the k4 / k8 CTA variants (docs/kernels/skinny_gemm.md).
    {.ops = kDecodeGemms, .shape = {2.5, 5}, .sm = kHopper, .choice = "rt1_w4_k4_cta", .single_token = "rt1_w4",
     .evidence = "H200 bf16, 8B qkv 6144x4096 (2.9 row tiles/SM): 18.3 us at m=1, 20.5 us at m=16; one token "
                 "on rt1_w4 16.6 against 19.4 us with PDL (bench/results/h200-skinny-gemm-lab3.txt)"},
    {.ops = kDecodeGemms, .shape = {0, 2.5}, .sm = kHopper, .choice = "rt1_w4_k8_cta", .single_token = "rt1_w8",
     .balance_sms = true,
     .evidence = "Grids spread evenly for 2+ tokens (the 1B shape's batch 16 +6% with every GEMM so, 8B batch 16 "
                 "even; bench/results/dev/ab/s19/). H200 bf16, 8B o 4096x4096 and down 4096x14336 (1.9 row tiles/SM): "
                 "12.8/13.3 and 37.6/37.1 us "
                 "at m=1/16; one token on rt1_w8 10.7 and 32.1 against 13.4 and 37.6 us with PDL "
                 "(bench/results/h200-skinny-gemm-lab3.txt)"},
    // Elsewhere (no clusters, or not measured): the warp pipeline without K split.
    {.ops = kDecodeGemms, .shape = {8, kUnbounded}, .sm = kAmpereOrNewer, .choice = "rt4_w8",
     .evidence = "not measured on this architecture: without clusters, 4 row tiles per CTA for large matrices "
                 "(activation traffic at m = 16 a quarter of the weights'); run fuselm tune"},
    {.ops = kDecodeGemms, .shape = {0, 8}, .sm = kAmpereOrNewer, .choice = "rt2_w8",
     .evidence = "not measured on this architecture: without clusters, 2 row tiles per CTA; run fuselm tune"},

    // Decode attention: kernel by head_dim, one split size for every batch.
    {.ops = bit(PlanOp::DecodeAttention), .shape = exactly(64), .sm = kHopper, .choice = "mma_c8_s16",
     .evidence = "H200 bf16, Llama-3.2-1B shape, 512-token prompts: clusters of 8 below 16 sequences a launch, "
                 "each cluster's work in one CTA from 16 on (the same bits): batch-1 decode 1,256.9-1,258.2 against "
                 "1,220.8-1,222.5 tok/s with one CTA per split (+3.0%), batch 16 14,670-14,704 against 15,193 output "
                 "tok/s (-3.3%); clusters at every batch 1,258.7 (bench/results/dev/ab/s21/). Batch-1 latency is what "
                 "this shape is served for"},
    {.ops = bit(PlanOp::DecodeAttention), .shape = exactly(64), .sm = kAmpereOrNewer, .choice = "mma",
     .evidence = "tensor-core split-KV kernel: one wave of CTAs takes (split, head group) items, 3 K/V stages "
                 "(2 where a block cannot have 100 KB) (kernels/cuda/attention_decode.cu). In clusters of 8 on H200, "
                 "Llama-3.2-1B shape: batch 1 +2.5% (1,157-1,165 against 1,130-1,135 tok/s) but batch 16 with "
                 "512-token prompts -7% (9,388-9,600 against 10,223-10,274 output tok/s; batch 16 at 128 tokens "
                 "even), bench/results/dev/ab/s12/; session 8: +3.6% and -17% (bench/results/dev/ab/clusters/). "
                 "So not for head_dim 64"},
    {.ops = bit(PlanOp::DecodeAttention), .shape = exactly(128), .sm = kHopper, .choice = "mma_c8_s16",
     .evidence = "H200 bf16, Llama-3.1-8B shape: the split-KV kernel in clusters of 8 (a sequence of up to 2,048 "
                 "tokens is one split over up to 8 CTAs of >= 128 keys, merged in distributed shared memory): batch 1 "
                 "decode 234.8-235.3 against 227.2-227.6 tok/s with one CTA per split, batch 16 2,772-2,782 against "
                 "2,873-2,882 output tok/s (bench/results/dev/ab/2ed84a3/; docs/kernels/attention.md). From 16 "
                 "sequences per launch each cluster's work runs in one CTA, rank after rank (the same bits): "
                 "batch-16 attention 21.7 against 38.5 us per layer after the QKV projection at 512-token prompts; "
                 "decode tok/s at batch 16 3,113-3,116 against 2,905-2,907 (512-token prompts) and 3,437-3,453 "
                 "against 3,345-3,373 (128), batch 64 +3-8%; below 16 sequences the clusters are faster "
                 "(bench/results/dev/ab/s15/)"},
    {.ops = bit(PlanOp::DecodeAttention), .shape = exactly(128), .sm = kAmpereOrNewer, .choice = "mma",
     .evidence = "tensor-core split-KV kernel: one wave of CTAs takes (split, head group) items, 3 K/V stages "
                 "(2 where a block cannot have 100 KB) (kernels/cuda/attention_decode.cu)"},
    {.ops = bit(PlanOp::DecodeAttention), .sm = kAmpereOrNewer, .choice = "generic",
     .evidence = "head_dim other than 64 and 128: the CUDA-core fallback, which does not split "
                 "(kernels/cuda/attention_generic.cu)"},
    {.ops = bit(PlanOp::DecodeSplit), .sm = kAmpereOrNewer, .choice = "256",
     .evidence = "H200 bf16, Llama-3-8B shape, one-wave kernel: 128-token splits took 15.6 against 20.4 us at batch "
                 "1 x 512 tokens, 112 against 80 us at 32k tokens and 301 against 241 us at batch 16 x 8192; one split "
                 "must serve every batch and length (docs/kernels/attention.md)"},

    // Prefill attention: the tiling fixed per head_dim (a per-chunk choice would change bits).
    {.ops = bit(PlanOp::PrefillAttention), .shape = exactly(64), .sm = kAmpereOrNewer, .choice = "mma_r32_k64",
     .evidence = "H200 bf16, TinyLlama shape, one 4096-token prompt: 32 rows/warp x 64 keys 348 us, 438-439 us "
                 "for the other tilings (docs/kernels/attention.md)"},
    {.ops = bit(PlanOp::PrefillAttention), .shape = exactly(128), .sm = kAmpereOrNewer, .choice = "mma_r32_k32",
     .evidence = "H200 bf16, Llama-3-8B shape, one 4096-token prompt: 32 rows/warp x 32 keys 789 us, 802 us "
                 "(32x64) and 828 us (16x64) (docs/kernels/attention.md)"},
    {.ops = bit(PlanOp::PrefillAttention), .sm = kAmpereOrNewer, .choice = "generic",
     .evidence = "head_dim other than 64 and 128: the CUDA-core fallback (kernels/cuda/attention_generic.cu)"},

    // Prefill GEMMs: compute-bound at chunk sizes. On Hopper our TMA + wgmma kernels, batch-invariant
    // (each output one CTA's full-K sum) and the gate/up one with SwiGLU in its output pass; both
    // tile widths give the same bits, so the width follows the chunk. make_rule_plan falls back to
    // cuBLASLt for every chunk when a projection's shape does not fit them.
    {.ops = bit(PlanOp::PrefillGemm), .dtypes = kHalfPrecision, .shape = {0, 1025}, .sm = kHopper,
     .choice = "sm90_w128",
     .evidence = "H200, tiles of 128 features (twice the CTAs of 256 where tiles are few): against cuBLASLt's "
                 "batch-invariant algorithm, Llama-3.1-8B shape prefill +30% at 128 tokens (16,077-16,095 against "
                 "12,282-12,442 tok/s), +4-7% at 512; o and down at 512 tokens 38 and 101 against 60 and 169 us "
                 "(bench/results/dev/ab/s14/, docs/kernels/gemm_sm90.md)"},
    {.ops = bit(PlanOp::PrefillGemm), .dtypes = kHalfPrecision, .sm = kHopper, .choice = "sm90_w256",
     .evidence = "H200, tiles of 256 features above 1,024 tokens: Llama-3.1-8B shape prefill even at 2048 tokens, "
                 "-2.5% at 8192 against cuBLASLt's batch-invariant algorithm (bench/results/dev/ab/s14/, "
                 "docs/kernels/gemm_sm90.md); gate/up with SwiGLU fused 634-758 TFLOP/s at 512-2048 tokens"},
    {.ops = bit(PlanOp::PrefillGemm), .sm = kAmpereOrNewer, .choice = "cublaslt",
     .evidence = "cuBLASLt, one split-K-free algorithm per shape for every chunk on the fused path (batch "
                 "invariant; kernels/cuda/gemm.h); cuBLAS runs bf16 GEMMs at 788 TFLOP/s on H200"},

    {.ops = bit(PlanOp::KvBlock), .sm = kAmpereOrNewer, .choice = "16",
     .evidence = "H200: decode tok/s within 1.5% for blocks of 16, 32 and 64 tokens at depths 4096 and 16384 "
                 "(docs/kernels/baseline.md); 16 wastes the fewest slots"},
};

// The order of skinny_gemm_variants() in kernels/cuda/skinny_gemm.cu.
constexpr std::string_view kSkinnyGemmVariants[] = {
    "rt1_w4", "rt1_w8", "rt2_w4", "rt2_w8", "rt4_w4", "rt4_w8", "rt1_w4_k2", "rt1_w8_k2", "rt2_w4_k2", "rt2_w8_k2",
    "rt4_w4_k2", "rt4_w8_k2", "rt1_w4_k4", "rt1_w8_k4", "rt2_w4_k4", "rt2_w8_k4", "rt4_w4_k4", "rt4_w8_k4",
    "rt1_w4_k8", "rt1_w8_k8", "rt2_w4_k8", "rt2_w8_k8", "rt4_w4_k8", "rt4_w8_k8", "rt1_w4_cta", "rt2_w4_cta",
    "rt1_w8_cta", "rt2_w8_cta", "rt4_w4_cta", "rt1_w7_cta", "rt1_w4_k2_cta", "rt2_w4_k2_cta", "rt1_w8_k2_cta",
    "rt2_w8_k2_cta", "rt4_w4_k2_cta", "rt1_w7_k2_cta", "rt1_w4_k4_cta", "rt2_w4_k4_cta", "rt1_w8_k4_cta",
    "rt2_w8_k4_cta", "rt4_w4_k4_cta", "rt1_w7_k4_cta", "rt1_w4_k8_cta", "rt2_w4_k8_cta", "rt1_w8_k8_cta",
    "rt2_w8_k8_cta", "rt4_w4_k8_cta", "rt1_w7_k8_cta", "rt1_w4_reg", "rt1_w8_reg", "rt1_w4_k2_reg", "rt1_w8_k2_reg",
    "rt1_w4_k4_reg", "rt1_w8_k4_reg", "rt1_w4_k8_reg", "rt1_w8_k8_reg"};
constexpr std::string_view kDecodeAttentionKernels[] = {"mma", "mma_c8", "mma_c8_s4", "mma_c8_s8", "mma_c8_s16", "generic"};
constexpr std::string_view kPrefillAttentionKernels[] = {"mma_r32_k64", "mma_r32_k32", "generic"};
constexpr std::string_view kPrefillGemmPaths[] = {"cublaslt", "sm90_w128", "sm90_w256"};

struct Preset {
  std::string_view key;
  GpuIdentity gpu;
};

constexpr uint64_t kMiB = uint64_t{1} << 20;

const std::vector<Preset>& presets() {
  static const std::vector<Preset> list = {
      {"h200", {"NVIDIA H200", 9, 0, 132, 150109880320ull}},
      {"h100", {"NVIDIA H100 80GB HBM3", 9, 0, 132, 81008 * kMiB}},
      {"h100-pcie", {"NVIDIA H100 PCIe", 9, 0, 114, 81008 * kMiB}},
      {"a100", {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 81251 * kMiB}},
      {"a100-40g", {"NVIDIA A100-SXM4-40GB", 8, 0, 108, 40536 * kMiB}},
      {"l40s", {"NVIDIA L40S", 8, 9, 142, 45589 * kMiB}},
      {"rtx4090", {"NVIDIA GeForce RTX 4090", 8, 9, 128, 24217 * kMiB}},
  };
  return list;
}

}  // namespace

std::span<const PlanRule> plan_rules() { return kRules; }
std::span<const std::string_view> skinny_gemm_variant_names() { return kSkinnyGemmVariants; }
std::span<const std::string_view> decode_attention_kernel_names() { return kDecodeAttentionKernels; }
std::span<const std::string_view> prefill_attention_kernel_names() { return kPrefillAttentionKernels; }
std::span<const std::string_view> prefill_gemm_path_names() { return kPrefillGemmPaths; }

std::string skinny_rounding_class(std::string_view variant) {
  FUSELM_CHECK(std::find(std::begin(kSkinnyGemmVariants), std::end(kSkinnyGemmVariants), variant) !=
                   std::end(kSkinnyGemmVariants),
               "'", variant, "' is not a decode GEMM variant of this build");
  // Names read rt<row tiles>_w<warps>[_k<cluster split>][_cta|_reg] (SkinnyGemmVariant::name).
  auto number_after = [&](std::string_view tag) {  // 1 when the tag is absent
    int n = 1;
    if (const size_t at = variant.find(tag); at != std::string_view::npos)
      std::from_chars(variant.data() + at + tag.size(), variant.data() + variant.size(), n);
    return n;
  };
  const int warps = number_after("_w"), k_split = number_after("_k");
  if (variant.ends_with("_cta") || variant.ends_with("_reg")) return str_cat("k", k_split);  // warps split rows
  return k_split == 1 ? str_cat("k", warps) : str_cat("k", k_split, "x", warps);
}

bool skinny_variant_needs_sm90(std::string_view variant) {
  return variant.find("_k") != std::string_view::npos || variant.ends_with("_cta");
}

int decode_attention_cluster_ranks(std::string_view kernel) { return kernel.starts_with("mma_c8") ? 8 : 1; }

int decode_attention_stacked_from(std::string_view kernel) {
  if (!kernel.starts_with("mma_c8_s")) return 0;
  int batch = 0;
  for (char c : kernel.substr(8)) batch = batch * 10 + (c - '0');
  return batch;
}

const PlanRule& find_plan_rule(PlanOp op, DType dtype, double shape, const GpuIdentity& gpu) {
  const double memory_gib = static_cast<double>(gpu.memory_bytes) / double(uint64_t{1} << 30);
  for (const PlanRule& r : kRules) {
    if ((r.ops & bit(op)) == 0) continue;
    if (r.dtypes != 0 && (r.dtypes & (1u << static_cast<unsigned>(dtype))) == 0) continue;
    if (r.shape.contains(shape) && r.sm.contains(gpu.sm()) && r.sm_count.contains(gpu.sm_count) &&
        r.memory_gib.contains(memory_gib))
      return r;
  }
  fail("no plan rule for ", plan_op_name(op), " (", dtype_name(dtype), ", shape measure ", shape, ") on ",
       gpu.describe(), gpu.sm() < 80 ? ": the CUDA backend needs compute capability 8.0 or newer (bf16 tensor cores)"
                                     : ": the rule table has no row for it; run `fuselm tune` on this GPU");
}

std::string GpuIdentity::describe() const {
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(memory_bytes) / double(uint64_t{1} << 30));
  return str_cat(name.empty() ? "unnamed GPU" : name, " (sm_", sm(), ", ", sm_count, " SMs, ", mem, ")");
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.emplace_back(p.key);
  return names;
}

GpuIdentity gpu_preset(std::string_view name) {
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const Preset& p : presets())
    if (p.key == key) return p.gpu;
  std::string list;
  for (const Preset& p : presets()) list += str_cat(list.empty() ? "" : ", ", p.key);
  fail("unknown GPU preset '", name, "' (presets: ", list, "); or describe the GPU with --sm, --sm-count and --memory-gb");
}

std::array<int, 2> parse_sm_arch(std::string_view text) {
  std::string_view s = text;
  if (s.starts_with("sm_") || s.starts_with("SM_")) s.remove_prefix(3);
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) s.remove_suffix(1);  // sm_90a, sm_100f
  int major = -1, minor = -1;
  auto parse = [](std::string_view part, int& out) {
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return !part.empty() && ec == std::errc() && end == part.data() + part.size() && out >= 0;
  };
  bool ok = false;
  if (size_t dot = s.find('.'); dot != std::string_view::npos) {
    ok = parse(s.substr(0, dot), major) && parse(s.substr(dot + 1), minor) && minor < 10;
  } else if (s.size() >= 2) {
    ok = parse(s.substr(0, s.size() - 1), major) && parse(s.substr(s.size() - 1), minor);
  }
  FUSELM_CHECK(ok && major >= 1 && major < 100, "'", text, "' is not a compute capability; write it like 90, 9.0 "
               "or sm_90 (8.0 for A100, 8.9 for L40S and RTX 4090, 9.0 for H100 and H200)");
  return {major, minor};
}

}  // namespace fuselm
