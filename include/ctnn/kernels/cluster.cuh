#pragma once
// The device side of thread-block clusters (sm_90 and later): which block of its cluster this is, a
// barrier over the cluster, and another block's shared memory (distributed shared memory). These are
// the compiler's built-ins (crt/sm_90_rt.h, which nvcc includes with cuda_runtime.h) that
// cooperative_groups' cluster_group wraps, called directly: <cooperative_groups.h> brings about
// 78,000 preprocessed lines (<cuda/std/chrono>, <cuda/atomic>, the PTX wrappers) that nvcc would
// parse three times (cudafe++, cicc and the host compiler) in every file that includes a kernel.
// Launching clusters is launch.cuh's (launch_clustered).

namespace ctnn::kernels::cluster {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// This block's rank in its cluster, and the cluster's size in blocks (1 when launched without one).
__device__ __forceinline__ int block_rank() { return int(__clusterRelativeBlockRank()); }
__device__ __forceinline__ int size() { return int(__clusterSizeInBlocks()); }

// Every block of the cluster reaches this point; stores to shared memory (any block's) before it are
// visible after it (the arrive releases, the wait acquires).
__device__ __forceinline__ void sync() {
  __cluster_barrier_arrive();
  __cluster_barrier_wait();
}

// The address of *p (a variable in this block's shared memory) in block `rank`'s shared memory.
template <class T>
__device__ __forceinline__ T* map_shared_rank(T* p, int rank) {
  return static_cast<T*>(__cluster_map_shared_rank(p, unsigned(rank)));
}
#endif

}  // namespace ctnn::kernels::cluster
