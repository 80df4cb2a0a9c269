#pragma once
// Summary statistics of timing samples.
//
// Percentiles interpolate linearly between closest ranks (Hyndman & Fan type 7, NumPy's default):
// for n sorted samples x[0..n-1] and p in [0, 100], h = (n - 1) * p / 100 and
// P(p) = x[floor h] + (h - floor h) * (x[floor h + 1] - x[floor h]).
// Standard deviation is the sample one (divides by n - 1); it is 0 for a single sample.
#include <cstddef>
#include <span>
#include <vector>

namespace fuselm::bench {

double percentile_sorted(std::span<const double> sorted, double p);
double percentile(std::span<const double> samples, double p);  // sorts a copy
double median(std::span<const double> samples);
double mean(std::span<const double> samples);
double sample_stddev(std::span<const double> samples);

struct Summary {
  size_t count = 0;
  double mean = 0, stddev = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  // Tail over typical: how much the slowest 1% stretch the median (1 = perfectly steady).
  double jitter_ratio() const { return p50 > 0 ? p99 / p50 : 0.0; }
};

// Throws Error on an empty sample set: a summary of nothing is a bug in the caller.
Summary summarize(std::span<const double> samples);

// Least-squares line through (i, samples[i]): a run whose steps slow down as the KV cache grows
// has a slope, and its residuals are what is left of the spread once that growth is taken out.
struct Trend {
  double slope = 0;      // per sample (per token or step); 0 for fewer than 2 samples
  double intercept = 0;  // value at i = 0
};
Trend linear_trend(std::span<const double> samples);
// samples[i] - (intercept + slope * i).
std::vector<double> detrended(std::span<const double> samples, const Trend& trend);

// The bandwidth figure every part of the tool reports: bytes moved (read + written, counted once
// each) over a time in milliseconds, in GB/s (1 GB = 1e9 bytes).
inline double gb_per_s(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }

}  // namespace fuselm::bench
