#pragma once
// A timeline of the kernels of one graph replay, recorded by the kernels themselves: no profiler
// shows how the launches of a captured decode step overlap under programmatic dependent launch.
// A traced kernel gets one KernelTrace slot and stamps the GPU's global nanosecond timer when its
// first and last CTA start, when its first and last CTA are past the wait for the previous kernel,
// when its last CTA reaches each of a few marks inside the kernel (what they mean is the kernel's:
// kMarkNames in tests/gpu/decode_timeline_test.cu), and when its first and last CTA end (the spread
// between them is the kernel's tail: the time its grid runs short of work). Marks 0-2 come in
// order between the release and the end; marks 3-5 split a stretch of the kernel further and may lie
// anywhere (before the wait too). Per SM, the CTAs that ended there and the last one's end: whether
// the SMs holding more CTAs of a grid are the ones that end it; and the last one's start there:
// whether a late CTA started as soon as the previous kernel's CTA on its SM had left (it waited for
// room). A null slot (the default) records nothing: one predicated branch per stamp.
#include <cstdint>

#include "core/hd.h"

namespace fuselm {

// Every field is kept as a minimum, so that one fill with 0xFF bytes resets a slot: a latest time
// is held as its bitwise complement. kUnset = nothing recorded.
struct KernelTrace {
  static constexpr uint64_t kUnset = ~uint64_t{0};
  static constexpr int kMarks = 6;
  static constexpr int kOrderedMarks = 3;  // marks 0 .. kOrderedMarks - 1 follow the release, in order
  uint64_t start = kUnset;     // first CTA's start (ns)
  uint64_t last_start_complement = kUnset;
  uint64_t released = kUnset;  // first CTA past griddepcontrol.wait (ns); unset for kernels without one
  uint64_t last_released_complement = kUnset;
  uint64_t mark_complement[kMarks] = {kUnset, kUnset, kUnset, kUnset, kUnset, kUnset};  // last CTA at mark i
  uint64_t end_complement = kUnset;
  uint64_t first_end = kUnset;  // first CTA's end (ns)
  // Per SM (by %smid; 132 on an H100 or H200): CTAs ended there, the last one's end and the last
  // one's start.
  static constexpr int kSms = 160;
  uint32_t sm_ctas_complement[kSms];
  uint64_t sm_end_complement[kSms];
  uint64_t sm_start_complement[kSms];
  FUSELM_HD KernelTrace() {
    for (int i = 0; i < kSms; ++i) {
      sm_ctas_complement[i] = ~uint32_t{0};
      sm_end_complement[i] = kUnset;
      sm_start_complement[i] = kUnset;
    }
  }
  FUSELM_HD static uint64_t latest(uint64_t complement) { return complement == kUnset ? kUnset : ~complement; }
  FUSELM_HD uint64_t last_start() const { return latest(last_start_complement); }
  FUSELM_HD uint64_t last_released() const { return latest(last_released_complement); }
  FUSELM_HD uint64_t mark(int i) const { return latest(mark_complement[i]); }
  FUSELM_HD uint64_t end() const { return ~end_complement; }
  FUSELM_HD int sm_ctas(int sm) const { return static_cast<int>(~sm_ctas_complement[sm]); }
  FUSELM_HD uint64_t sm_end(int sm) const { return latest(sm_end_complement[sm]); }
  FUSELM_HD uint64_t sm_last_start(int sm) const { return latest(sm_start_complement[sm]); }
};

#if defined(__CUDACC__)
__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint32_t sm_id() {
  uint32_t sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
}

__device__ __forceinline__ void trace_first(uint64_t* field, uint64_t now) {
  atomicMin(reinterpret_cast<unsigned long long*>(field), now);
}
__device__ __forceinline__ void trace_last(uint64_t* complement, uint64_t now) {
  atomicMin(reinterpret_cast<unsigned long long*>(complement), ~now);
}

// Called by one thread of a CTA (the caller picks which).
__device__ __forceinline__ void trace_start(KernelTrace* t) {
  if (t == nullptr) return;
  const uint64_t now = global_timer_ns();
  trace_first(&t->start, now);
  trace_last(&t->last_start_complement, now);
  const uint32_t sm = sm_id();
  if (sm < KernelTrace::kSms) trace_last(&t->sm_start_complement[sm], now);
}
__device__ __forceinline__ void trace_released(KernelTrace* t) {
  if (t == nullptr) return;
  const uint64_t now = global_timer_ns();
  trace_first(&t->released, now);
  trace_last(&t->last_released_complement, now);
}
__device__ __forceinline__ void trace_mark(KernelTrace* t, int mark) {
  if (t != nullptr) trace_last(&t->mark_complement[mark], global_timer_ns());
}
__device__ __forceinline__ void trace_end(KernelTrace* t) {
  if (t == nullptr) return;
  const uint64_t now = global_timer_ns();
  trace_first(&t->first_end, now);
  trace_last(&t->end_complement, now);
  const uint32_t sm = sm_id();
  if (sm < KernelTrace::kSms) {
    atomicSub(&t->sm_ctas_complement[sm], 1u);  // counts down from all ones: ~value CTAs
    trace_last(&t->sm_end_complement[sm], now);
  }
}
#endif

}  // namespace fuselm
