// The plan and the rule table as readable text (`fuselm plan`, `fuselm plan --rules`).
#include <cstdarg>
#include <cstdio>

#include "core/error.h"
#include "plan/plan.h"

namespace fuselm {

namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

std::string mib(uint64_t bytes) { return format("%.1f MiB", static_cast<double>(bytes) / double(1 << 20)); }

// `scale` divides the bounds for display (10 shows compute capabilities as 9.0 rather than 90).
std::string range_text(const RuleRange& r, const char* unit = "", double scale = 1) {
  if (r.lo <= 0 && r.hi >= kUnbounded) return "any";
  if (r.hi >= kUnbounded) return format(">= %g%s", r.lo / scale, unit);
  if (r.hi == r.lo + 1) return format("%g%s", r.lo / scale, unit);
  if (r.lo <= 0) return format("< %g%s", r.hi / scale, unit);
  return format("[%g, %g)%s", r.lo / scale, r.hi / scale, unit);
}

std::string ops_text(uint32_t ops) {
  std::string out;
  for (int i = 0; i < kPlanOpCount; ++i)
    if (ops & (1u << i)) out += str_cat(out.empty() ? "" : ",", plan_op_name(static_cast<PlanOp>(i)));
  return out;
}

// How a decode GEMM's grids are placed on the SMs: spread evenly, or as many CTAs an SM as fit.
std::string sm_placement(bool balance_sms, bool single_token_balance_sms) {
  if (balance_sms == single_token_balance_sms) return balance_sms ? "even" : "fill";
  return balance_sms ? "even m>1" : "even m=1";
}
std::string sm_placement(const DecodeGemmChoice& c) { return sm_placement(c.balance_sms, c.single_token_balance_sms); }

std::string rule_choice_text(const PlanRule& r) {
  std::string out(r.choice);
  if (!r.single_token.empty()) out += str_cat(" (one token: ", r.single_token, ")");
  if (r.balance_sms || r.single_token_balance_sms)
    out += str_cat(", SMs ", sm_placement(r.balance_sms, r.single_token_balance_sms));
  return out;
}

std::string dtypes_text(uint32_t dtypes) {
  if (dtypes == 0) return "any";
  std::string out;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    if (dtypes & (1u << static_cast<unsigned>(t))) out += str_cat(out.empty() ? "" : ",", dtype_name(t));
  return out;
}

}  // namespace

std::string render_plan(const Plan& p) {
  const PlanModel& m = p.model;
  std::string out;
  out += format("model:  %s, hidden %d, %d layers, %d/%d heads x %d, ffn %d, vocab %d (fingerprint %s), %s\n",
                m.architecture.c_str(), m.hidden_size, m.num_layers, m.num_heads, m.num_kv_heads, m.head_dim,
                m.intermediate_size, m.vocab_size, p.fingerprint.c_str(), std::string(dtype_name(p.dtype)).c_str());
  out += format("gpu:    %s\n", p.gpu.describe().c_str());
  out += format("made by %s; limits: max batch %d, max prefill tokens %d, max sequence length %d\n", p.made_by.c_str(),
                p.limits.max_batch, p.limits.max_prefill_tokens, p.limits.max_seq_len);
  out += format("kv block: %d tokens (%s)\n\n", p.kv_block_size, p.kv_block_origin.source.c_str());

  out += "decode GEMMs: one rounding class per op for every batch bucket (batch-invariant bits)\n";
  out += format("  %-9s %-16s %9s  %-14s %-14s %-8s %-8s %s\n", "op", "matrix", "tiles/SM", "variant", "one token",
                "rounding", "SMs", "source");
  for (const DecodeGemmChoice& c : p.decode.gemm)
    out += format("  %-9s %-16s %9.1f  %-14s %-14s %-8s %-8s %s\n", std::string(plan_op_name(c.op)).c_str(),
                  str_cat(c.rows, " x ", c.cols).c_str(), rule_shape_measure(c.op, m, p.gpu), c.variant.c_str(),
                  c.single_token_variant.c_str(), skinny_rounding_class(c.variant).c_str(),
                  sm_placement(c).c_str(), c.origin.source.c_str());
  const DecodeAttentionChoice& a = p.decode.attention;
  const int cluster_ranks = decode_attention_cluster_ranks(a.kernel);
  const int stacked_from = decode_attention_stacked_from(a.kernel);
  out += format("decode attention: %s kernel, split %d tokens for every batch%s%s, %d splits per sequence, workspace %s (%s)\n",
                a.kernel.c_str(), a.split_tokens,
                cluster_ranks > 1 ? str_cat(" (at most that per CTA of a cluster of ", cluster_ranks, ")").c_str() : "",
                stacked_from > 0
                    ? str_cat("; from ", stacked_from, " sequences per launch each cluster's keys in one CTA").c_str()
                    : "",
                a.max_splits_per_seq, mib(a.workspace_bytes).c_str(), a.origin.source.c_str());
  if (p.decode.ffn_one_launch_tokens > 0)
    out += format("decode FFN: gate/up and down in one launch up to %d tokens\n", p.decode.ffn_one_launch_tokens);
  if (p.decode.o_in_attention) out += "decode O projection: in decode attention's launch for one sequence\n";
  out += format("prefill attention: %s (%s)\n", p.prefill.attention_kernel.c_str(),
                p.prefill.attention_origin.source.c_str());
  out += format("prefill GEMMs: workspace %s (%s)\n\n", mib(p.prefill.gemm_workspace_bytes).c_str(),
                p.prefill.gemm_origin.source.c_str());

  out += "decode batch buckets (one CUDA graph each)\n";
  out += format("  %6s  %13s  %s\n", "batch", "GEMM launches", "attention items");
  for (const DecodeBucket& b : p.decode.buckets)
    out += format("  %6d  %13d  %d x %d x %d\n", b.batch, b.gemm_launches, b.attention_grid[0], b.attention_grid[1],
                  b.attention_grid[2]);
  out += "prefill chunk buckets\n";
  out += format("  %6s  %s\n", "tokens", "GEMM");
  for (const PrefillBucket& b : p.prefill.buckets) out += format("  %6d  %s\n", b.tokens, b.gemm.c_str());

  for (const DecodeGemmChoice& c : p.decode.gemm) {
    if (c.timings.empty()) continue;
    out += format("\nmeasured %s (median us per launch at each m; total over the decode buckets)\n",
                  std::string(plan_op_name(c.op)).c_str());
    std::string head = format("  %-19s", "variant");
    for (int mm : c.measured_m) head += format(" %8s", str_cat("m=", mm).c_str());
    out += head + format(" %10s\n", "total");
    for (const GemmTiming& t : c.timings) {
      const char* mark = t.variant == c.variant ? (t.variant == c.single_token_variant ? " *" : " *m>1")
                         : t.variant == c.single_token_variant ? " *m=1" : "";
      std::string line = format("  %-19s", (t.variant + mark).c_str());
      for (double us : t.us) line += format(" %8.1f", us);
      out += line + format(" %10.1f\n", t.total_us);
    }
  }
  if (!a.timings.empty()) {
    out += "\nmeasured decode attention (median us per case; mean ratio to the fastest split)\n";
    std::string head = format("  %-8s", "split");
    for (const AttentionCase& c : a.measured_cases) head += format(" %12s", str_cat(c.batch, "x", c.kv_len).c_str());
    out += head + format(" %10s\n", "ratio");
    for (const SplitTiming& t : a.timings) {
      std::string line =
          format("  %-8s", (std::to_string(t.split_tokens) + (t.split_tokens == a.split_tokens ? " *" : "")).c_str());
      for (double us : t.us) line += format(" %12.1f", us);
      out += line + format(" %10.3f\n", t.mean_ratio);
    }
  }

  // Each distinct reason once, after the ops it explains.
  std::vector<std::pair<std::string, std::string>> reasons;  // (reason, ops)
  auto note = [&](const std::string& what, const ChoiceOrigin& o) {
    for (auto& [reason, ops] : reasons)
      if (reason == o.reason) {
        ops += ", " + what;
        return;
      }
    reasons.emplace_back(o.reason, what);
  };
  for (const DecodeGemmChoice& c : p.decode.gemm) note(std::string(plan_op_name(c.op)), c.origin);
  note("decode attention", a.origin);
  note("prefill attention", p.prefill.attention_origin);
  note("prefill GEMMs", p.prefill.gemm_origin);
  note("kv block", p.kv_block_origin);
  out += "\nwhy:\n";
  for (const auto& [reason, ops] : reasons) out += format("  %s: ", ops.c_str()) + reason + "\n";
  return out;
}

std::string render_plan_rules() {
  std::string out =
      "plan rules: the first row matching (op, dtype, shape, sm, SMs, memory) gives the choice. Shape is 16-row\n"
      "tiles per SM for decode GEMMs, head_dim for attention, chunk tokens for prefill GEMMs.\n\n";
  out += format("%-3s %-34s %-6s %-10s %-10s %-6s %-7s %s\n", "#", "ops", "dtype", "shape", "sm", "SMs", "memory",
                "choice");
  int i = 0;
  for (const PlanRule& r : plan_rules()) {
    out += format("%-3d %-34s %-6s %-10s %-10s %-6s %-7s %s\n", i++, ops_text(r.ops).c_str(),
                  dtypes_text(r.dtypes).c_str(), range_text(r.shape).c_str(), range_text(r.sm, "", 10).c_str(),
                  range_text(r.sm_count).c_str(), range_text(r.memory_gib, "G").c_str(), rule_choice_text(r).c_str());
    out += "    " + std::string(r.evidence) + "\n";
  }
  return out;
}

}  // namespace fuselm
