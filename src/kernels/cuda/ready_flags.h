#pragma once
// Readiness flags between two kernels of the decode step, so that a consumer waits for the pieces
// of its input it reads rather than for the producer's whole grid (griddepcontrol.wait returns
// only after every CTA of the producer has ended and its memory is flushed).
//
// flags[row][chunk] holds the tag of the step (and pass) that last wrote chunk `chunk` of row
// `row`: the producer stores it with release semantics once the chunk's stores are done, and the
// consumer loads it with acquire semantics until it holds the current tag. Tags come from a step
// counter in the step inputs (epoch * kReadyPassesPerStep + pass), never the same for two passes in
// a row, so flags are never reset. A consumer still waits for the producer's whole grid before
// its own first write, which keeps the stream's order of kernel completions (and every
// write-after-read hazard) as it was.
#include <cuda_runtime.h>

#include <cstdint>

namespace fuselm {

// Passes of up to 16 rows per step that get distinct tags (buckets up to 1,024 rows).
inline constexpr uint32_t kReadyPassesPerStep = 64;

struct ReadyFlags {
  uint32_t* flags = nullptr;        // [rows][chunks], device; null: no flags (wait for the grid)
  const uint32_t* epoch = nullptr;  // device: the step's counter (from the step inputs)
  uint32_t pass = 0;                // this pass of the step (0 .. kReadyPassesPerStep - 1)
  int chunks = 0;                   // flags per row
  int chunk_cols = 0;               // consumer side: input columns per chunk
};

#if defined(__CUDACC__)
__device__ __forceinline__ uint32_t ready_tag(const ReadyFlags& r) {
  return *r.epoch * kReadyPassesPerStep + r.pass;
}

__device__ __forceinline__ uint32_t load_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// By one thread, after a barrier that follows every writer's stores (bar.sync, or a cluster
// barrier with release/acquire semantics): the release makes them visible with the flag.
__device__ __forceinline__ void store_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Every lane of the warp: until flags[row][c0 .. c1) of rows 0 .. m-1 hold `tag`, each lane
// polling its own flag, 32 at a time; then the warp's later loads see what the flags cover.
static __device__ __noinline__ void wait_ready(const uint32_t* flags, int chunks, uint32_t tag, int m, int c0,
                                               int c1) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int per_row = c1 - c0;
  const int n = per_row > 0 ? m * per_row : 0;
  for (int i = lane; i < n; i += 32) {
    const uint32_t* flag = flags + (i / per_row) * chunks + c0 + i % per_row;
    while (load_acquire_gpu(flag) != tag) __nanosleep(32);
  }
  __syncwarp();
}
#endif

}  // namespace fuselm
