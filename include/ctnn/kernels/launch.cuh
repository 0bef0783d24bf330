#pragma once
// Helpers shared by the kernels' launchers: integer rounding, 1-D grids, and the run-time checks a
// launcher makes before it enqueues anything (batch range, workspace size, pointer alignment).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "../core/cuda_context.hpp"

namespace ctnn::kernels {

template <class T>
constexpr T ceil_div(T a, T b) { return (a + b - 1) / b; }
template <class T>
constexpr T round_up(T a, T b) { return ceil_div(a, b) * b; }
template <class T>
constexpr T min_of(T a, T b) { return a < b ? a : b; }
template <class T>
constexpr T max_of(T a, T b) { return a < b ? b : a; }
template <class T>
constexpr T clamp_to(T v, T lo, T hi) { return v < lo ? lo : (hi < v ? hi : v); }
// Smallest power of two >= v (v >= 1).
constexpr int pow2_at_least(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// The largest of f(s) over s = 1..n (0 when n < 1).
template <class F>
constexpr int max_over(int n, F f) {
  int m = 0;
  for (int s = 1; s <= n; ++s) m = max_of(m, f(s));
  return m;
}
// f(std::integral_constant<int, I>{}) for I = 0..N-1, in order (host and device).
template <int N, class F>
constexpr void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }(
      std::make_integer_sequence<int, N>{});
}

// Static shared memory a block may use without opting in (48 KB), in floats.
inline constexpr int smem_limit_floats = 48 * 1024 / 4;

// Blocks for n work items of `per_block` each; throws when the grid would not fit in gridDim.x.
inline unsigned grid_for(std::size_t n, std::size_t per_block) {
  const std::size_t blocks = ceil_div<std::size_t>(n, per_block);
  if (blocks > std::size_t(std::numeric_limits<int>::max()))
    throw std::invalid_argument("ctnn: " + std::to_string(n) + " work items need " +
                                std::to_string(blocks) + " blocks, more than a grid holds");
  return unsigned(blocks == 0 ? 1 : blocks);
}

inline bool aligned_to(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

inline void check_batch(int batch, const char* layer) {
  if (batch < 1)
    throw std::invalid_argument(std::string("ctnn: ") + layer + ": batch must be at least 1, got " +
                                std::to_string(batch));
}

// The layer's scratch must fit in the context's workspace (the driver sizes it as the largest
// cuda_layer<...>::workspace_floats over the network's layers).
inline void check_workspace(const CudaContext& ctx, std::size_t need, const char* layer, int batch) {
  if (need > 0 && (ctx.workspace == nullptr || ctx.workspace_floats < need))
    throw std::invalid_argument(std::string("ctnn: ") + layer + " at batch " + std::to_string(batch) +
                                " needs a workspace of " + std::to_string(need) +
                                " floats, but the CudaContext provides " +
                                std::to_string(ctx.workspace ? ctx.workspace_floats : 0));
}

// Whether the current device launches thread-block clusters (sm_90 and newer).
inline bool clusters_supported() {
  int dev = 0, ok = 0;
  CTNN_CUDA_CHECK(cudaGetDevice(&dev));
  CTNN_CUDA_CHECK(cudaDeviceGetAttribute(&ok, cudaDevAttrClusterLaunch, dev));
  return ok != 0;
}

// The current device's multiprocessors, asked once per device (launchers consult it on every launch:
// the conv groups' forward and the dense chain choose their grids by it).
inline unsigned sm_count() {
  static std::atomic<unsigned> known[64];  // per device: 0 unknown
  int dev = 0;
  CTNN_CUDA_CHECK(cudaGetDevice(&dev));
  std::atomic<unsigned>& k = known[dev % 64];
  if (k.load() == 0) {
    int n = 0;
    CTNN_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    k.store(unsigned(n));
  }
  return k.load();
}

// The shared memory a block of the current device may opt in to (cudaFuncSetAttribute), in bytes.
inline std::size_t smem_opt_in_bytes() {
  int dev = 0, n = 0;
  CTNN_CUDA_CHECK(cudaGetDevice(&dev));
  CTNN_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return std::size_t(n);
}

// Programmatic dependent launch (sm_90): a kernel launched Dependent is launched as the blocks of the
// kernel before it on the stream exit, not after that kernel has completed and its writes have been
// flushed, so its launch overlaps that kernel's end (LeNet-5's epochs 1–3% faster on an H100; a
// training step at small batches is a chain of short kernels). Such a kernel calls
// wait_for_prior_grids() before it reads or writes memory that the kernels before it use; in a kernel
// launched plainly it returns at once. (Letting the next kernel launch earlier still, with
// griddepcontrol.launch_dependents at entry, made the epochs 5–27% slower: its waiting blocks held
// multiprocessors; docs/fusion.md.)
#ifndef CTNN_DEPENDENT_LAUNCH  // (0 turns it off, for measuring)
#define CTNN_DEPENDENT_LAUNCH 1
#endif
enum class Launch { plain, dependent };

__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether the current device launches dependent kernels (compute capability 9.0 and newer); asked
// once per device.
inline bool dependent_launch_supported() {
  static std::atomic<int> known[64];  // per device: 0 unknown, 1 no, 2 yes
  int dev = 0;
  CTNN_CUDA_CHECK(cudaGetDevice(&dev));
  std::atomic<int>& k = known[dev % 64];
  if (k.load() == 0) {
    int major = 0;
    CTNN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    k.store(major >= 9 ? 2 : 1);
  }
  return k.load() == 2;
}

// kernel<<<grid, threads, smem, stream>>>(args...), as clusters of `cluster` consecutive blocks along x
// when cluster > 1 (grid a multiple of it; a device with clusters: clusters_supported()), and with
// Launch::dependent as a dependent launch where the device has them (see wait_for_prior_grids).
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, int threads, int smem, cudaStream_t stream, int cluster,
                   Launch how, Args... args) {
  const bool dependent = CTNN_DEPENDENT_LAUNCH && how == Launch::dependent && dependent_launch_supported();
  if (cluster == 1 && !dependent) {
    kernel<<<grid, unsigned(threads), std::size_t(smem), stream>>>(args...);
  } else {
    cudaLaunchAttribute attrs[2]{};
    unsigned n = 0;
    if (cluster > 1) {
      attrs[n].id = cudaLaunchAttributeClusterDimension;
      attrs[n].val.clusterDim.x = unsigned(cluster), attrs[n].val.clusterDim.y = 1, attrs[n].val.clusterDim.z = 1;
      ++n;
    }
    if (dependent) {
      attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid, cfg.blockDim = dim3(unsigned(threads)), cfg.dynamicSmemBytes = std::size_t(smem);
    cfg.stream = stream, cfg.attrs = attrs, cfg.numAttrs = n;
    CTNN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
  }
  CTNN_CHECK_LAUNCH();
}
template <class... Params, class... Args>
void launch_clustered(void (*kernel)(Params...), dim3 grid, int threads, int smem, cudaStream_t stream, int cluster,
                      Args... args) {
  launch_kernel(kernel, grid, threads, smem, stream, cluster, Launch::plain, args...);
}
// A dependent launch of kernel<<<grid, threads, smem, stream>>>(args...) (see wait_for_prior_grids).
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, int threads, int smem, cudaStream_t stream, Args... args) {
  launch_kernel(kernel, grid, threads, smem, stream, 1, Launch::dependent, args...);
}

// Kernels that want more than 48 KB must say so once per device (cudaFuncSetAttribute).
template <auto Kernel, int Bytes>
void request_dynamic_smem() {
  if constexpr (Bytes > 48 * 1024) {
    static std::atomic<unsigned long long> done{0};  // bit d: set on device d
    int device = 0;
    CTNN_CUDA_CHECK(cudaGetDevice(&device));
    const unsigned long long bit = 1ull << (device % 64);
    if (!(done.load() & bit)) {
      CTNN_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Bytes));
      done.fetch_or(bit);
    }
  }
}

}  // namespace ctnn::kernels
