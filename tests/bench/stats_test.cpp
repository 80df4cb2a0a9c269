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

}  // namespace
}  // namespace fuselm::bench
