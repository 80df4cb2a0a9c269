#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace fuselm::bench {

double percentile_sorted(std::span<const double> sorted, double p) {
  FUSELM_CHECK(!sorted.empty(), "percentile of an empty sample set");
  FUSELM_CHECK(p >= 0.0 && p <= 100.0, "percentile must be in [0, 100], got ", p);
  const double h = static_cast<double>(sorted.size() - 1) * p / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

double percentile(std::span<const double> samples, double p) {
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  return percentile_sorted(sorted, p);
}

double median(std::span<const double> samples) { return percentile(samples, 50.0); }

double mean(std::span<const double> samples) {
  FUSELM_CHECK(!samples.empty(), "mean of an empty sample set");
  double sum = 0;
  for (double x : samples) sum += x;
  return sum / static_cast<double>(samples.size());
}

double sample_stddev(std::span<const double> samples) {
  if (samples.size() < 2) return 0.0;
  const double m = mean(samples);
  double ss = 0;
  for (double x : samples) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(samples.size() - 1));
}

Summary summarize(std::span<const double> samples) {
  FUSELM_CHECK(!samples.empty(), "summary of an empty sample set");
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  Summary s;
  s.count = sorted.size();
  s.mean = mean(sorted);
  s.stddev = sample_stddev(sorted);
  s.min = sorted.front();
  s.max = sorted.back();
  s.p50 = percentile_sorted(sorted, 50);
  s.p90 = percentile_sorted(sorted, 90);
  s.p99 = percentile_sorted(sorted, 99);
  return s;
}

Trend linear_trend(std::span<const double> samples) {
  Trend t;
  const size_t n = samples.size();
  if (n == 0) return t;
  if (n == 1) {
    t.intercept = samples[0];
    return t;
  }
  // Centred sums: the mean index is (n - 1) / 2, so no large products cancel.
  const double x_mean = static_cast<double>(n - 1) / 2.0;
  const double y_mean = mean(samples);
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = static_cast<double>(i) - x_mean;
    sxy += dx * (samples[i] - y_mean);
    sxx += dx * dx;
  }
  t.slope = sxy / sxx;
  t.intercept = y_mean - t.slope * x_mean;
  return t;
}

std::vector<double> detrended(std::span<const double> samples, const Trend& trend) {
  std::vector<double> out(samples.size());
  for (size_t i = 0; i < samples.size(); ++i)
    out[i] = samples[i] - (trend.intercept + trend.slope * static_cast<double>(i));
  return out;
}

}  // namespace fuselm::bench
