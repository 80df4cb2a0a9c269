// fuselm plan: the kernel plan for a model on a GPU, as a table or JSON. The GPU is this machine's,
// or one named by options, so the rule plan can be printed (and checked in CI) without a GPU.
#include <cstdio>
#include <optional>

#include "cli/command.h"
#include "cli/plan_target.h"
#include "core/error.h"
#include "plan/plan.h"

namespace fuselm::cli {
namespace {

struct PlanArgs {
  PlanTarget target;
  std::string plan_file;
  bool json = false;
  bool rules = false;
  std::string gpu_preset;
  std::string gpu_name;
  std::string sm;
  int sm_count = 0;
  double memory_gb = 0;

  bool gpu_given() const {
    return !gpu_preset.empty() || !gpu_name.empty() || !sm.empty() || sm_count > 0 || memory_gb > 0;
  }
};

std::string presets_text() {
  std::string list;
  for (const std::string& n : gpu_preset_names()) list += (list.empty() ? "" : ", ") + n;
  return list;
}

// The GPU named by --gpu (a preset) and refined by --sm, --sm-count, --memory-gb and --gpu-name.
GpuIdentity gpu_from_options(const PlanArgs& a) {
  GpuIdentity g;
  if (!a.gpu_preset.empty()) {
    g = gpu_preset(a.gpu_preset);
  } else {
    FUSELM_CHECK(!a.sm.empty() && a.sm_count > 0 && a.memory_gb > 0, "describe the GPU with all of --sm, --sm-count "
                 "and --memory-gb (e.g. --sm 9.0 --sm-count 132 --memory-gb 141), or name a preset with --gpu (",
                 presets_text(), ")");
  }
  if (!a.sm.empty()) {
    const auto [major, minor] = parse_sm_arch(a.sm);
    g.sm_major = major;
    g.sm_minor = minor;
  }
  if (a.sm_count > 0) g.sm_count = a.sm_count;
  if (a.memory_gb > 0) g.memory_bytes = static_cast<uint64_t>(a.memory_gb * double(uint64_t{1} << 30));
  if (!a.gpu_name.empty()) g.name = a.gpu_name;
  if (a.gpu_preset.empty() && a.gpu_name.empty()) g.name = str_cat("sm_", g.sm(), " GPU");
  return g;
}

int run_plan(const PlanArgs& a) {
  if (a.rules) {
    std::fputs(render_plan_rules().c_str(), stdout);
    return 0;
  }
  FUSELM_CHECK(a.memory_gb >= 0 && a.sm_count >= 0, "--sm-count and --memory-gb must be positive");
  const DType dtype = a.target.parsed_dtype();
  const ModelConfig config = a.target.load_config();
  const PlanLimits limits = a.target.limits(config);

  std::optional<GpuIdentity> gpu;
  if (a.gpu_given()) {
    gpu = gpu_from_options(a);
  } else {
    try {
      gpu = query_gpu_identity();
    } catch (const Error& e) {
      if (a.plan_file.empty())
        fail(e.what(), "; to plan for a GPU that is not here, name it: --gpu PRESET (", presets_text(),
             ") or --sm 9.0 --sm-count 132 --memory-gb 141");
      std::fprintf(stderr, "note: %s, and none was named with --gpu: the plan's GPU is not checked\n", e.what());
    }
  }

  Plan plan;
  if (!a.plan_file.empty()) {
    plan = load_plan_file(a.plan_file);
    check_plan_matches(plan, config, dtype, gpu ? *gpu : plan.gpu, a.plan_file);
    if (a.target.limits_given()) check_plan_covers(plan, limits, a.plan_file);
  } else {
    plan = make_rule_plan(config, dtype, *gpu, limits);
  }
  if (a.json) {
    std::printf("%s\n", plan_to_json(plan).dump(2).c_str());
  } else {
    std::fputs(render_plan(plan).c_str(), stdout);
  }
  return 0;
}

std::function<int()> setup_plan(CLI::App& sub) {
  auto a = std::make_shared<PlanArgs>();
  a->target.add_to(sub);
  sub.add_option("--plan", a->plan_file, "print (and check against the model, dtype and GPU) this plan file instead "
                                         "of the rule plan");
  sub.add_flag("--json", a->json, "print the plan as JSON (the format --plan and `fuselm tune -o` use)");
  sub.add_flag("--rules", a->rules, "print the rule table the plan is made from, and exit");
  sub.add_option("--gpu", a->gpu_preset, "plan for this GPU instead of the one here: " + presets_text());
  sub.add_option("--sm", a->sm, "compute capability of the GPU to plan for, e.g. 9.0 or 90 (overrides --gpu's)");
  sub.add_option("--sm-count", a->sm_count, "its number of SMs (overrides --gpu's)");
  sub.add_option("--memory-gb", a->memory_gb, "its memory in GiB (overrides --gpu's)");
  sub.add_option("--gpu-name", a->gpu_name, "its name as CUDA reports it (a plan is only used on a GPU of that name)");
  return [a] { return run_plan(*a); };
}

FUSELM_COMMAND("plan", "print the kernel plan (variant, launch shape, workspace per op and bucket) for a model and GPU",
               setup_plan);

}  // namespace
}  // namespace fuselm::cli
