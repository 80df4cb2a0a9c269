#include "runtime/cuda/device_memory.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>

#include "core/error.h"

namespace fuselm {

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

int64_t device_allocation_count() { return g_allocations.load(); }

std::string format_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

void* DeviceMemory::allocate(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  ++g_allocations;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the error so that later checks do not report it again
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    fail("cannot allocate ", format_bytes(bytes), " of GPU memory for ", what, " (", cudaGetErrorString(err),
         "; free ", format_bytes(free_bytes), " of ", format_bytes(total_bytes),
         "); lower --max-batch, --max-seq-len or --max-prefill-tokens, or use a GPU with more memory");
  }
  return p;
}

void DeviceMemory::release(void* p) { cudaFree(p); }

void* PinnedMemory::allocate(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  ++g_allocations;
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail("cannot allocate ", format_bytes(bytes), " of page-locked host memory for ", what, " (",
         cudaGetErrorString(err), "); lower --max-batch or --max-prefill-tokens");
  }
  return p;
}

void PinnedMemory::release(void* p) { cudaFreeHost(p); }

}  // namespace fuselm
