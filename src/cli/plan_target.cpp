#include "cli/plan_target.h"

#include "core/error.h"
#include "model/loader.h"

namespace fuselm::cli {

void PlanTarget::add_to(CLI::App& sub) {
  model_option = sub.add_option("-m,--model", model,
                                "model: HF folder, .gguf, llama2.c .bin or synthetic:PRESET?key=value (only its "
                                "shapes matter)");
  sub.add_option("--dtype", dtype, "GPU compute dtype: bf16 or fp16")->capture_default_str();
  limit_options[0] = sub.add_option("--max-batch", max_batch, "most sequences in one decode step (decode buckets)")
                         ->capture_default_str();
  limit_options[1] = sub.add_option("--max-prefill-tokens", max_prefill_tokens,
                                    "most tokens in one forward call (prefill chunk buckets)")
                         ->capture_default_str();
  limit_options[2] = sub.add_option("--max-seq-len", max_seq_len,
                                    "longest sequence (0 = the model's context, capped at 8192 as the engine does)")
                         ->capture_default_str();
}

DType PlanTarget::parsed_dtype() const {
  const DType t = parse_dtype(dtype);
  FUSELM_CHECK(t == DType::BF16 || t == DType::F16, "--dtype must be bf16 or fp16 (what the GPU computes in), got '",
               dtype, "'");
  return t;
}

ModelConfig PlanTarget::load_config() const {
  FUSELM_CHECK(!model.empty(), "give the model with -m PATH or -m 'synthetic:llama-3.1-8b?vocab=32000'");
  LoadOptions options;
  options.materialize_synthetic = false;
  return load_model(model, options)->config;
}

PlanLimits PlanTarget::limits(const ModelConfig& config) const {
  return make_plan_limits(config, max_batch, max_prefill_tokens, max_seq_len);
}

bool PlanTarget::limits_given() const {
  for (CLI::Option* o : limit_options)
    if (o != nullptr && o->count() > 0) return true;
  return false;
}

}  // namespace fuselm::cli
