#pragma once
// What `fuselm plan` and `fuselm tune` make a plan for: a model's shapes, a dtype and engine limits.
#include <CLI/CLI.hpp>

#include <string>

#include "model/config.h"
#include "plan/plan.h"

namespace fuselm::cli {

struct PlanTarget {
  std::string model;
  std::string dtype = "bf16";
  int max_batch = 256;
  int max_prefill_tokens = 8192;
  int max_seq_len = 0;
  CLI::Option* model_option = nullptr;
  CLI::Option* limit_options[3] = {};

  void add_to(CLI::App& sub);
  DType parsed_dtype() const;  // bf16 or f16; throws Error otherwise
  // The model's config alone: synthetic weights are not generated, files are only mapped.
  ModelConfig load_config() const;
  PlanLimits limits(const ModelConfig& config) const;
  bool limits_given() const;  // any of --max-batch, --max-prefill-tokens, --max-seq-len on the command line
};

}  // namespace fuselm::cli
