// Statistics against hand-computed values. Percentiles interpolate linearly between closest ranks
// (h = (n - 1) p / 100), as NumPy's default does; stddev divides by n - 1.
#include "bench/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace fuselm::bench {
namespace {

TEST(Percentile, InterpolatesBetweenClosestRanks) {
  const std::vector<double> x = {4, 1, 3, 2};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(x, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(x, 50), 2.5);    // h = 1.5
  EXPECT_DOUBLE_EQ(percentile(x, 90), 3.7);    // h = 2.7
  EXPECT_DOUBLE_EQ(percentile(x, 99), 3.97);   // h = 2.97
  EXPECT_DOUBLE_EQ(percentile(x, 100), 4.0);
  // numpy.percentile([15, 20, 35, 40, 50], 40) == 29.0: h = 1.6, 20 + 0.6 * (35 - 20)
  const std::vector<double> y = {15, 20, 35, 40, 50};
  EXPECT_DOUBLE_EQ(percentile(y, 40), 29.0);
  EXPECT_DOUBLE_EQ(median(y), 35.0);
}

TEST(Percentile, SingleSampleIsEveryPercentile) {
  const std::vector<double> x = {7.5};
  EXPECT_DOUBLE_EQ(percentile(x, 0), 7.5);
  EXPECT_DOUBLE_EQ(percentile(x, 99), 7.5);
  EXPECT_DOUBLE_EQ(percentile(x, 100), 7.5);
}

TEST(Percentile, RejectsEmptyAndOutOfRange) {
  const std::vector<double> none;
  const std::vector<double> x = {1, 2};
  EXPECT_THROW(percentile(none, 50), Error);
  EXPECT_THROW(percentile(x, -1), Error);
  EXPECT_THROW(percentile(x, 100.5), Error);
  EXPECT_THROW(summarize(none), Error);
}

TEST(Stddev, IsTheSampleStandardDeviation) {
  // mean 5, sum of squared deviations 32: population sd 2, sample sd sqrt(32 / 7).
  const std::vector<double> x = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(mean(x), 5.0);
  EXPECT_NEAR(sample_stddev(x), std::sqrt(32.0 / 7.0), 1e-12);
  EXPECT_DOUBLE_EQ(sample_stddev(std::vector<double>{3.0}), 0.0);
}

TEST(Summary, PercentilesAndJitterOfOneToHundred) {
  std::vector<double> x;
  for (int i = 100; i >= 1; --i) x.push_back(i);
  const Summary s = summarize(x);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 100.0);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50.5);   // h = 49.5
  EXPECT_NEAR(s.p90, 90.1, 1e-12);  // h = 89.1
  EXPECT_NEAR(s.p99, 99.01, 1e-12);  // h = 98.01
  EXPECT_NEAR(s.jitter_ratio(), 99.01 / 50.5, 1e-12);
  // sample variance of 1..n is n (n + 1) / 12
  EXPECT_NEAR(s.stddev, std::sqrt(100.0 * 101.0 / 12.0), 1e-9);
}

TEST(Summary, SteadySamplesHaveNoJitter) {
  const std::vector<double> x(10, 6.25);
  const Summary s = summarize(x);
  EXPECT_DOUBLE_EQ(s.jitter_ratio(), 1.0);
  EXPECT_DOUBLE_EQ(s.stddev, 0.0);
}

TEST(Trend, RecoversALineAndLeavesTheNoise) {
  // y = 5 + 0.25 i exactly: slope and intercept back, residuals zero.
  std::vector<double> y;
  for (int i = 0; i < 10; ++i) y.push_back(5.0 + 0.25 * i);
  const Trend t = linear_trend(y);
  EXPECT_NEAR(t.slope, 0.25, 1e-12);
  EXPECT_NEAR(t.intercept, 5.0, 1e-12);
  for (double r : detrended(y, t)) EXPECT_NEAR(r, 0.0, 1e-12);

  // 1, 3, 2, 4: dx = -1.5, -0.5, 0.5, 1.5 and dy = -1.5, 0.5, -0.5, 1.5 around the means 1.5 and 2.5;
  // sxy = 2.25 - 0.25 - 0.25 + 2.25 = 4, sxx = 5: slope 0.8, intercept 2.5 - 0.8 * 1.5 = 1.3.
  const std::vector<double> z = {1, 3, 2, 4};
  const Trend tz = linear_trend(z);
  EXPECT_NEAR(tz.slope, 0.8, 1e-12);
  EXPECT_NEAR(tz.intercept, 2.5 - 0.8 * 1.5, 1e-12);
  const std::vector<double> rz = detrended(z, tz);
  ASSERT_EQ(rz.size(), 4u);
  EXPECT_NEAR(rz[0], -0.3, 1e-12);
  EXPECT_NEAR(rz[1], 0.9, 1e-12);
  EXPECT_NEAR(rz[2], -0.9, 1e-12);
  EXPECT_NEAR(rz[3], 0.3, 1e-12);
  double sum = 0;
  for (double r : rz) sum += r;
  EXPECT_NEAR(sum, 0.0, 1e-12);  // least-squares residuals sum to zero
}

TEST(Trend, FlatAndTinyInputs) {
  EXPECT_DOUBLE_EQ(linear_trend(std::vector<double>(5, 2.0)).slope, 0.0);
  const Trend one = linear_trend(std::vector<double>{7.0});
  EXPECT_DOUBLE_EQ(one.slope, 0.0);
  EXPECT_DOUBLE_EQ(one.intercept, 7.0);
  EXPECT_DOUBLE_EQ(linear_trend(std::vector<double>{}).slope, 0.0);
}

TEST(Bandwidth, IsBytesOverMillisecondsInDecimalGigabytes) {
  // 4 GiB read + written (8 GiB) in 2 ms.
  EXPECT_DOUBLE_EQ(gb_per_s(8.0 * (1 << 30), 2.0), 8.0 * (1 << 30) / 2e-3 / 1e9);
  EXPECT_DOUBLE_EQ(gb_per_s(1e9, 1000.0), 1.0);
}

}  // namespace
}  // namespace fuselm::bench
