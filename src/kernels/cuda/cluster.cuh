#pragma once
// Thread-block clusters (sm_90+): the barrier across a cluster's CTAs and access to a peer CTA's
// shared memory (distributed shared memory). Launchers use clusters only where the sm_90 code runs,
// so the compute_80 PTX build traps if one is ever reached.
#include <cooperative_groups.h>

namespace fuselm {

// Every thread of every CTA of the cluster arrives and waits; also a barrier within each CTA. Shared
// memory written before it is visible to the cluster's CTAs after it.
__device__ __forceinline__ void cluster_barrier() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __trap();
#endif
}

// The same barrier with a relaxed arrive: it orders nothing this CTA wrote before it. For a barrier
// that only keeps CTAs from leaving (or reusing their shared memory) while peers may still read it:
// a peer's reads are done when it arrives. The releasing arrive of cluster_barrier() also waits
// until this CTA's earlier global stores are visible, which at a kernel's tail costs a memory round
// trip (docs/kernels/fused_decode.md, session 11).
__device__ __forceinline__ void cluster_barrier_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
#else
  __trap();
#endif
}

// `p` (an address in this CTA's shared memory) in the shared memory of cluster rank `rank`.
template <class T>
__device__ __forceinline__ T* cluster_peer(T* p, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(p, static_cast<unsigned>(rank));
#else
  __trap();
  return p;
#endif
}

}  // namespace fuselm
