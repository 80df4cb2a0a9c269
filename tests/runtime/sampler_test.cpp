#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "core/error.h"

namespace fuselm {
namespace {

std::vector<float> random_logits(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Logits whose softmax is exactly `probs` (up to float rounding).
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> v;
  for (double p : probs) v.push_back(static_cast<float>(std::log(p)));
  return v;
}

// Draws `n` tokens from fresh copies of `logits`, counting each id.
std::map<int32_t, int> histogram(const std::vector<float>& logits, const SamplingParams& params, int n) {
  SamplerState state(params);
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = logits;
    ++counts[sample_token(row, state)];
    state.history.clear();
  }
  return counts;
}

TEST(Sampler, GreedyPicksArgmaxAndBreaksTiesToLowestId) {
  SamplingParams p;
  p.temperature = 0.0f;
  SamplerState state(p);
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(sample_token(logits, state), 1);
  std::vector<float> all_equal(7, 0.25f);
  EXPECT_EQ(sample_token(all_equal, state), 0);
  std::vector<float> with_nan = {NAN, -3.0f, -2.0f};
  EXPECT_EQ(sample_token(with_nan, state), 2);
  EXPECT_EQ(state.history, (std::vector<int32_t>{1, 0, 2}));
}

TEST(Sampler, GreedyDoesNotAdvanceTheRng) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.seed = 5;
  SamplerState state(p);
  std::vector<float> logits = random_logits(100, 1);
  sample_token(logits, state);
  EXPECT_EQ(state.rng.state(), 5u);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  for (uint32_t seed = 0; seed < 50; ++seed) {
    std::vector<float> logits = random_logits(1000, seed);
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    SamplerState g(greedy);
    std::vector<float> a = logits;
    const int32_t expected = sample_token(a, g);

    SamplingParams top1;
    top1.temperature = 1.5f;
    top1.top_k = 1;
    top1.seed = seed;
    SamplerState s(top1);
    std::vector<float> b = logits;
    EXPECT_EQ(sample_token(b, s), expected) << "seed " << seed;
  }
}

TEST(Sampler, TemperatureOneFollowsTheSoftmax) {
  const std::vector<double> probs = {0.4, 0.3, 0.2, 0.1};
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 11;
  const int n = 20000;
  auto counts = histogram(logits_for(probs), p, n);
  // Binomial standard deviation is at most sqrt(n/4) = 71; allow 5 sigma.
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(counts[i], probs[static_cast<size_t>(i)] * n, 355) << "id " << i;
}

TEST(Sampler, LowTemperatureSharpensHighTemperatureFlattens) {
  const std::vector<float> logits = logits_for({0.4, 0.3, 0.2, 0.1});
  SamplingParams cold;
  cold.temperature = 0.1f;
  cold.seed = 3;
  SamplingParams hot = cold;
  hot.temperature = 10.0f;
  auto c = histogram(logits, cold, 4000);
  auto h = histogram(logits, hot, 4000);
  EXPECT_GT(c[0], 3650);  // p0 = 0.946 at T = 0.1 (3784 expected, sigma 14), against 0.4 at T = 1
  EXPECT_GT(h[3], 800);   // p3 = 0.231 at T = 10 (922 expected, sigma 27), against 0.1 at T = 1
}

TEST(Sampler, TopKExcludesAllButTheKBest) {
  std::vector<float> logits = {1.0f, 5.0f, 3.0f, 4.0f, 2.0f, 0.0f};
  SamplingParams p;
  p.temperature = 5.0f;  // flat enough that every survivor shows up
  p.top_k = 3;
  p.seed = 9;
  auto counts = histogram(logits, p, 3000);
  for (auto [id, count] : counts) EXPECT_TRUE(id == 1 || id == 2 || id == 3) << "id " << id << " drawn " << count;
  EXPECT_EQ(counts.size(), 3u);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Cumulative mass 0.5, 0.8, 0.95, 1.0: top-p 0.7 keeps ids 0 and 1, renormalised to 0.625 / 0.375.
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;
  p.seed = 21;
  const int n = 10000;
  auto counts = histogram(logits_for(probs), p, n);
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_NEAR(counts[0], 0.625 * n, 250);  // 5 sigma
  EXPECT_NEAR(counts[1], 0.375 * n, 250);
}

TEST(Sampler, TopPAlwaysKeepsTheMostLikelyToken) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.01f;
  auto counts = histogram(logits_for({0.2, 0.5, 0.3}), p, 500);
  EXPECT_EQ(counts[1], 500);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  // min-p 0.25 of p_max 0.5 is 0.125: ids 0..2 survive, id 3 (0.05) never comes out.
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.25f;
  p.seed = 4;
  const int n = 10000;
  auto counts = histogram(logits_for(probs), p, n);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_NEAR(counts[0], 0.5 / 0.95 * n, 250);
  EXPECT_NEAR(counts[2], 0.15 / 0.95 * n, 250);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  auto run = [](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 50;
    p.top_p = 0.95f;
    p.seed = seed;
    SamplerState state(p);
    std::vector<int32_t> out;
    for (uint32_t step = 0; step < 64; ++step) {
      std::vector<float> logits = random_logits(500, step);
      out.push_back(sample_token(logits, state));
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  p.penalty_window = 3;
  SamplerState state(p);
  // id 4 is outside the window of the last 3 tokens; id 1 appears twice but is penalised once.
  state.history = {4, 1, 3, 1};
  std::vector<float> logits = {0.5f, 4.0f, 1.0f, -1.0f, 6.0f};
  EXPECT_EQ(sample_token(logits, state), 4);
  EXPECT_EQ(logits, (std::vector<float>{0.5f, 2.0f, 1.0f, -2.0f, 6.0f}));
}

TEST(Sampler, RepetitionPenaltyChangesTheGreedyChoice) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.5f;
  SamplerState state(p);
  state.history = {0};
  std::vector<float> logits = {3.0f, 2.5f};
  EXPECT_EQ(sample_token(logits, state), 1);  // 3 / 1.5 = 2 < 2.5
}

TEST(Sampler, RejectsInvalidParameters) {
  std::vector<float> logits = {1.0f, 2.0f};
  auto expect_error = [&](SamplingParams p) {
    SamplerState s(p);
    std::vector<float> row = logits;
    EXPECT_THROW(sample_token(row, s), Error);
  };
  SamplingParams p;
  p.top_p = 0.0f;
  expect_error(p);
  p = {};
  p.min_p = 1.5f;
  expect_error(p);
  p = {};
  p.top_k = -1;
  expect_error(p);
  p = {};
  p.repetition_penalty = 0.0f;
  expect_error(p);
  SamplerState s{SamplingParams{}};
  s.history = {7};
  s.params.repetition_penalty = 1.2f;
  std::vector<float> row = logits;
  EXPECT_THROW(sample_token(row, s), Error);  // history id outside the vocabulary
}

}  // namespace
}  // namespace fuselm
