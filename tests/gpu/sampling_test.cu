// Device sampling against a double-precision host reference of the same rules (penalty,
// temperature, top-k, top-p, min-p, a draw in id order from the request's counter RNG). Cases where
// a decision lies within 1e-4 (relative) of a boundary are left out: fp32 and double may round
// differently there; they must stay rare. A separate test checks the draw's distribution.
#include "kernels/cuda/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "core/rng.h"
#include "gpu_test_util.h"

namespace fuselm {
namespace {

using test::DeviceArray;

struct Reference {
  int token = -1;
  bool near_boundary = false;
};

Reference reference_sample(std::vector<float> l, const SampleParams& p, const std::vector<int32_t>& history) {
  const int vocab = static_cast<int>(l.size());
  Reference r;
  if (p.repetition_penalty != 1.0f) {
    for (int32_t id : std::set<int32_t>(history.begin(), history.end()))
      l[id] = l[id] > 0.0f ? l[id] / p.repetition_penalty : l[id] * p.repetition_penalty;
  }
  if (p.temperature <= 0.0f) {
    r.token = static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin());  // first of the largest
    return r;
  }
  std::vector<float> s(vocab);
  float s_max = -INFINITY;
  for (int i = 0; i < vocab; ++i) {
    s[i] = l[i] / p.temperature;
    s_max = std::max(s_max, s[i]);
  }
  std::vector<double> w(vocab);
  for (int i = 0; i < vocab; ++i) w[i] = std::exp(static_cast<double>(s[i] - s_max));
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
  int kept_count = vocab;
  if (p.top_k > 0 && p.top_k < vocab) kept_count = p.top_k;
  const double tol = 1e-4;
  if (p.top_p < 1.0f) {
    double z = 0.0;
    for (int j = 0; j < kept_count; ++j) z += w[order[j]];
    const double target = static_cast<double>(p.top_p) * z;
    double cum = 0.0;
    for (int j = 0; j < kept_count; ++j) {
      const double before = cum;
      cum += w[order[j]];
      if (cum >= target) {
        if (std::fabs(cum - target) < tol * z || std::fabs(before - target) < tol * z) r.near_boundary = true;
        kept_count = j + 1;
        break;
      }
    }
  }
  std::vector<double> kept(vocab, 0.0);
  for (int j = 0; j < kept_count; ++j) {
    const int id = order[j];
    if (p.min_p > 0.0f && std::fabs(w[id] - p.min_p) < tol) r.near_boundary = true;
    if (w[id] >= p.min_p) kept[id] = w[id];
  }
  const double total = std::accumulate(kept.begin(), kept.end(), 0.0);
  const double u = static_cast<float>(splitmix64(p.rng_state) >> 40) * (1.0f / (1 << 24));
  const double target = u * total;
  double cum = 0.0;
  for (int i = 0; i < vocab; ++i) {
    if (kept[i] == 0.0) continue;
    const double before = cum;
    cum += kept[i];
    r.token = i;
    if (target < cum) {
      if (std::fabs(cum - target) < tol * total || std::fabs(before - target) < tol * total) r.near_boundary = true;
      break;
    }
  }
  return r;
}

// Runs the kernel over rows of logits; returns the tokens.
std::vector<int32_t> sample_on_device(const std::vector<float>& logits, int vocab, const std::vector<SampleParams>& params,
                                      const std::vector<std::vector<int32_t>>& histories) {
  const int rows = static_cast<int>(params.size());
  int stride = 1;
  for (const auto& h : histories) stride = std::max<int>(stride, static_cast<int>(h.size()));
  std::vector<int32_t> packed(static_cast<size_t>(rows) * stride, 0);
  for (int r = 0; r < rows; ++r) std::copy(histories[r].begin(), histories[r].end(), packed.begin() + r * stride);
  DeviceArray d_logits(logits.size() * 4), d_params(params.size() * sizeof(SampleParams)), d_hist(packed.size() * 4),
      d_tokens(rows * 4);
  d_logits.upload(logits.data(), logits.size() * 4);
  d_params.upload(params.data(), params.size() * sizeof(SampleParams));
  d_hist.upload(packed.data(), packed.size() * 4);
  d_tokens.poison();
  Status s = sample_tokens(d_logits.get<float>(), rows, vocab, d_params.get<SampleParams>(), d_hist.get<int32_t>(),
                           stride, d_tokens.get<int32_t>(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int32_t> tokens(rows);
  d_tokens.download(tokens.data(), rows * 4);
  return tokens;
}

TEST(CudaSampling, MatchesReferenceAcrossParameters) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(81);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  int compared = 0, skipped = 0;
  for (int vocab : {7, 1000, 32000, 128256}) {
    const int rows = 48;
    std::vector<float> logits(static_cast<size_t>(rows) * vocab);
    for (float& x : logits) x = normal(gen);
    std::vector<SampleParams> params(rows);
    std::vector<std::vector<int32_t>> histories(rows);
    std::uniform_int_distribution<int> id(0, vocab - 1);
    for (int r = 0; r < rows; ++r) {
      SampleParams& p = params[r];
      p.temperature = r % 8 == 0 ? 0.0f : std::uniform_real_distribution<float>(0.3f, 1.5f)(gen);
      p.top_k = std::vector<int>{0, 1, 5, 50, 1000}[r % 5];
      p.top_p = std::vector<float>{1.0f, 0.9f, 0.5f, 0.1f}[(r / 5) % 4];
      p.min_p = r % 3 == 0 ? 0.05f : 0.0f;
      p.repetition_penalty = r % 4 == 1 ? 1.3f : 1.0f;
      p.rng_state = gen();
      if (p.repetition_penalty != 1.0f) {
        for (int i = 0; i < 40; ++i) histories[r].push_back(id(gen));
        histories[r].push_back(histories[r][0]);  // a repeated id is penalised once
        // The current best logit is in the history, so the penalty must change the outcome.
        histories[r].push_back(static_cast<int32_t>(
            std::max_element(logits.begin() + static_cast<size_t>(r) * vocab, logits.begin() + static_cast<size_t>(r + 1) * vocab) -
            (logits.begin() + static_cast<size_t>(r) * vocab)));
      }
      p.history_len = static_cast<int32_t>(histories[r].size());
    }
    const std::vector<int32_t> tokens = sample_on_device(logits, vocab, params, histories);
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> row(logits.begin() + static_cast<size_t>(r) * vocab,
                                   logits.begin() + static_cast<size_t>(r + 1) * vocab);
      const Reference ref = reference_sample(row, params[r], histories[r]);
      if (ref.near_boundary) {
        ++skipped;
        continue;
      }
      ++compared;
      EXPECT_EQ(tokens[r], ref.token) << "vocab=" << vocab << " row=" << r << " T=" << params[r].temperature
                                      << " top_k=" << params[r].top_k << " top_p=" << params[r].top_p
                                      << " min_p=" << params[r].min_p << " penalty=" << params[r].repetition_penalty;
    }
  }
  EXPECT_GT(compared, 9 * skipped) << compared << " compared, " << skipped << " near a boundary";
}

TEST(CudaSampling, GreedyTakesTheLowestIdAmongEqualMaximaAndSkipsNan) {
  FUSELM_REQUIRE_GPU();
  const int vocab = 50000;
  std::mt19937 gen(82);
  std::vector<float> logits = test::random_floats(gen, 2 * vocab, -5.0f, 5.0f);
  logits[123] = 9.0f;
  logits[40000] = 9.0f;
  logits[7] = NAN;
  logits[vocab + 10] = NAN;
  logits[vocab + 49999] = 8.0f;
  std::vector<SampleParams> params(2);
  const std::vector<int32_t> tokens = sample_on_device(logits, vocab, params, {{}, {}});
  EXPECT_EQ(tokens[0], 123);
  EXPECT_EQ(tokens[1], 49999);

  // A vocabulary that is not a multiple of 4 (rows read one float at a time), a row of NaN (nothing
  // to draw: -1) and a row of -inf (the lowest id).
  const int odd = 1001;
  std::vector<float> more = test::random_floats(gen, 3 * odd, -5.0f, 5.0f);
  more[500] = 7.0f;
  more[999] = 7.0f;
  more[3] = NAN;
  for (int i = 0; i < odd; ++i) {
    more[odd + i] = NAN;
    more[2 * odd + i] = -INFINITY;
  }
  std::vector<SampleParams> greedy(3);
  const std::vector<int32_t> picked = sample_on_device(more, odd, greedy, {{}, {}, {}});
  EXPECT_EQ(picked, (std::vector<int32_t>{500, -1, 0}));
}

TEST(CudaSampling, TopKKeepsExactlyKUnderTies) {
  FUSELM_REQUIRE_GPU();
  // Ten equal logits and top_k = 3: only ids 2, 4, 6 (the three lowest of the tied) may be drawn.
  const int vocab = 64;
  std::vector<float> logits(vocab, -10.0f);
  for (int i = 2; i < 22; i += 2) logits[i] = 1.0f;
  const int rows = 512;
  std::vector<float> all;
  std::vector<SampleParams> params(rows);
  for (int r = 0; r < rows; ++r) {
    all.insert(all.end(), logits.begin(), logits.end());
    params[r].temperature = 1.0f;
    params[r].top_k = 3;
    params[r].rng_state = 1000 + r;
  }
  const std::vector<int32_t> tokens = sample_on_device(all, vocab, params, std::vector<std::vector<int32_t>>(rows));
  std::set<int32_t> seen(tokens.begin(), tokens.end());
  EXPECT_EQ(seen, (std::set<int32_t>{2, 4, 6}));
}

TEST(CudaSampling, DrawsFollowTheDistribution) {
  FUSELM_REQUIRE_GPU();
  // probabilities 0.1, 0.2, 0.3, 0.4 from log-probabilities; 40000 independent draws.
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  std::vector<float> row;
  for (double q : probs) row.push_back(static_cast<float>(std::log(q)));
  const int rows = 40000;
  std::vector<float> all;
  std::vector<SampleParams> params(rows);
  for (int r = 0; r < rows; ++r) {
    all.insert(all.end(), row.begin(), row.end());
    params[r].temperature = 1.0f;
    params[r].rng_state = 77 + static_cast<uint64_t>(r);
  }
  const std::vector<int32_t> tokens = sample_on_device(all, 4, params, std::vector<std::vector<int32_t>>(rows));
  std::vector<int> counts(4, 0);
  for (int32_t t : tokens) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 4);
    ++counts[t];
  }
  for (int i = 0; i < 4; ++i) {
    const double expected = probs[i] * rows, sigma = std::sqrt(rows * probs[i] * (1 - probs[i]));
    EXPECT_LT(std::fabs(counts[i] - expected), 5 * sigma) << "token " << i << ": " << counts[i] << " draws";
  }
}

TEST(CudaSampling, SameStateSameTokenInAnyRow) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(83);
  const int vocab = 32000;
  const std::vector<float> row = test::random_floats(gen, vocab, -4.0f, 4.0f);
  SampleParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.top_k = 40;
  p.rng_state = 4242;
  std::vector<float> all;
  std::vector<SampleParams> params;
  for (int r = 0; r < 9; ++r) {
    const std::vector<float> other = test::random_floats(gen, vocab, -4.0f, 4.0f);
    all.insert(all.end(), (r % 3 == 1 ? row : other).begin(), (r % 3 == 1 ? row : other).end());
    SampleParams q = p;
    if (r % 3 != 1) q.rng_state = gen();
    params.push_back(q);
  }
  const std::vector<int32_t> tokens = sample_on_device(all, vocab, params, std::vector<std::vector<int32_t>>(9));
  EXPECT_EQ(tokens[1], tokens[4]);
  EXPECT_EQ(tokens[4], tokens[7]);
}

}  // namespace
}  // namespace fuselm
