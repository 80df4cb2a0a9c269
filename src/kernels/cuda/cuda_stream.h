#pragma once
// An owned non-blocking CUDA stream: created on construction, drained and destroyed on scope exit.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace fuselm {

class CudaStream {
 public:
  CudaStream() { FUSELM_CUDA_THROW(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event without timing (the cheapest to record and wait for), to know when the stream has
// passed a point.
class CudaEvent {
 public:
  CudaEvent() { FUSELM_CUDA_THROW(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~CudaEvent() { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  void record(cudaStream_t stream) { FUSELM_CUDA_THROW(cudaEventRecord(event_, stream)); }
  void wait() const { FUSELM_CUDA_THROW(cudaEventSynchronize(event_)); }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace fuselm
