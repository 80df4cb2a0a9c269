#pragma once
// Timing for the GPU labs (DISABLED_ tests that print times and never fail on speed).
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace fuselm::test {

// Median time in ms of `fn` over `reps` runs after 3 warm-ups, each run bracketed by events (for
// the labs: they print times and never fail on speed).
template <class F>
double median_ms(F&& fn, int reps = 20) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(start);
    fn();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Mean time in ms of one run of `fn` over `reps` runs launched back to back on `stream` after 20
// warm-ups: launches that overlap their neighbours (programmatic dependent launch) are timed as a
// chain, as the decode step runs them. `fn` returns false on an error, which stops the timing (-1).
template <class F>
double back_to_back_ms(F&& fn, cudaStream_t stream, int reps = 200) {
  for (int i = 0; i < 20; ++i)
    if (!fn()) return -1.0;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, stream);
  bool ok = true;
  for (int i = 0; i < reps && ok; ++i) ok = fn();
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ok ? ms / reps : -1.0;
}

}  // namespace fuselm::test
