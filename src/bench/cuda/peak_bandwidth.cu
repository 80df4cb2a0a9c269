// GPU memory-bandwidth peak (a read kernel), a copy by cudaMemcpy and by the tool's own kernel,
// and the GPU's identity and clocks. Every CUDA call is checked; failures become fuselm::Error naming the call.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdint>
#include <vector>

#include "bench/gpu_info.h"
#include "bench/peak_bandwidth.h"
#include "bench/stats.h"
#include "core/error.h"
#include "kernels/cuda/cuda_check.h"

namespace fuselm::bench {

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread per iteration

static_assert(sizeof(uint4) == 16, "the read kernel assumes 16-byte vector loads");

// Word i (as 32-bit words) holds i: not zeros, and the total has a closed form to check against.
__global__ void fill_index_kernel(uint4* data, size_t n_vec) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_vec; i += stride) {
    const uint32_t w = static_cast<uint32_t>(4 * i);
    data[i] = make_uint4(w, w + 1, w + 2, w + 3);
  }
}

__device__ __forceinline__ uint64_t sum_words(uint4 v) {
  return static_cast<uint64_t>(v.x) + v.y + v.z + v.w;
}

// Grid-stride 16-byte loads, kUnroll independent loads per iteration so enough bytes are in
// flight to cover DRAM latency; one partial sum per block (summed on the host).
__global__ void __launch_bounds__(kThreads) read_sum_kernel(const uint4* __restrict__ data, size_t n_vec,
                                                           unsigned long long* __restrict__ block_sums) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint64_t acc = 0;
  for (; i + (kUnroll - 1) * stride < n_vec; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = data[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += sum_words(v[u]);
  }
  for (; i < n_vec; i += stride) acc += sum_words(data[i]);

  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  __shared__ uint64_t warp_sums[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    block_sums[blockIdx.x] = total;
  }
}

// The tool's own copy: one 16-byte load and store per thread, one block of kCopyThreads per
// contiguous 4 KiB chunk, as many blocks as chunks. Not persistent: the block scheduler keeps every
// SM full of short blocks to the end. On the H200 this matched cudaMemcpy (1.001-1.004 of it), where
// 2 loads per thread reached 0.974-0.980, the fastest persistent copy (grid-stride, one block per
// SM, 8 loads per thread issued ahead of the previous 8 stores) 0.948-0.955 and TMA bulk copies
// 0.89-0.925 (bench/lab/copy_probe.cu, bench/results/README.md).
constexpr int kCopyThreads = 256;

__global__ void __launch_bounds__(kCopyThreads) copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                           size_t n_vec) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kCopyThreads + threadIdx.x;
  if (i < n_vec) dst[i] = src[i];
}

// Frees on scope exit; destructors run during unwinding, so a failed free there is ignored
// (the explicit checked release() path is taken on success).
struct DeviceMemory {
  void* ptr = nullptr;
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (ptr) (void)cudaFree(ptr);
  }
  void release() {
    void* p = ptr;
    ptr = nullptr;
    FUSELM_CUDA_THROW(cudaFree(p));
  }
};

struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    FUSELM_CUDA_THROW(cudaEventCreate(&start));
    FUSELM_CUDA_THROW(cudaEventCreate(&stop));
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (start) (void)cudaEventDestroy(start);
    if (stop) (void)cudaEventDestroy(stop);
  }
  float elapsed_ms() {
    FUSELM_CUDA_THROW(cudaEventSynchronize(stop));
    float ms = 0;
    FUSELM_CUDA_THROW(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  }
};

// NVML is loaded at run time so that the binary still starts where no driver is installed.
class Nvml {
 public:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    init_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlShutdown"));
    by_pci_ = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib_, "nvmlDeviceGetClockInfo"));
    driver_ = reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib_, "nvmlSystemGetDriverVersion"));
    ok_ = init_ && shutdown_ && by_pci_ && clock_ && driver_ && init_() == kSuccess;
  }
  ~Nvml() {
    if (ok_) (void)shutdown_();
    if (lib_) dlclose(lib_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  GpuClocks clocks(const std::string& pci_bus_id) const {
    GpuClocks c;
    void* device = nullptr;
    if (!ok_ || by_pci_(pci_bus_id.c_str(), &device) != kSuccess) return c;
    unsigned mhz = 0;
    if (clock_(device, kClockSm, &mhz) == kSuccess) c.sm_mhz = static_cast<int>(mhz);
    if (clock_(device, kClockMem, &mhz) == kSuccess) c.memory_mhz = static_cast<int>(mhz);
    return c;
  }
  std::string driver_version() const {
    char buf[96] = {};
    if (!ok_ || driver_(buf, sizeof(buf)) != kSuccess) return "";
    return buf;
  }

 private:
  static constexpr int kSuccess = 0;   // NVML_SUCCESS
  static constexpr int kClockSm = 1;   // NVML_CLOCK_SM
  static constexpr int kClockMem = 2;  // NVML_CLOCK_MEM
  void* lib_ = nullptr;
  bool ok_ = false;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*by_pci_)(const char*, void**) = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;
  int (*driver_)(char*, unsigned) = nullptr;
};

std::string current_pci_bus_id() {
  int device = 0;
  FUSELM_CUDA_THROW(cudaGetDevice(&device));
  char buf[64] = {};
  FUSELM_CUDA_THROW(cudaDeviceGetPCIBusId(buf, sizeof(buf), device));
  return buf;
}

}  // namespace

bool cuda_device_available() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: "no device" is an answer here, not a failure
    return false;
  }
  return count > 0;
}

GpuInfo query_gpu_info() {
  FUSELM_CHECK(cuda_device_available(), "no CUDA device is usable here (cudaGetDeviceCount found none or the "
               "driver is missing); run with --device cpu or on a machine with an NVIDIA GPU");
  int device = 0;
  FUSELM_CUDA_THROW(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  FUSELM_CUDA_THROW(cudaGetDeviceProperties(&prop, device));
  GpuInfo info;
  info.name = prop.name;
  info.compute_capability_major = prop.major;
  info.compute_capability_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.total_memory_bytes = prop.totalGlobalMem;
  info.memory_bus_width_bits = prop.memoryBusWidth;
  int khz = 0;
  FUSELM_CUDA_THROW(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  info.sm_clock_max_mhz = khz / 1000;
  FUSELM_CUDA_THROW(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device));
  info.memory_clock_max_mhz = khz / 1000;
  FUSELM_CUDA_THROW(cudaDriverGetVersion(&info.cuda_driver_version));
  FUSELM_CUDA_THROW(cudaRuntimeGetVersion(&info.cuda_runtime_version));
  info.pci_bus_id = current_pci_bus_id();
  Nvml nvml;
  const GpuClocks clocks = nvml.clocks(info.pci_bus_id);
  info.sm_clock_mhz = clocks.sm_mhz;
  info.memory_clock_mhz = clocks.memory_mhz;
  info.driver_version = nvml.driver_version();
  return info;
}

GpuClocks query_gpu_clocks() {
  if (!cuda_device_available()) return {};
  Nvml nvml;
  return nvml.clocks(current_pci_bus_id());
}

BandwidthPeak measure_cuda_peak(size_t bytes, int runs) {
  FUSELM_CHECK(runs > 0, "peak bandwidth: runs must be positive, got ", runs);
  FUSELM_CHECK(cuda_device_available(), "no CUDA device is usable here; measure the host instead with --device cpu");
  // Whole 16-byte vectors, and an even count so the copy halves are equal; 32-bit word indices.
  const size_t n_vec = (bytes / 32) * 2;
  FUSELM_CHECK(n_vec >= 1024, "peak bandwidth: buffer of ", bytes, " bytes is too small; use at least 16 KiB "
               "(and far more than the L2 cache, e.g. the default 4 GiB, for a meaningful number)");
  FUSELM_CHECK(n_vec * 4 <= (size_t{1} << 32), "peak bandwidth: at most 16 GiB, got ", bytes, " bytes");
  const size_t buffer_bytes = n_vec * sizeof(uint4);

  int device = 0, sm_count = 0, blocks_per_sm = 0;
  FUSELM_CUDA_THROW(cudaGetDevice(&device));
  FUSELM_CUDA_THROW(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  FUSELM_CUDA_THROW(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, read_sum_kernel, kThreads, 0));
  FUSELM_CHECK(blocks_per_sm > 0, "peak bandwidth: the read kernel cannot be resident on this GPU");
  const int grid = sm_count * blocks_per_sm;

  size_t free_bytes = 0, total_bytes = 0;
  FUSELM_CUDA_THROW(cudaMemGetInfo(&free_bytes, &total_bytes));
  FUSELM_CHECK(buffer_bytes + (size_t{64} << 20) < free_bytes, "peak bandwidth: a ", buffer_bytes,
               "-byte buffer does not fit in the ", free_bytes, " bytes free on the GPU; pass a smaller --peak-bytes");

  DeviceMemory buffer, sums;
  FUSELM_CUDA_THROW(cudaMalloc(&buffer.ptr, buffer_bytes));
  FUSELM_CUDA_THROW(cudaMalloc(&sums.ptr, grid * sizeof(unsigned long long)));
  auto* data = static_cast<uint4*>(buffer.ptr);
  fill_index_kernel<<<grid, kThreads>>>(data, n_vec);
  FUSELM_CUDA_THROW(cudaGetLastError());
  FUSELM_CUDA_THROW(cudaDeviceSynchronize());

  const uint64_t words = n_vec * 4;
  const uint64_t expected = (words / 2) * (words - 1);  // words is even; no overflow before the halving
  std::vector<unsigned long long> host_sums(grid);
  BandwidthPeak peak;
  peak.device = "cuda";
  peak.threads = grid * kThreads;
  peak.read_bytes = buffer_bytes;
  peak.read_method = str_cat("grid-stride 16-byte-load sum over ", buffer_bytes, " bytes (", grid, " blocks x ",
                             kThreads, " threads, ", kUnroll, " loads in flight per thread), CUDA events, median of ",
                             runs, " runs after 2 warm-ups");
  EventPair events;
  for (int run = -2; run < runs; ++run) {
    FUSELM_CUDA_THROW(cudaMemset(sums.ptr, 0, grid * sizeof(unsigned long long)));
    FUSELM_CUDA_THROW(cudaEventRecord(events.start));
    read_sum_kernel<<<grid, kThreads>>>(data, n_vec, static_cast<unsigned long long*>(sums.ptr));
    FUSELM_CUDA_THROW(cudaGetLastError());
    FUSELM_CUDA_THROW(cudaEventRecord(events.stop));
    const float ms = events.elapsed_ms();
    FUSELM_CUDA_THROW(cudaMemcpy(host_sums.data(), sums.ptr, grid * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    uint64_t total = 0;
    for (unsigned long long s : host_sums) total += s;
    FUSELM_CHECK(total == expected, "GPU read peak: the kernel summed ", total, " but the buffer holds ", expected,
                 "; not every byte was read (a bug in the read kernel or a faulty device)");
    if (run >= 0) peak.read_ms.push_back(ms);
  }
  peak.read_gbs = gb_per_s(static_cast<double>(peak.read_bytes), median(peak.read_ms));

  // The copy: the first half onto the second, by cudaMemcpy and by copy_kernel on the same
  // buffers, alternating run by run (ABBA) so clock drift falls on both alike.
  const size_t half = buffer_bytes / 2;
  const size_t half_vec = n_vec / 2;
  const size_t copy_grid = (half_vec + kCopyThreads - 1) / kCopyThreads;  // <= 2^21 blocks (16 GiB at most)
  char* base = static_cast<char*>(buffer.ptr);
  const auto* src = data;
  auto* dst = data + half_vec;
  auto launch_copy_kernel = [&] {
    copy_kernel<<<static_cast<unsigned>(copy_grid), kCopyThreads>>>(src, dst, half_vec);
    FUSELM_CUDA_THROW(cudaGetLastError());
  };

  // Check the kernel once on a zeroed destination: the second half must then hold words
  // 0 .. half_words - 1, whose sum is known, so every byte was written.
  FUSELM_CUDA_THROW(cudaMemset(dst, 0, half));
  launch_copy_kernel();
  FUSELM_CUDA_THROW(cudaMemset(sums.ptr, 0, grid * sizeof(unsigned long long)));
  read_sum_kernel<<<grid, kThreads>>>(dst, half_vec, static_cast<unsigned long long*>(sums.ptr));
  FUSELM_CUDA_THROW(cudaGetLastError());
  FUSELM_CUDA_THROW(cudaMemcpy(host_sums.data(), sums.ptr, grid * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  {
    const uint64_t half_words = half_vec * 4;  // even
    const uint64_t copied_expected = (half_words / 2) * (half_words - 1);
    uint64_t total = 0;
    for (unsigned long long s : host_sums) total += s;
    FUSELM_CHECK(total == copied_expected, "GPU copy kernel: the destination sums to ", total, " instead of ",
                 copied_expected, "; not every byte was copied (a bug in the copy kernel or a faulty device)");
  }

  peak.copy_bytes = 2 * half;
  peak.copy_method = str_cat("cudaMemcpy device-to-device of ", half, " bytes, counted read + written, CUDA events, "
                             "median of ", runs, " runs after 2 warm-ups, alternating with the copy kernel");
  const std::string copy_kernel_how =
      str_cat("16-byte loads and stores of ", half, " bytes, one per thread, one block per contiguous ",
              kCopyThreads * 16, "-byte chunk (", copy_grid, " blocks x ", kCopyThreads, " threads, not persistent)");
  peak.copy_kernel_method = str_cat("copy kernel: ", copy_kernel_how, ", counted read + written, CUDA events, median of ",
                                    runs, " runs after 2 warm-ups, alternating with cudaMemcpy");
  for (int run = -2; run < runs; ++run) {
    for (int k = 0; k < 2; ++k) {
      const bool kernel = (k == 0) == (run % 2 == 0);  // kernel first on even runs, cudaMemcpy first on odd
      FUSELM_CUDA_THROW(cudaEventRecord(events.start));
      if (kernel) launch_copy_kernel();
      else FUSELM_CUDA_THROW(cudaMemcpyAsync(base + half, base, half, cudaMemcpyDeviceToDevice));
      FUSELM_CUDA_THROW(cudaEventRecord(events.stop));
      const float ms = events.elapsed_ms();
      if (run >= 0) (kernel ? peak.copy_kernel_ms : peak.copy_ms).push_back(ms);
    }
  }
  peak.copy_gbs = gb_per_s(static_cast<double>(peak.copy_bytes), median(peak.copy_ms));
  peak.copy_kernel_gbs = gb_per_s(static_cast<double>(peak.copy_bytes), median(peak.copy_kernel_ms));
  sums.release();
  buffer.release();
  return peak;
}

}  // namespace fuselm::bench
