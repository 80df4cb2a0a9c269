#include "runtime/cuda/device_memory.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <utility>

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

DeviceBuffer DeviceBuffer::allocate(size_t bytes, const std::string& what) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  ++g_allocations;
  const cudaError_t err = cudaMalloc(&b.data_, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the error so that later checks do not report it again
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    fail("cannot allocate ", format_bytes(bytes), " of GPU memory for ", what, " (", cudaGetErrorString(err),
         "; free ", format_bytes(free_bytes), " of ", format_bytes(total_bytes),
         "); lower --max-batch, --max-seq-len or --max-prefill-tokens, or use a GPU with more memory");
  }
  b.size_ = bytes;
  return b;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedBuffer PinnedBuffer::allocate(size_t bytes, const std::string& what) {
  PinnedBuffer b;
  if (bytes == 0) return b;
  ++g_allocations;
  const cudaError_t err = cudaMallocHost(&b.data_, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail("cannot allocate ", format_bytes(bytes), " of page-locked host memory for ", what, " (",
         cudaGetErrorString(err), "); lower --max-batch or --max-prefill-tokens");
  }
  b.size_ = bytes;
  return b;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace fuselm
