#pragma once
// A timeline of the kernels of one graph replay, recorded by the kernels themselves: no profiler
// shows how the launches of a captured decode step overlap under programmatic dependent launch.
// A traced kernel gets one KernelTrace slot and stamps the GPU's global nanosecond timer when its
// first CTA starts, when its first CTA is past the wait for the previous kernel, and when its last
// CTA ends. A null slot (the default) records nothing: one predicated branch per CTA.
#include <cstdint>

#include "core/hd.h"

namespace fuselm {

// Every field is kept as a minimum, so that one fill with 0xFF bytes resets a slot: `end` holds
// the bitwise complement of the latest end. kUnset = nothing recorded.
struct KernelTrace {
  static constexpr uint64_t kUnset = ~uint64_t{0};
  uint64_t start = kUnset;     // first CTA's start (ns)
  uint64_t released = kUnset;  // first CTA past griddepcontrol.wait (ns); unset for kernels without one
  uint64_t end_complement = kUnset;
  FUSELM_HD uint64_t end() const { return ~end_complement; }
};

#if defined(__CUDACC__)
__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Called by one thread of a CTA (the caller picks which).
__device__ __forceinline__ void trace_start(KernelTrace* t) {
  if (t != nullptr) atomicMin(reinterpret_cast<unsigned long long*>(&t->start), global_timer_ns());
}
__device__ __forceinline__ void trace_released(KernelTrace* t) {
  if (t != nullptr) atomicMin(reinterpret_cast<unsigned long long*>(&t->released), global_timer_ns());
}
__device__ __forceinline__ void trace_end(KernelTrace* t) {
  if (t != nullptr) atomicMin(reinterpret_cast<unsigned long long*>(&t->end_complement), ~global_timer_ns());
}
#endif

}  // namespace fuselm
