#include "plan/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "kernels/cuda/decode_items.h"
#include "kernels/cuda/gemm_sm90_shapes.h"

namespace fuselm {

namespace {

// Bounds on the limits, for the flags and for plan files alike: the bucket lists double up to them
// in int, which a limit above 2^30 would overflow.
constexpr int kMaxBatchLimit = 65535;
constexpr int kMaxPrefillTokensLimit = 1 << 20;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_known(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string join(std::span<const std::string_view> names) {
  std::string out;
  for (std::string_view n : names) out += str_cat(out.empty() ? "" : ", ", n);
  return out;
}

std::string join_ints(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += str_cat(out.empty() ? "" : ", ", x);
  return out;
}

// Decode attention's work at most: (kv heads x 16-head tiles of a GQA group, sequences, split
// slots) items for the tensor-core kernel, which one wave of CTAs takes in turn; the fallback's grid
// (heads, sequences).
std::array<int, 3> attention_grid(const Plan& plan, int batch) {
  const PlanModel& m = plan.model;
  if (plan.decode.attention.kernel.starts_with("mma")) {
    const int group = m.num_heads / std::max(m.num_kv_heads, 1);
    return {m.num_kv_heads * static_cast<int>(ceil_div(group, 16)), batch, plan.decode.attention.max_splits_per_seq};
  }
  return {m.num_heads, batch, 1};
}

int parse_tokens_choice(const PlanRule& rule, PlanOp op) {
  int v = 0;
  for (char c : rule.choice) v = v * 10 + (c - '0');
  FUSELM_CHECK(v > 0, "rule table: ", plan_op_name(op), " choice '", rule.choice, "' is not a token count");
  return v;
}

ChoiceOrigin rule_origin(const PlanRule& rule) { return {"rule", std::string(rule.evidence)}; }

bool is_sm90_prefill_gemm(std::string_view path) { return path.starts_with("sm90_"); }

// Why the model's prefill projections do not all fit the sm_90a GEMMs ("" when they do): the first
// that does not, with its [rows][cols] (gate_up's rows are gate and up together).
std::string sm90_prefill_misfit(const PlanModel& m) {
  for (PlanOp op : {PlanOp::Qkv, PlanOp::O, PlanOp::Down, PlanOp::GateUp}) {
    const auto [rows, cols] = decode_gemm_shape(op, m);
    const bool fits =
        op == PlanOp::GateUp ? gemm_swiglu_sm90_shape_ok(rows / 2, cols) : gemm_sm90_shape_ok(rows, cols, 256);
    if (!fits) return str_cat(plan_op_name(op), " [", rows, "][", cols, "]");
  }
  return "";
}

}  // namespace

std::string_view plan_op_name(PlanOp op) {
  switch (op) {
    case PlanOp::Qkv: return "qkv";
    case PlanOp::O: return "o";
    case PlanOp::GateUp: return "gate_up";
    case PlanOp::Down: return "down";
    case PlanOp::LmHead: return "lm_head";
    case PlanOp::DecodeAttention: return "decode_attention";
    case PlanOp::DecodeSplit: return "decode_split";
    case PlanOp::PrefillAttention: return "prefill_attention";
    case PlanOp::PrefillGemm: return "prefill_gemm";
    case PlanOp::KvBlock: return "kv_block";
  }
  return "?";
}

std::array<int64_t, 2> decode_gemm_shape(PlanOp op, const PlanModel& m) {
  const int64_t hidden = m.hidden_size, q_dim = int64_t{m.num_heads} * m.head_dim,
                kv_dim = int64_t{m.num_kv_heads} * m.head_dim, ffn = m.intermediate_size;
  switch (op) {
    case PlanOp::Qkv: return {q_dim + 2 * kv_dim, hidden};
    case PlanOp::O: return {hidden, q_dim};
    case PlanOp::GateUp: return {2 * ffn, hidden};
    case PlanOp::Down: return {hidden, ffn};
    case PlanOp::LmHead: return {m.vocab_size, hidden};
    default: fail("decode_gemm_shape: ", plan_op_name(op), " is not a decode GEMM");
  }
}

double rule_shape_measure(PlanOp op, const PlanModel& model, const GpuIdentity& gpu, int prefill_tokens) {
  switch (op) {
    case PlanOp::Qkv:
    case PlanOp::O:
    case PlanOp::GateUp:
    case PlanOp::Down:
    case PlanOp::LmHead:
      return static_cast<double>(ceil_div(decode_gemm_shape(op, model)[0], 16)) / std::max(gpu.sm_count, 1);
    case PlanOp::DecodeAttention:
    case PlanOp::PrefillAttention: return model.head_dim;
    case PlanOp::PrefillGemm: return prefill_tokens;
    case PlanOp::DecodeSplit:
    case PlanOp::KvBlock: return 0;
  }
  return 0;
}

PlanModel plan_model(const ModelConfig& c) {
  return {c.architecture, c.hidden_size,       c.num_layers, c.num_heads, c.num_kv_heads,
          c.head_dim,     c.intermediate_size, c.vocab_size};
}

std::string model_fingerprint(const PlanModel& m, DType dtype) {
  const std::string text =
      str_cat(m.architecture, ";hidden=", m.hidden_size, ";layers=", m.num_layers, ";heads=", m.num_heads,
              ";kv_heads=", m.num_kv_heads, ";head_dim=", m.head_dim, ";ffn=", m.intermediate_size,
              ";vocab=", m.vocab_size, ";dtype=", dtype_name(dtype));
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

PlanLimits make_plan_limits(const ModelConfig& config, int max_batch, int max_prefill_tokens, int max_seq_len) {
  FUSELM_CHECK(max_batch >= 1 && max_batch <= kMaxBatchLimit, "--max-batch must be between 1 and ", kMaxBatchLimit,
               ", got ", max_batch);
  FUSELM_CHECK(max_prefill_tokens >= 1 && max_prefill_tokens <= kMaxPrefillTokensLimit,
               "--max-prefill-tokens must be between 1 and ", kMaxPrefillTokensLimit, ", got ", max_prefill_tokens);
  FUSELM_CHECK(max_seq_len >= 0, "--max-seq-len must be >= 0 (0 = the model's context), got ", max_seq_len);
  PlanLimits l;
  l.max_batch = max_batch;
  l.max_prefill_tokens = max_prefill_tokens;
  const int model_max = config.max_position_embeddings;
  if (max_seq_len > 0)
    l.max_seq_len = model_max > 0 ? std::min(model_max, max_seq_len) : max_seq_len;
  else
    l.max_seq_len = model_max > 0 ? std::min(model_max, kPlanDefaultMaxSeqLen) : kPlanDefaultMaxSeqLen;
  return l;
}

std::vector<int> decode_batch_buckets(int max_batch) {
  std::vector<int> b;
  for (int x = 1; x < max_batch; x *= 2) b.push_back(x);
  b.push_back(max_batch);
  return b;
}

std::vector<int> prefill_chunk_buckets(int max_prefill_tokens) {
  std::vector<int> b;
  for (int x = 64; x < max_prefill_tokens; x *= 2) b.push_back(x);
  b.push_back(max_prefill_tokens);
  return b;
}

uint64_t decode_attention_workspace(const PlanModel& m, int split_tokens, int max_seq_len, int max_batch) {
  if (split_tokens <= 0 || max_seq_len <= 0 || max_batch <= 0 || m.num_kv_heads <= 0) return 0;
  // A 16-byte header (work counters), then per sequence: a merge counter per 16-head group, then
  // per (head, split) one fp32 log2-sum-exp and head_dim fp32 partial outputs; each part 16-byte
  // aligned (kernels/cuda/attention_decode.cu).
  const auto align16 = [](uint64_t bytes) { return (bytes + 15) / 16 * 16; };
  const uint64_t groups = static_cast<uint64_t>(m.num_kv_heads) * ceil_div(m.num_heads / m.num_kv_heads, 16);
  const uint64_t slots = static_cast<uint64_t>(m.num_heads) * ceil_div(max_seq_len, split_tokens);
  return 16 + max_batch * (align16(groups * 4) + align16(slots * 4) + slots * m.head_dim * 4);
}

// ---------------------------------------------------------------------------------------------

const DecodeGemmChoice& Plan::decode_gemm(PlanOp op) const {
  for (const DecodeGemmChoice& c : decode.gemm)
    if (c.op == op) return c;
  fail("the plan has no decode GEMM choice for ", plan_op_name(op), " (decode GEMMs: qkv, o, gate_up, down, lm_head)");
}

const DecodeBucket& Plan::decode_bucket(int batch) const {
  FUSELM_CHECK(batch >= 1, "decode batch must be at least 1, got ", batch);
  for (const DecodeBucket& b : decode.buckets)
    if (b.batch >= batch) return b;
  fail("a decode step of ", batch, " sequences is over the plan's largest batch bucket (",
       decode.buckets.empty() ? 0 : decode.buckets.back().batch, "); make the plan with --max-batch ", batch,
       " or more");
}

const PrefillBucket& Plan::prefill_bucket(int tokens) const {
  FUSELM_CHECK(tokens >= 1, "prefill chunk must have at least 1 token, got ", tokens);
  for (const PrefillBucket& b : prefill.buckets)
    if (b.tokens >= tokens) return b;
  fail("a prefill chunk of ", tokens, " tokens is over the plan's largest chunk bucket (",
       prefill.buckets.empty() ? 0 : prefill.buckets.back().tokens, "); make the plan with --max-prefill-tokens ",
       tokens, " or more");
}

void complete_plan(Plan& plan) {
  plan.fingerprint = model_fingerprint(plan.model, plan.dtype);
  for (DecodeGemmChoice& c : plan.decode.gemm) {
    const auto [rows, cols] = decode_gemm_shape(c.op, plan.model);
    c.rows = rows;
    c.cols = cols;
  }
  DecodeAttentionChoice& a = plan.decode.attention;
  a.max_splits_per_seq = a.split_tokens > 0 ? static_cast<int>(ceil_div(plan.limits.max_seq_len, a.split_tokens)) : 0;
  a.workspace_bytes =
      decode_attention_workspace(plan.model, a.split_tokens, plan.limits.max_seq_len, plan.limits.max_batch);
  plan.decode.buckets.clear();
  for (int batch : decode_batch_buckets(plan.limits.max_batch))
    plan.decode.buckets.push_back(
        {batch, static_cast<int>(ceil_div(batch, kDecodeGemmMaxTokens)), attention_grid(plan, batch)});
}

Plan make_rule_plan(const ModelConfig& config, DType dtype, const GpuIdentity& gpu, const PlanLimits& limits) {
  FUSELM_CHECK(dtype == DType::BF16 || dtype == DType::F16, "the CUDA backend computes in bf16 or f16, not ",
               dtype_name(dtype), "; plan with --dtype bf16 or --dtype f16");
  config.validate("the model");
  Plan plan;
  plan.made_by = "rules";
  plan.gpu = gpu;
  plan.model = plan_model(config);
  plan.dtype = dtype;
  plan.limits = limits;
  auto rule = [&](PlanOp op, int prefill_tokens = 0) -> const PlanRule& {
    return find_plan_rule(op, dtype, rule_shape_measure(op, plan.model, gpu, prefill_tokens), gpu);
  };

  const PlanRule& kv = rule(PlanOp::KvBlock);
  plan.kv_block_size = parse_tokens_choice(kv, PlanOp::KvBlock);
  plan.kv_block_origin = rule_origin(kv);

  for (PlanOp op : kDecodeGemmOps) {
    const PlanRule& r = rule(op);
    DecodeGemmChoice c;
    c.op = op;
    c.variant = r.choice;
    c.single_token_variant = r.single_token.empty() ? r.choice : r.single_token;
    c.balance_sms = r.balance_sms;
    c.single_token_balance_sms = r.single_token_balance_sms;
    c.origin = rule_origin(r);
    plan.decode.gemm.push_back(std::move(c));
  }
  const PlanRule& attn = rule(PlanOp::DecodeAttention);
  const PlanRule& split = rule(PlanOp::DecodeSplit);
  plan.decode.attention.kernel = attn.choice;
  plan.decode.attention.split_tokens = parse_tokens_choice(split, PlanOp::DecodeSplit);
  plan.decode.attention.origin = {"rule", str_cat(attn.evidence, "; split: ", split.evidence)};
  FUSELM_CHECK(plan.decode.attention.split_tokens % plan.kv_block_size == 0, "rule table: decode split ",
               plan.decode.attention.split_tokens, " is not a multiple of the KV block size ", plan.kv_block_size);

  const PlanRule& prefill_attn = rule(PlanOp::PrefillAttention);
  plan.prefill.attention_kernel = prefill_attn.choice;
  plan.prefill.attention_origin = rule_origin(prefill_attn);
  plan.prefill.gemm_workspace_bytes = kCublasLtWorkspaceBytes;
  std::string gemm_evidence;
  for (int tokens : prefill_chunk_buckets(limits.max_prefill_tokens)) {
    const PlanRule& r = rule(PlanOp::PrefillGemm, tokens);
    plan.prefill.buckets.push_back({tokens, std::string(r.choice)});
    if (gemm_evidence.find(r.evidence) == std::string::npos)
      gemm_evidence += str_cat(gemm_evidence.empty() ? "" : "; ", r.choice, ": ", r.evidence);
  }
  // The sm_90a GEMMs serve every chunk or none (their bits differ from cuBLASLt's, and a token's
  // result may not depend on its chunk's size), and only a model whose every projection fits them.
  if (is_sm90_prefill_gemm(plan.prefill.buckets.front().gemm))
    if (const std::string misfit = sm90_prefill_misfit(plan.model); !misfit.empty()) {
      for (PrefillBucket& b : plan.prefill.buckets) b.gemm = "cublaslt";
      gemm_evidence = str_cat("cuBLASLt, one split-K-free algorithm per shape for every chunk: the ", misfit,
                              " projection does not fit the sm_90a GEMMs (kernels/cuda/gemm_sm90_shapes.h)");
    }
  plan.prefill.gemm_origin = {"rule", gemm_evidence};
  complete_plan(plan);
  validate_plan(plan, "the rule plan");
  return plan;
}

void validate_plan(const Plan& plan, const std::string& where) {
  auto check = [&](bool ok, const auto&... parts) {
    if (!ok) fail(where, ": ", parts..., "; make the plan again with `fuselm plan` or `fuselm tune`");
  };
  check(plan.version == kPlanFormatVersion, "format version ", plan.version, ", this build reads version ",
        kPlanFormatVersion);
  check(plan.made_by == "rules" || plan.made_by == "tune", "made_by is '", plan.made_by, "' (expected rules or tune)");
  check(plan.dtype == DType::BF16 || plan.dtype == DType::F16, "dtype ", dtype_name(plan.dtype),
        " (the CUDA backend computes in bf16 or f16)");
  const GpuIdentity& g = plan.gpu;
  check(!g.name.empty() && g.sm_major >= 1 && g.sm_minor >= 0 && g.sm_count >= 1 && g.memory_bytes > 0,
        "gpu is incomplete (name '", g.name, "', sm_", g.sm(), ", ", g.sm_count, " SMs, ", g.memory_bytes, " bytes)");
  const PlanModel& m = plan.model;
  check(m.hidden_size > 0 && m.num_layers > 0 && m.num_heads > 0 && m.num_kv_heads > 0 && m.head_dim > 0 &&
            m.intermediate_size > 0 && m.vocab_size > 0 && m.num_heads % m.num_kv_heads == 0,
        "model shapes are not a valid model (every size positive, heads a multiple of kv_heads)");
  const std::string expected_fp = model_fingerprint(m, plan.dtype);
  check(plan.fingerprint == expected_fp, "fingerprint ", plan.fingerprint, " does not match the shapes and dtype the "
        "plan records (they give ", expected_fp, "): the file was edited by hand or damaged");
  const PlanLimits& l = plan.limits;
  check(l.max_batch >= 1 && l.max_prefill_tokens >= 1 && l.max_seq_len >= 1, "limits must be positive (max_batch ",
        l.max_batch, ", max_prefill_tokens ", l.max_prefill_tokens, ", max_seq_len ", l.max_seq_len, ")");
  check(l.max_batch <= kMaxBatchLimit && l.max_prefill_tokens <= kMaxPrefillTokensLimit, "limits exceed what "
        "fuselm plans for (max_batch ", l.max_batch, " of at most ", kMaxBatchLimit, ", max_prefill_tokens ",
        l.max_prefill_tokens, " of at most ", kMaxPrefillTokensLimit, ")");
  check(plan.kv_block_size >= 1 && plan.kv_block_size <= 1024 && (plan.kv_block_size & (plan.kv_block_size - 1)) == 0,
        "kv_block_size ", plan.kv_block_size, " is not a power of two between 1 and 1024");

  check(plan.decode.gemm.size() == kDecodeGemmOps.size(), "decode.gemm has ", plan.decode.gemm.size(),
        " ops, expected 5 (qkv, o, gate_up, down, lm_head)");
  // Joined once: check() takes its message parts before it knows whether it fails, and a tuned plan
  // names every variant for every op (joining per use took 80% of a load).
  const std::string known_variants = join(skinny_gemm_variant_names());
  for (size_t i = 0; i < kDecodeGemmOps.size(); ++i) {
    const DecodeGemmChoice& c = plan.decode.gemm[i];
    const std::string_view op = plan_op_name(kDecodeGemmOps[i]);
    check(c.op == kDecodeGemmOps[i], "decode.gemm entry ", i, " is ", plan_op_name(c.op), ", expected ", op);
    check(is_known(skinny_gemm_variant_names(), c.variant), "decode.gemm.", op, ".variant '", c.variant,
          "' is not a decode GEMM variant of this build (known: ", known_variants, ")");
    check(is_known(skinny_gemm_variant_names(), c.single_token_variant), "decode.gemm.", op,
          ".single_token_variant '", c.single_token_variant, "' is not a decode GEMM variant of this build (known: ",
          known_variants, ")");
    for (const std::string& v : {c.variant, c.single_token_variant})
      check(!skinny_variant_needs_sm90(v) || g.sm() >= 90, "decode.gemm.", op, " names ", v,
            ", which needs thread-block clusters (compute capability 9.0+); the plan's GPU is sm_", g.sm());
    const std::string one_class = skinny_rounding_class(c.single_token_variant);
    const std::string more_class = skinny_rounding_class(c.variant);
    check(one_class == more_class, "decode.gemm.", op, ": the single-token variant ", c.single_token_variant,
          " (rounding class ", one_class, ") rounds differently from ", c.variant, " (class ", more_class,
          "), so a request's logits would depend on the batch size");
    const auto [rows, cols] = decode_gemm_shape(c.op, m);
    check(c.rows == rows && c.cols == cols, "decode.gemm.", op, " is for a ", c.rows, "x", c.cols,
          " matrix, the model's is ", rows, "x", cols);
    for (const GemmTiming& t : c.timings) {
      check(is_known(skinny_gemm_variant_names(), t.variant), "decode.gemm.", op, ".measured names variant '",
            t.variant, "' (known: ", known_variants, ")");
      check(t.us.size() == c.measured_m.size(), "decode.gemm.", op, ".measured: variant ", t.variant, " has ",
            t.us.size(), " timings for ", c.measured_m.size(), " values of m");
    }
  }

  const DecodeAttentionChoice& a = plan.decode.attention;
  check(is_known(decode_attention_kernel_names(), a.kernel), "decode.attention.kernel '", a.kernel,
        "' is unknown (known: ", join(decode_attention_kernel_names()), ")");
  check(!a.kernel.starts_with("mma") || m.head_dim == 64 || m.head_dim == 128, "decode.attention.kernel mma needs head_dim 64 "
        "or 128, the model's is ", m.head_dim);
  check(decode_attention_cluster_ranks(a.kernel) == 1 || g.sm() >= 90, "decode.attention.kernel ", a.kernel,
        " runs in thread-block clusters (compute capability 9.0+); the plan's GPU is sm_", g.sm());
  check(plan.decode.ffn_one_launch_tokens >= 0 && plan.decode.ffn_one_launch_tokens <= kDecodeFfnOneLaunchMaxTokens,
        "decode.ffn_one_launch_tokens ", plan.decode.ffn_one_launch_tokens, " is not in 0..", kDecodeFfnOneLaunchMaxTokens);
  if (plan.decode.ffn_one_launch_tokens > 0)
    for (PlanOp op : {PlanOp::GateUp, PlanOp::Down}) {
      const std::string cls = skinny_rounding_class(plan.decode_gemm(op).variant);
      check(cls == "k1" || cls == "k2" || cls == "k4" || cls == "k8", "decode.ffn_one_launch_tokens: the one-launch "
            "FFN cuts K into 1, 2, 4 or 8 pieces without a warp split in a cluster; decode.gemm.", plan_op_name(op),
            " rounds as ", cls);
    }
  if (plan.decode.o_in_attention) {
    const std::string cls = skinny_rounding_class(plan.decode_gemm(PlanOp::O).variant);
    check(cls == "k8", "decode.o_in_attention: attention's launch cuts the O projection's K into 8 pieces, one per "
          "head group; decode.gemm.o rounds as ", cls);
    check(decode_attention_cluster_ranks(a.kernel) == 8, "decode.o_in_attention needs decode attention in clusters "
          "of 8 (mma_c8...); decode.attention.kernel is ", a.kernel);
  }
  check(a.split_tokens > 0 && a.split_tokens % plan.kv_block_size == 0, "decode.attention.split_tokens ",
        a.split_tokens, " is not a positive multiple of the KV block size ", plan.kv_block_size);
  check(a.split_tokens / plan.kv_block_size < kDecodeMaxSplitBlocks, "decode.attention.split_tokens ",
        a.split_tokens, " spans more than ", kDecodeMaxSplitBlocks - 1, " KV blocks of ", plan.kv_block_size,
        " tokens; use at most ", (kDecodeMaxSplitBlocks - 1) * plan.kv_block_size);
  for (const SplitTiming& t : a.timings)
    check(t.us.size() == a.measured_cases.size(), "decode.attention.measured: split ", t.split_tokens, " has ",
          t.us.size(), " timings for ", a.measured_cases.size(), " cases");
  check(is_known(prefill_attention_kernel_names(), plan.prefill.attention_kernel), "prefill.attention.kernel '",
        plan.prefill.attention_kernel, "' is unknown (known: ", join(prefill_attention_kernel_names()), ")");
  check(!plan.prefill.attention_kernel.starts_with("mma") || m.head_dim == 64 || m.head_dim == 128,
        "prefill.attention.kernel ", plan.prefill.attention_kernel, " needs head_dim 64 or 128, the model's is ",
        m.head_dim);
  check(plan.prefill.gemm_workspace_bytes > 0, "prefill.gemm.workspace_bytes must be positive");
  const std::string known_paths = join(prefill_gemm_path_names());
  for (const PrefillBucket& b : plan.prefill.buckets) {
    check(is_known(prefill_gemm_path_names(), b.gemm), "prefill bucket ", b.tokens, ": GEMM path '", b.gemm,
          "' is unknown (known: ", known_paths, ")");
    check(is_sm90_prefill_gemm(b.gemm) == is_sm90_prefill_gemm(plan.prefill.buckets.front().gemm), "prefill bucket ",
          b.tokens, " runs ", b.gemm, " and bucket ", plan.prefill.buckets.front().tokens, " ",
          plan.prefill.buckets.front().gemm, ": cuBLASLt and the sm_90a GEMMs round differently, so a token's result "
          "would depend on its chunk's size (use the sm_90a paths for every bucket or for none)");
  }
  if (!plan.prefill.buckets.empty() && is_sm90_prefill_gemm(plan.prefill.buckets.front().gemm)) {
    check(plan.gpu.sm() >= 90 && plan.gpu.sm() < 100, "prefill GEMM path ", plan.prefill.buckets.front().gemm,
          " runs Hopper's sm_90a code (wgmma, TMA), and the plan's GPU is sm_", plan.gpu.sm(), "; use cublaslt");
    const std::string misfit = sm90_prefill_misfit(m);
    check(misfit.empty(), "prefill GEMM path ", plan.prefill.buckets.front().gemm, ": the model's ", misfit,
          " projection does not fit the sm_90a GEMMs (output features a multiple of 256, k of 64; use cublaslt)");
  }

  // The derived numbers must be what the model, limits and choices give.
  Plan derived = plan;
  complete_plan(derived);
  check(derived.decode.attention.max_splits_per_seq == a.max_splits_per_seq &&
            derived.decode.attention.workspace_bytes == a.workspace_bytes,
        "decode.attention: max_splits_per_seq ", a.max_splits_per_seq, " and workspace_bytes ", a.workspace_bytes,
        " do not follow from split ", a.split_tokens, " and the limits (expected ",
        derived.decode.attention.max_splits_per_seq, " and ", derived.decode.attention.workspace_bytes, ")");
  check(derived.decode.buckets == plan.decode.buckets, "decode.buckets do not follow from max_batch ", l.max_batch,
        " (expected batches ", join_ints(decode_batch_buckets(l.max_batch)), " with ceil(batch / 16) GEMM launches)");
  std::vector<int> prefill_tokens;
  for (const PrefillBucket& b : plan.prefill.buckets) prefill_tokens.push_back(b.tokens);
  check(prefill_tokens == prefill_chunk_buckets(l.max_prefill_tokens), "prefill.buckets (", join_ints(prefill_tokens),
        ") do not follow from max_prefill_tokens ", l.max_prefill_tokens, " (expected ",
        join_ints(prefill_chunk_buckets(l.max_prefill_tokens)), ")");
}

// ---------------------------------------------------------------------------------------------

void check_plan_matches(const Plan& plan, const ModelConfig& config, DType dtype, const GpuIdentity& gpu,
                        std::string_view plan_name) {
  std::vector<std::string> problems;
  const GpuIdentity& p = plan.gpu;
  // Total memory moves a little with driver and ECC settings on the same board; 2% is far less
  // than the step between two products.
  const double mem_ratio = static_cast<double>(p.memory_bytes) / static_cast<double>(std::max<uint64_t>(gpu.memory_bytes, 1));
  if (p.name != gpu.name || p.sm() != gpu.sm() || p.sm_count != gpu.sm_count || std::fabs(mem_ratio - 1.0) > 0.02)
    problems.push_back(str_cat("it was made for ", p.describe(), ", this GPU is ", gpu.describe()));

  if (plan.dtype != dtype)
    problems.push_back(str_cat("it was made for ", dtype_name(plan.dtype), ", the engine runs ", dtype_name(dtype)));

  const PlanModel m = plan_model(config);
  std::string shapes;
  auto field = [&](const char* name, auto planned, auto actual) {
    if (planned != actual) shapes += str_cat(shapes.empty() ? "" : ", ", name, " ", planned, " (this model: ", actual, ")");
  };
  field("architecture", plan.model.architecture, m.architecture);
  field("hidden_size", plan.model.hidden_size, m.hidden_size);
  field("num_layers", plan.model.num_layers, m.num_layers);
  field("num_heads", plan.model.num_heads, m.num_heads);
  field("num_kv_heads", plan.model.num_kv_heads, m.num_kv_heads);
  field("head_dim", plan.model.head_dim, m.head_dim);
  field("intermediate_size", plan.model.intermediate_size, m.intermediate_size);
  field("vocab_size", plan.model.vocab_size, m.vocab_size);
  if (!shapes.empty())
    problems.push_back(str_cat("it was made for another model (fingerprint ", plan.fingerprint, ", this model's is ",
                               model_fingerprint(m, plan.dtype), "): ", shapes));

  if (problems.empty()) return;
  std::string all;
  for (const std::string& s : problems) all += str_cat(all.empty() ? "" : "; ", s);
  fail(plan_name, " does not fit: ", all, ". Its kernel choices and timings do not carry over: make a plan for this "
       "GPU, model and dtype with `fuselm tune -m MODEL -o plan.json` (or `fuselm plan -m MODEL --json` for the "
       "rule-based one), or leave out --plan to use the built-in rules");
}

void check_plan_covers(const Plan& plan, const PlanLimits& limits, std::string_view plan_name) {
  auto check = [&](int planned, int wanted, const char* what, const char* flag) {
    FUSELM_CHECK(wanted <= planned, plan_name, " was made for at most ", planned, " ", what, ", the engine is set up "
                 "for ", wanted, "; make the plan with ", flag, " ", wanted, " (or lower the engine's ", flag, ")");
  };
  check(plan.limits.max_batch, limits.max_batch, "sequences per step", "--max-batch");
  check(plan.limits.max_prefill_tokens, limits.max_prefill_tokens, "tokens per prefill step", "--max-prefill-tokens");
  check(plan.limits.max_seq_len, limits.max_seq_len, "positions per sequence", "--max-seq-len");
}

}  // namespace fuselm
