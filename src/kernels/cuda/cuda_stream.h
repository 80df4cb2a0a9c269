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

}  // namespace fuselm
