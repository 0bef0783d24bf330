#pragma once
// Bulk copies from global into shared memory by the Tensor Memory Accelerator (sm_90 and later): one
// thread issues a copy of a contiguous run of bytes (`cp.async.bulk`), which then proceeds in the
// background while the block computes; a barrier in shared memory (an mbarrier) counts the copy's bytes
// as they land, and the threads that need them wait on it. Where one plain load per thread would keep
// only a few requests in flight, a bulk copy keeps the multiprocessor's path from L2 busy on its own.
// The network kernel (network_forward.cuh) stages its Dense layers' weights with it.
//
// Each barrier here is used for one phase only (parity 0): initialised for one arrival, armed with the
// bytes it expects (expect, under 2^20), completed by the copies.
#include <cstdint>

namespace ctnn::kernels::bulk {

// Whether the code being compiled has bulk copies (device code for sm_90 and later). Elsewhere the
// functions below compile to nothing: a caller tests `available` first.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CTNN_HAS_BULK_COPY 1
inline constexpr bool available = true;
#else
#define CTNN_HAS_BULK_COPY 0
inline constexpr bool available = false;
#endif

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// One thread: the barrier at `bar` expects one arrival. Make the initialisation visible to the copy
// engine with fence_init() before the first copy, and to the other threads with a __syncthreads().
__device__ __forceinline__ void init(std::uint64_t* bar) {
#if CTNN_HAS_BULK_COPY
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bar)) : "memory");
#endif
}
__device__ __forceinline__ void fence_init() {
#if CTNN_HAS_BULK_COPY
  asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// One thread, once per barrier: arrive on `bar`, which then waits for `bytes` to land.
__device__ __forceinline__ void expect(std::uint64_t* bar, std::uint32_t bytes) {
#if CTNN_HAS_BULK_COPY
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#endif
}

// One thread: copy `bytes` (a multiple of 16; both addresses 16-byte aligned) from `src` to `dst`,
// completing them on `bar` (whose expect() counted them).
__device__ __forceinline__ void copy(void* dst, const void* src, std::uint32_t bytes, std::uint64_t* bar) {
#if CTNN_HAS_BULK_COPY
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
#endif
}

// Every thread that reads the copied bytes: returns once they have all landed (and are visible).
__device__ __forceinline__ void wait(std::uint64_t* bar) {
#if CTNN_HAS_BULK_COPY
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(shared_address(bar))
        : "memory");
  } while (!done);
#endif
}
#undef CTNN_HAS_BULK_COPY

}  // namespace ctnn::kernels::bulk
