#pragma once
// CHECK(call) for the standalone lab programs in this folder (each is built alone with nvcc): a CUDA
// runtime call that fails prints where and why, and ends the program. And their timing loop.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e = (x);                                                                     \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

struct LabTime {
  double median_us, min_us;
};

// Runs f() `reps` times between two events on `stream`, the first `warmup` untimed: the median and
// the fastest of the others.
template <class F>
LabTime lab_time(F&& f, cudaStream_t stream, int reps, int warmup) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(a, stream));
    f();
    CHECK(cudaEventRecord(b, stream));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    if (r >= warmup) ms.push_back(t);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return LabTime{ms[ms.size() / 2] * 1000.0, ms.front() * 1000.0};
}
