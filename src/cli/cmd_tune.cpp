// fuselm tune: times the candidate kernel variants on this GPU at a model's shapes and writes the
// plan with the winners (and every candidate's timings) for `--plan FILE`.
#include <cstdio>

#include "cli/command.h"
#include "cli/plan_target.h"
#include "core/error.h"
#include "plan/plan.h"
#include "plan/tune.h"

namespace fuselm::cli {
namespace {

struct TuneArgs {
  PlanTarget target;
  std::string output;
  TuneOptions options;
  bool quiet = false;
};

int run_tune(const TuneArgs& a) {
  const DType dtype = a.target.parsed_dtype();
  const ModelConfig config = a.target.load_config();
  const PlanLimits limits = a.target.limits(config);
  TuneLog log;
  if (!a.quiet) log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const Plan plan = tune_plan(config, dtype, limits, a.options, log);
  save_plan_file(plan, a.output);
  std::fputs(render_plan(plan).c_str(), stdout);
  std::fprintf(stderr, "wrote the plan to %s; use it with --plan %s\n", a.output.c_str(), a.output.c_str());
  return 0;
}

std::function<int()> setup_tune(CLI::App& sub) {
  auto a = std::make_shared<TuneArgs>();
  a->target.add_to(sub);
  a->target.model_option->required();
  sub.add_option("-o,--output", a->output, "plan file to write (JSON)")->required();
  sub.add_option("--reps", a->options.reps, "timed repetitions per candidate and point (the median is kept)")
      ->capture_default_str();
  sub.add_option("--warmup", a->options.warmup, "untimed repetitions before them")->capture_default_str();
  sub.add_flag("-q,--quiet", a->quiet, "no progress lines on stderr");
  return [a] { return run_tune(*a); };
}

FUSELM_COMMAND("tune", "time the kernel variants on this GPU and write the fastest plan for a model (needs a GPU)",
               setup_tune);

}  // namespace
}  // namespace fuselm::cli
