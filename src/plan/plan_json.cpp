// Plan files: JSON with a format name and version. Reading checks every key's presence and type and
// names the key path in the error; unknown extra keys are ignored.
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "model/file_sniff.h"
#include "model/json_util.h"
#include "plan/plan.h"

namespace fuselm {

using json = PlanJson;

namespace {

const char* kRemake = "make the plan again with `fuselm tune` or `fuselm plan --json`";

json origin_json(json j, const ChoiceOrigin& o) {
  j["source"] = o.source;
  j["reason"] = o.reason;
  return j;
}

// What a JSON value is, for messages: `a string "abc"`, `the number 3`, `null`.
std::string describe_value(const json& v) {
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string " + text;
    case json::value_t::boolean: return "the boolean " + text;
    default: return "the number " + text;
  }
}

// Reads typed members; every failure names the file, the key path and what was expected.
class Reader {
 public:
  explicit Reader(const std::string& where) : where_(where) {}

  [[noreturn]] void bad(const std::string& path, const std::string& what) const {
    fail(where_, ": ", path, ": ", what, "; ", kRemake);
  }

  const json& member(const json& obj, const std::string& path, const char* key) const {
    const std::string p = child(path, key);
    if (!obj.is_object()) bad(path, str_cat("expected an object, found ", describe_value(obj)));
    auto it = obj.find(key);
    if (it == obj.end()) fail(where_, ": missing key '", p, "'; ", kRemake);
    return *it;
  }
  const json& object(const json& obj, const std::string& path, const char* key) const {
    const json& v = member(obj, path, key);
    if (!v.is_object()) bad(child(path, key), str_cat("expected an object, found ", describe_value(v)));
    return v;
  }
  const json& array(const json& obj, const std::string& path, const char* key) const {
    const json& v = member(obj, path, key);
    if (!v.is_array()) bad(child(path, key), str_cat("expected an array, found ", describe_value(v)));
    return v;
  }
  std::string string(const json& obj, const std::string& path, const char* key) const {
    const json& v = member(obj, path, key);
    if (!v.is_string()) bad(child(path, key), str_cat("expected a string, found ", describe_value(v)));
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const std::string& path, const char* key) const {
    const json& v = member(obj, path, key);
    if (!v.is_boolean()) bad(child(path, key), str_cat("expected true or false, found ", describe_value(v)));
    return v.get<bool>();
  }
  int64_t integer(const json& v, const std::string& path, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) bad(path, str_cat("expected an integer, found ", describe_value(v)));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      bad(path, str_cat("expected an integer in [", lo, ", ", hi, "], found ", v.dump()));
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) bad(path, str_cat("expected an integer in [", lo, ", ", hi, "], found ", x));
    return x;
  }
  int int32(const json& obj, const std::string& path, const char* key) const {
    return static_cast<int>(integer(member(obj, path, key), child(path, key), std::numeric_limits<int>::min(),
                                    std::numeric_limits<int>::max()));
  }
  uint64_t u64(const json& obj, const std::string& path, const char* key) const {
    const json& v = member(obj, path, key);
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
      bad(child(path, key), str_cat("expected a non-negative integer, found ", describe_value(v)));
    return v.get<uint64_t>();
  }
  double number(const json& v, const std::string& path) const {
    if (!v.is_number()) bad(path, str_cat("expected a number, found ", describe_value(v)));
    return v.get<double>();
  }
  double number(const json& obj, const std::string& path, const char* key) const {
    return number(member(obj, path, key), child(path, key));
  }
  std::vector<double> numbers(const json& obj, const std::string& path, const char* key) const {
    const json& a = array(obj, path, key);
    std::vector<double> out;
    // The element's path is built only for the error: a tuned plan holds thousands of timings.
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(a[i].is_number() ? a[i].get<double>() : number(a[i], index(child(path, key), i)));
    return out;
  }
  ChoiceOrigin origin(const json& obj, const std::string& path) const {
    return {string(obj, path, "source"), string(obj, path, "reason")};
  }

  static std::string child(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }
  static std::string index(const std::string& path, size_t i) { return str_cat(path, "[", i, "]"); }

 private:
  const std::string& where_;
};

json gemm_json(const DecodeGemmChoice& c) {
  json j = {{"variant", c.variant},
            {"single_token_variant", c.single_token_variant},
            {"balance_sms", c.balance_sms},
            {"single_token_balance_sms", c.single_token_balance_sms},
            {"rows", c.rows},
            {"cols", c.cols}};
  j = origin_json(j, c.origin);
  if (!c.timings.empty()) {
    json candidates = json::array();
    for (const GemmTiming& t : c.timings)
      candidates.push_back({{"variant", t.variant}, {"us", t.us}, {"total_us", t.total_us}});
    j["measured"] = {{"m", c.measured_m}, {"candidates", candidates}};
  }
  return j;
}

json attention_json(const DecodeAttentionChoice& a) {
  json j = {{"kernel", a.kernel},
            {"split_tokens", a.split_tokens},
            {"max_splits_per_seq", a.max_splits_per_seq},
            {"workspace_bytes", a.workspace_bytes}};
  j = origin_json(j, a.origin);
  if (!a.timings.empty()) {
    json cases = json::array(), candidates = json::array();
    for (const AttentionCase& c : a.measured_cases) cases.push_back({{"batch", c.batch}, {"kv_len", c.kv_len}});
    for (const SplitTiming& t : a.timings)
      candidates.push_back({{"split_tokens", t.split_tokens}, {"us", t.us}, {"mean_ratio", t.mean_ratio}});
    j["measured"] = {{"cases", cases}, {"candidates", candidates}};
  }
  return j;
}

DecodeGemmChoice read_gemm(const Reader& r, const json& j, const std::string& path, PlanOp op) {
  DecodeGemmChoice c;
  c.op = op;
  c.variant = r.string(j, path, "variant");
  // Plans written before per-bucket variants ran one variant for every token count.
  c.single_token_variant = j.contains("single_token_variant") ? r.string(j, path, "single_token_variant") : c.variant;
  // Plans written before it placed grids as the block scheduler does.
  c.balance_sms = j.contains("balance_sms") && r.boolean(j, path, "balance_sms");
  c.single_token_balance_sms =
      j.contains("single_token_balance_sms") ? r.boolean(j, path, "single_token_balance_sms") : c.balance_sms;
  c.rows = r.integer(r.member(j, path, "rows"), Reader::child(path, "rows"), 0, int64_t{1} << 40);
  c.cols = r.integer(r.member(j, path, "cols"), Reader::child(path, "cols"), 0, int64_t{1} << 40);
  c.origin = r.origin(j, path);
  if (j.contains("measured")) {
    const std::string mp = Reader::child(path, "measured");
    const json& measured = r.object(j, path, "measured");
    const json& ms = r.array(measured, mp, "m");
    for (size_t i = 0; i < ms.size(); ++i)
      c.measured_m.push_back(static_cast<int>(r.integer(ms[i], Reader::index(Reader::child(mp, "m"), i), 1, 1 << 20)));
    const json& candidates = r.array(measured, mp, "candidates");
    for (size_t i = 0; i < candidates.size(); ++i) {
      const std::string cp = Reader::index(Reader::child(mp, "candidates"), i);
      c.timings.push_back({r.string(candidates[i], cp, "variant"), r.numbers(candidates[i], cp, "us"),
                           r.number(candidates[i], cp, "total_us")});
    }
  }
  return c;
}

DecodeAttentionChoice read_attention(const Reader& r, const json& j, const std::string& path) {
  DecodeAttentionChoice a;
  a.kernel = r.string(j, path, "kernel");
  a.split_tokens = r.int32(j, path, "split_tokens");
  a.max_splits_per_seq = r.int32(j, path, "max_splits_per_seq");
  a.workspace_bytes = r.u64(j, path, "workspace_bytes");
  a.origin = r.origin(j, path);
  if (j.contains("measured")) {
    const std::string mp = Reader::child(path, "measured");
    const json& measured = r.object(j, path, "measured");
    const json& cases = r.array(measured, mp, "cases");
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string cp = Reader::index(Reader::child(mp, "cases"), i);
      a.measured_cases.push_back({r.int32(cases[i], cp, "batch"), r.int32(cases[i], cp, "kv_len")});
    }
    const json& candidates = r.array(measured, mp, "candidates");
    for (size_t i = 0; i < candidates.size(); ++i) {
      const std::string cp = Reader::index(Reader::child(mp, "candidates"), i);
      a.timings.push_back({r.int32(candidates[i], cp, "split_tokens"), r.numbers(candidates[i], cp, "us"),
                           r.number(candidates[i], cp, "mean_ratio")});
    }
  }
  return a;
}

}  // namespace

json plan_to_json(const Plan& p) {
  json j;
  j["format"] = kPlanFormat;
  j["version"] = p.version;
  j["made_by"] = p.made_by;
  j["gpu"] = {{"name", p.gpu.name},
              {"compute_capability", str_cat(p.gpu.sm_major, ".", p.gpu.sm_minor)},
              {"sm_count", p.gpu.sm_count},
              {"memory_bytes", p.gpu.memory_bytes}};
  j["model"] = {{"architecture", p.model.architecture},
                {"hidden_size", p.model.hidden_size},
                {"num_layers", p.model.num_layers},
                {"num_heads", p.model.num_heads},
                {"num_kv_heads", p.model.num_kv_heads},
                {"head_dim", p.model.head_dim},
                {"intermediate_size", p.model.intermediate_size},
                {"vocab_size", p.model.vocab_size},
                {"fingerprint", p.fingerprint}};
  j["dtype"] = dtype_name(p.dtype);
  j["limits"] = {{"max_batch", p.limits.max_batch},
                 {"max_prefill_tokens", p.limits.max_prefill_tokens},
                 {"max_seq_len", p.limits.max_seq_len}};
  j["kv_block"] = origin_json({{"tokens", p.kv_block_size}}, p.kv_block_origin);

  json gemm = json::object();
  for (const DecodeGemmChoice& c : p.decode.gemm) gemm[std::string(plan_op_name(c.op))] = gemm_json(c);
  json buckets = json::array();
  for (const DecodeBucket& b : p.decode.buckets)
    buckets.push_back({{"batch", b.batch}, {"gemm_launches", b.gemm_launches}, {"attention_grid", b.attention_grid}});
  j["decode"] = {{"gemm", gemm},
                 {"attention", attention_json(p.decode.attention)},
                 {"buckets", buckets},
                 {"ffn_one_launch_tokens", p.decode.ffn_one_launch_tokens},
                 {"o_in_attention", p.decode.o_in_attention}};

  json prefill_buckets = json::array();
  for (const PrefillBucket& b : p.prefill.buckets) prefill_buckets.push_back({{"tokens", b.tokens}, {"gemm", b.gemm}});
  j["prefill"] = {
      {"attention", origin_json({{"kernel", p.prefill.attention_kernel}}, p.prefill.attention_origin)},
      {"gemm", origin_json({{"workspace_bytes", p.prefill.gemm_workspace_bytes}}, p.prefill.gemm_origin)},
      {"buckets", prefill_buckets}};
  return j;
}

Plan plan_from_json(const json& j, const std::string& where) {
  const Reader r(where);
  FUSELM_CHECK(j.is_object(), where, ": not a fuselm plan: the JSON is ", describe_value(j),
               ", expected an object with \"format\": \"", kPlanFormat, "\"; ", kRemake);
  FUSELM_CHECK(j.contains("format") && j["format"].is_string() && j["format"].get<std::string>() == kPlanFormat,
               where, ": not a fuselm plan: expected \"format\": \"", kPlanFormat, "\", found ",
               j.contains("format") ? describe_value(j["format"]) : std::string("no \"format\" key"),
               "; a plan is what `fuselm tune -o FILE` or `fuselm plan --json` writes");
  Plan p;
  p.version = r.int32(j, "", "version");
  FUSELM_CHECK(p.version == kPlanFormatVersion, where, ": plan format version ", p.version, ", this build of fuselm "
               "reads version ", kPlanFormatVersion, p.version > kPlanFormatVersion ? " (the file is from a newer fuselm)"
               : "", "; ", kRemake, " with this build");
  p.made_by = r.string(j, "", "made_by");

  const json& gpu = r.object(j, "", "gpu");
  p.gpu.name = r.string(gpu, "gpu", "name");
  const std::string cc = r.string(gpu, "gpu", "compute_capability");
  try {
    const auto [major, minor] = parse_sm_arch(cc);
    p.gpu.sm_major = major;
    p.gpu.sm_minor = minor;
  } catch (const Error& e) {
    r.bad("gpu.compute_capability", e.what());
  }
  p.gpu.sm_count = r.int32(gpu, "gpu", "sm_count");
  p.gpu.memory_bytes = r.u64(gpu, "gpu", "memory_bytes");

  const json& model = r.object(j, "", "model");
  p.model.architecture = r.string(model, "model", "architecture");
  p.model.hidden_size = r.int32(model, "model", "hidden_size");
  p.model.num_layers = r.int32(model, "model", "num_layers");
  p.model.num_heads = r.int32(model, "model", "num_heads");
  p.model.num_kv_heads = r.int32(model, "model", "num_kv_heads");
  p.model.head_dim = r.int32(model, "model", "head_dim");
  p.model.intermediate_size = r.int32(model, "model", "intermediate_size");
  p.model.vocab_size = r.int32(model, "model", "vocab_size");
  p.fingerprint = r.string(model, "model", "fingerprint");

  const std::string dtype = r.string(j, "", "dtype");
  try {
    p.dtype = parse_dtype(dtype);
  } catch (const Error& e) {
    r.bad("dtype", e.what());
  }

  const json& limits = r.object(j, "", "limits");
  p.limits.max_batch = r.int32(limits, "limits", "max_batch");
  p.limits.max_prefill_tokens = r.int32(limits, "limits", "max_prefill_tokens");
  p.limits.max_seq_len = r.int32(limits, "limits", "max_seq_len");

  const json& kv = r.object(j, "", "kv_block");
  p.kv_block_size = r.int32(kv, "kv_block", "tokens");
  p.kv_block_origin = r.origin(kv, "kv_block");

  const json& decode = r.object(j, "", "decode");
  const json& gemm = r.object(decode, "decode", "gemm");
  for (PlanOp op : kDecodeGemmOps) {
    const std::string name(plan_op_name(op));
    p.decode.gemm.push_back(read_gemm(r, r.object(gemm, "decode.gemm", name.c_str()), "decode.gemm." + name, op));
  }
  p.decode.attention = read_attention(r, r.object(decode, "decode", "attention"), "decode.attention");
  // Plans written before the one-launch FFN ran two launches.
  p.decode.ffn_one_launch_tokens =
      decode.contains("ffn_one_launch_tokens") ? r.int32(decode, "decode", "ffn_one_launch_tokens") : 0;
  // And before the O projection in attention's launch, a launch of its own.
  p.decode.o_in_attention = decode.contains("o_in_attention") && r.boolean(decode, "decode", "o_in_attention");
  const json& buckets = r.array(decode, "decode", "buckets");
  for (size_t i = 0; i < buckets.size(); ++i) {
    const std::string bp = Reader::index("decode.buckets", i);
    DecodeBucket b;
    b.batch = r.int32(buckets[i], bp, "batch");
    b.gemm_launches = r.int32(buckets[i], bp, "gemm_launches");
    const json& grid = r.array(buckets[i], bp, "attention_grid");
    if (grid.size() != 3) r.bad(bp + ".attention_grid", str_cat("expected 3 integers, found ", grid.size()));
    for (size_t k = 0; k < 3; ++k)
      b.attention_grid[k] = static_cast<int>(r.integer(grid[k], Reader::index(bp + ".attention_grid", k), 0, 1 << 30));
    p.decode.buckets.push_back(b);
  }

  const json& prefill = r.object(j, "", "prefill");
  const json& prefill_attention = r.object(prefill, "prefill", "attention");
  p.prefill.attention_kernel = r.string(prefill_attention, "prefill.attention", "kernel");
  p.prefill.attention_origin = r.origin(prefill_attention, "prefill.attention");
  const json& prefill_gemm = r.object(prefill, "prefill", "gemm");
  p.prefill.gemm_workspace_bytes = r.u64(prefill_gemm, "prefill.gemm", "workspace_bytes");
  p.prefill.gemm_origin = r.origin(prefill_gemm, "prefill.gemm");
  const json& prefill_buckets = r.array(prefill, "prefill", "buckets");
  for (size_t i = 0; i < prefill_buckets.size(); ++i) {
    const std::string bp = Reader::index("prefill.buckets", i);
    p.prefill.buckets.push_back({r.int32(prefill_buckets[i], bp, "tokens"), r.string(prefill_buckets[i], bp, "gemm")});
  }

  validate_plan(p, where);
  return p;
}

Plan load_plan_file(const std::string& path) {
  const std::string where = str_cat("plan file '", path, "'");
  std::error_code ec;
  FUSELM_CHECK(std::filesystem::is_regular_file(path, ec), where, " not found (or not a file); make one with "
               "`fuselm tune -m MODEL -o ", path, "` on the GPU that will serve, or `fuselm plan -m MODEL --json`");
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  FUSELM_CHECK(in.good() || in.eof(), where, ": cannot be read; check its permissions");
  const std::string text = buf.str();
  const std::string wrong = describe_wrong_file(path, std::string_view(text).substr(0, 4096), text.size(),
                                                "a fuselm plan (JSON)", FileKind::Text);
  FUSELM_CHECK(wrong.empty(), wrong);
  check_json_depth(text, where);
  json j;
  try {
    j = json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based, just past where parsing stopped: at the end, the file was cut short.
    const bool at_end = e.byte >= text.size();
    try {
      parse_json_text(text, where);  // throws the message with line, column and context
    } catch (const Error& described) {
      if (!at_end) throw;
      fail(described.what(), ". The file ends early, as a plan cut short does: ", kRemake);
    }
    throw;
  }
  return plan_from_json(j, where);
}

void save_plan_file(const Plan& plan, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  FUSELM_CHECK(out.good(), "cannot open '", path, "' to write the plan; check the folder exists and is writable");
  out << plan_to_json(plan).dump(2) << "\n";
  out.close();
  FUSELM_CHECK(out.good(), "writing the plan to '", path, "' failed (disk full?)");
}

}  // namespace fuselm
