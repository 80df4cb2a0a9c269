#pragma once
// The one place the CUDA backend allocates memory (device memory and pinned host staging). Engines
// allocate everything at load; the counter lets tests prove that inference allocates nothing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace fuselm {

// Allocation calls made through DeviceBuffer and PinnedBuffer so far, in this process.
int64_t device_allocation_count();

// Where a buffer's memory comes from. allocate throws Error naming `what`, the size and (for the
// GPU) its free memory, with advice, when the allocation fails; it returns null for 0 bytes.
struct DeviceMemory {  // cudaMalloc: 256-byte aligned device memory
  static void* allocate(size_t bytes, const std::string& what);
  static void release(void* p);
};
struct PinnedMemory {  // cudaMallocHost: page-locked host memory, for asynchronous copies
  static void* allocate(size_t bytes, const std::string& what);
  static void release(void* p);
};

// Owns one allocated range; move-only.
template <class Memory>
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  static OwnedBuffer allocate(size_t bytes, const std::string& what) {
    OwnedBuffer b;
    b.data_ = Memory::allocate(bytes, what);
    b.size_ = b.data_ ? bytes : 0;
    return b;
  }
  ~OwnedBuffer() {
    if (data_) Memory::release(data_);
  }
  OwnedBuffer(OwnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  OwnedBuffer& operator=(OwnedBuffer&& other) noexcept {
    if (this != &other) {
      if (data_) Memory::release(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;

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

using DeviceBuffer = OwnedBuffer<DeviceMemory>;
using PinnedBuffer = OwnedBuffer<PinnedMemory>;

// "1.50 GiB"-style sizes for messages.
std::string format_bytes(size_t bytes);

}  // namespace fuselm
