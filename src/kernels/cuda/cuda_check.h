#pragma once
// CUDA error handling for launchers: every runtime call and launch is checked, and a failure
// becomes a Status carrying the call, file and line.
#include <cuda_runtime.h>

#include "core/error.h"
#include "core/status.h"

namespace fuselm {

inline Status cuda_status(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return Status();
  return Status::error(str_cat(what, " failed: ", cudaGetErrorString(err), " (", file, ":", line, ")"));
}

}  // namespace fuselm

// Returns a failed Status from the enclosing function when a CUDA call fails.
#define FUSELM_CUDA_RETURN(call)                                                  \
  do {                                                                            \
    ::fuselm::Status s_ = ::fuselm::cuda_status((call), #call, __FILE__, __LINE__); \
    if (!s_.ok()) return s_;                                                      \
  } while (0)

// Returns a failed Status when the last launch failed (checked right after each launch).
#define FUSELM_CUDA_RETURN_LAUNCH() FUSELM_CUDA_RETURN(cudaGetLastError())

// Throws fuselm::Error when a CUDA call fails (for engine set-up code, not launchers).
#define FUSELM_CUDA_THROW(call)                                                   \
  do {                                                                            \
    ::fuselm::Status s_ = ::fuselm::cuda_status((call), #call, __FILE__, __LINE__); \
    if (!s_.ok()) throw ::fuselm::Error(s_.message());                            \
  } while (0)

// Throws fuselm::Error when a launcher's Status failed.
#define FUSELM_THROW_IF_FAILED(expr)                   \
  do {                                                 \
    ::fuselm::Status s_ = (expr);                      \
    if (!s_.ok()) throw ::fuselm::Error(s_.message()); \
  } while (0)
