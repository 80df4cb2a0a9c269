// How `fuselm tune` turns decode GEMM timings into a choice (plan/tune.h). Host code: CI tests it
// with made-up timings; the GPU side only measures.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "plan/tune.h"

namespace fuselm {

namespace {

std::string us_text(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", us);
  return buf;
}

}  // namespace

GemmPick pick_decode_gemm(const std::vector<GemmTiming>& timings, const std::vector<int>& measured_m,
                          const std::function<std::string(const std::string&)>& one_token_kernel) {
  auto runs_one = [&](const GemmTiming* t) { return one_token_kernel ? one_token_kernel(t->variant) : t->variant; };
  FUSELM_CHECK(!timings.empty(), "fuselm tune: no decode GEMM variant was timed");
  const size_t at_one = std::find(measured_m.begin(), measured_m.end(), 1) - measured_m.begin();
  FUSELM_CHECK(at_one < measured_m.size(), "fuselm tune: the decode buckets must include batch 1");
  const bool more_than_one = measured_m.size() > 1;
  for (const GemmTiming& t : timings)
    FUSELM_CHECK(t.us.size() == measured_m.size(), "fuselm tune: variant ", t.variant, " has ", t.us.size(),
                 " timings for ", measured_m.size(), " token counts");

  struct ClassBest {
    std::string name;
    const GemmTiming* one = nullptr;   // least us at m = 1
    const GemmTiming* more = nullptr;  // least total over the buckets of 2+ sequences
    double total_us = 0;
  };
  // The batch-1 bucket is one launch at m = 1; the rest of the total is the buckets of more.
  auto rest = [&](const GemmTiming* t) { return t->total_us - t->us[at_one]; };
  std::vector<ClassBest> classes;
  for (const GemmTiming& t : timings) {
    const std::string cls = skinny_rounding_class(t.variant);
    auto it = std::find_if(classes.begin(), classes.end(), [&](const ClassBest& c) { return c.name == cls; });
    if (it == classes.end()) it = classes.insert(classes.end(), ClassBest{cls, &t, &t});
    if (t.us[at_one] < it->one->us[at_one]) it->one = &t;
    if (rest(&t) < rest(it->more)) it->more = &t;
  }
  for (ClassBest& c : classes) {
    if (!more_than_one) c.more = c.one;  // only the batch-1 bucket: one variant does everything
    c.total_us = c.one->us[at_one] + (more_than_one ? rest(c.more) : 0.0);
  }
  std::stable_sort(classes.begin(), classes.end(),
                   [](const ClassBest& a, const ClassBest& b) { return a.total_us < b.total_us; });
  auto describe = [&](const ClassBest& c) {
    const std::string one = runs_one(c.one);
    return one == c.more->variant ? str_cat("class ", c.name, " (", c.more->variant, ") ", us_text(c.total_us))
                                  : str_cat("class ", c.name, " (", c.more->variant, ", ", one, " for one token) ",
                                            us_text(c.total_us));
  };
  GemmPick pick;
  pick.variant = classes[0].more->variant;
  pick.single_token_variant = runs_one(classes[0].one);
  pick.total_us = classes[0].total_us;
  pick.reason = str_cat("fastest total over the decode buckets on this GPU: ", describe(classes[0]));
  if (classes.size() > 1)
    pick.reason += str_cat(", next ", describe(classes[1]), " (+",
                           static_cast<int>(std::lround(100.0 * (classes[1].total_us / classes[0].total_us - 1.0))),
                           "%)");
  return pick;
}

}  // namespace fuselm
