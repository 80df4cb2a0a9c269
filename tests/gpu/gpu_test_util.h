#pragma once
// Shared pieces of the GPU kernel tests: skipping without a device, device arrays, poisoning,
// random host data in any dtype, and element-wise comparison with a stated tolerance.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace fuselm::test {

inline bool has_cuda_device() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return ok;
}

}  // namespace fuselm::test

#define FUSELM_REQUIRE_GPU()                                                                     \
  do {                                                                                           \
    if (!::fuselm::test::has_cuda_device())                                                      \
      GTEST_SKIP() << "no CUDA device found (cudaGetDeviceCount); this GPU test runs only on a " \
                      "machine with an NVIDIA GPU";                                              \
  } while (0)

#define ASSERT_CUDA_OK(call)                                                \
  do {                                                                      \
    const cudaError_t e_ = (call);                                          \
    ASSERT_EQ(e_, cudaSuccess) << #call << ": " << cudaGetErrorString(e_);  \
  } while (0)
#define ASSERT_STATUS_OK(expr)                       \
  do {                                               \
    ::fuselm::Status s_ = (expr);                    \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.message(); \
  } while (0)

namespace fuselm::test {

// A device allocation for tests (they allocate directly; only engines go through DeviceBuffer).
class DeviceArray {
 public:
  explicit DeviceArray(size_t bytes) : bytes_(bytes) {
    if (bytes && cudaMalloc(&ptr_, bytes) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceArray() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  // All bytes 0xFF: NaN in f32, f16 and bf16, -1 in int32.
  void poison() const { cudaMemset(ptr_, 0xFF, bytes_); }
  void upload(const void* host, size_t bytes) const { cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice); }
  void download(void* host, size_t bytes) const { cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

// Host bytes of n values in `dtype` (f32, f16 or bf16) and their exact fp32 values.
struct HostTensor {
  DType dtype = DType::F32;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // what the stored elements are worth

  int64_t size() const { return static_cast<int64_t>(values.size()); }
  const void* data() const { return bytes.data(); }
};

inline HostTensor make_tensor(const std::vector<float>& v, DType dtype) {
  HostTensor t;
  t.dtype = dtype;
  t.bytes.resize(dtype_bytes(dtype, static_cast<int64_t>(v.size())));
  convert_dtype(v.data(), DType::F32, t.bytes.data(), dtype, static_cast<int64_t>(v.size()));
  t.values.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) t.values[i] = load_as_f32(t.bytes.data(), dtype, static_cast<int64_t>(i));
  return t;
}

inline std::vector<float> random_floats(std::mt19937& gen, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

inline HostTensor random_tensor(std::mt19937& gen, int64_t n, DType dtype, float lo = -1.0f, float hi = 1.0f) {
  return make_tensor(random_floats(gen, n, lo, hi), dtype);
}

// Reads n elements of `dtype` from the device as fp32.
inline std::vector<float> download_as_f32(const void* device, DType dtype, int64_t n) {
  std::vector<uint8_t> bytes(dtype_bytes(dtype, n));
  cudaMemcpy(bytes.data(), device, bytes.size(), cudaMemcpyDeviceToHost);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = load_as_f32(bytes.data(), dtype, i);
  return out;
}

// One unit in the last place of `dtype` at magnitude 1 (relative rounding step).
inline float dtype_ulp(DType dtype) {
  switch (dtype) {
    case DType::BF16: return 1.0f / 128;
    case DType::F16: return 1.0f / 1024;
    default: return 1.0f / (1 << 23);
  }
}

// Checks every element: finite, and |got - want| <= atol + rtol * |want|. Reports the first few
// failures and the count.
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& want, float atol,
                                            float rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  size_t bad = 0;
  std::string first;
  double max_err = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float err = std::fabs(got[i] - want[i]);
    const bool ok = std::isfinite(got[i]) && err <= atol + rtol * std::fabs(want[i]);
    if (std::isfinite(got[i])) max_err = std::max<double>(max_err, err);
    if (!ok) {
      if (bad < 5) first += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " + std::to_string(want[i]) + ";";
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements outside atol " << atol
                                       << " + rtol " << rtol << " (max abs err " << max_err << "):" << first;
}

// Rounds each value as a `dtype` buffer would store it.
inline std::vector<float> rounded(std::vector<float> v, DType dtype) {
  for (float& x : v) x = round_to(dtype, x);
  return v;
}

}  // namespace fuselm::test
