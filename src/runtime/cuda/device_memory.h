#pragma once
// The one place the CUDA backend allocates memory (device memory and pinned host staging). Engines
// allocate everything at load; the counter lets tests prove that inference allocates nothing.
#include <cstddef>
#include <cstdint>
#include <string>

namespace fuselm {

// Allocation calls made through DeviceBuffer and PinnedBuffer so far, in this process.
int64_t device_allocation_count();

// Owns one cudaMalloc'd range (256-byte aligned); move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Throws Error naming `what`, the size and the device's free memory when the allocation fails.
  static DeviceBuffer allocate(size_t bytes, const std::string& what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <class T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<std::byte*>(data_) + offset);
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Owns one cudaMallocHost'd (page-locked) range, for host<->device copies that run asynchronously.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static PinnedBuffer allocate(size_t bytes, const std::string& what);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <class T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<std::byte*>(data_) + offset);
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// "1.50 GiB"-style sizes for messages.
std::string format_bytes(size_t bytes);

}  // namespace fuselm
