#pragma once
// Reference outputs of the shared test models (golden.json, written by HF transformers in fp32)
// and the checks engines and the CLI share when comparing against them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "test_util.h"

namespace fuselm::test {

struct GoldenCase {
  std::string prompt;
  std::vector<int32_t> ids;                     // prompt, BOS first
  std::vector<std::vector<int32_t>> top5_ids;   // per prompt position
  std::vector<std::vector<float>> top5_logits;  // per prompt position
  std::vector<double> logsumexp;                // per prompt position
  std::vector<float> last_logits;               // every vocab logit at the last position
  std::vector<int32_t> greedy24;                // the next 24 greedy tokens
};

// Reads `<models>/<dir>/golden.json`.
inline std::vector<GoldenCase> read_golden(const std::string& dir) {
  std::ifstream in(model_path(dir + "/golden.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<GoldenCase> cases;
  for (const auto& c : j.at("cases")) {
    GoldenCase g;
    g.prompt = c.at("prompt").get<std::string>();
    g.ids = c.at("ids").get<std::vector<int32_t>>();
    g.top5_ids = c.at("top5_ids").get<std::vector<std::vector<int32_t>>>();
    g.top5_logits = c.at("top5_logits").get<std::vector<std::vector<float>>>();
    g.logsumexp = c.at("logsumexp").get<std::vector<double>>();
    g.last_logits = c.at("last_logits").get<std::vector<float>>();
    g.greedy24 = c.at("greedy24").get<std::vector<int32_t>>();
    cases.push_back(std::move(g));
  }
  return cases;
}

// How closely an engine must follow a golden.
struct GoldenTolerance {
  float tie = 1e-4f;             // top-5 ids may swap only between logits this close
  double top5_relative = 1e-3;   // each reported top-5 logit
  double logsumexp_abs = 1e-3;
  double last_relative = 1e-3;   // ‖out − ref‖ / ‖ref‖ over last_logits
};

inline double relative_l2(std::span<const float> out, std::span<const float> ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (static_cast<double>(out[i]) - ref[i]) * (static_cast<double>(out[i]) - ref[i]);
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff / norm);
}

// Checks one prompt position: `top_ids` are the engine's top-5 ids (largest first), `logit_of`
// gives the engine's logit for any id.
template <class LogitOf>
void expect_position_matches(const GoldenCase& g, size_t pos, std::span<const int32_t> top_ids, LogitOf logit_of,
                             double logsumexp, const GoldenTolerance& tol) {
  const auto& ref_ids = g.top5_ids[pos];
  const auto& ref_logits = g.top5_logits[pos];
  for (size_t r = 0; r < ref_ids.size(); ++r) {
    if (top_ids[r] != ref_ids[r]) {
      EXPECT_LE(std::fabs(logit_of(top_ids[r]) - logit_of(ref_ids[r])), tol.tie)
          << "position " << pos << " rank " << r << ": id " << top_ids[r] << " instead of " << ref_ids[r]
          << " and their logits are not tied";
    }
    EXPECT_NEAR(logit_of(ref_ids[r]), ref_logits[r], tol.top5_relative * std::fabs(ref_logits[r]))
        << "position " << pos << " id " << ref_ids[r];
  }
  EXPECT_NEAR(logsumexp, g.logsumexp[pos], tol.logsumexp_abs) << "position " << pos;
}

}  // namespace fuselm::test
