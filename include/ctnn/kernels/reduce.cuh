#pragma once
// Deterministic reductions: warp butterflies (every lane ends with the same bits, and the order of
// additions is fixed by the lane pattern) and the second stage of the two-stage reductions, which
// sums per-block partials in a fixed order. No floating-point atomics anywhere.
#include <cstddef>

#include "launch.cuh"

namespace ctnn::kernels {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Loads N consecutive floats from shared memory with the widest vector access N allows. The caller
// guarantees the address is aligned to that width (16 bytes when N % 4 == 0, 8 when N % 2 == 0).
template <int N>
__device__ __forceinline__ void load_shared(const float* p, float (&r)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 v = reinterpret_cast<const float4*>(p)[i];
      r[4 * i] = v.x, r[4 * i + 1] = v.y, r[4 * i + 2] = v.z, r[4 * i + 3] = v.w;
    }
  } else if constexpr (N % 2 == 0) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const float2 v = reinterpret_cast<const float2*>(p)[i];
      r[2 * i] = v.x, r[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) r[i] = p[i];
  }
}

// Second stage of a two-stage reduction: partials [count][E] (one row per first-stage block) are
// summed over the rows for each of the E columns; column e goes to out_a[e] when e < split, else to
// out_b[e - split] (a layer's weight and bias gradients side by side).
//
// Block: 32 columns × Warps warps. Warp w sums rows w, w + Warps, ... in increasing order (a
// chain of loads the compiler keeps several deep), then warp 0 adds the Warps results in
// warp order. The launcher picks Warps from `count` alone, so the order of additions depends only on
// `count` and results are bitwise reproducible.

template <int Warps>
__global__ void __launch_bounds__(32 * Warps)
kernel_sum_partials(const float* __restrict__ partials,  // [count][E]
                    int count, int E, int split,
                    float* __restrict__ out_a,           // [split]
                    float* __restrict__ out_b)           // [E - split]
{
  static_assert(Warps >= 1 && 32 * Warps <= 1024, "one to 32 warps per block");
  __shared__ float part_s[Warps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int e = blockIdx.x * 32 + lane;
  float acc = 0.f;
  if (e < E) {
#pragma unroll 8
    for (int r = warp; r < count; r += Warps) acc += partials[std::size_t(r) * E + e];
  }
  part_s[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && e < E) {
    float total = part_s[0][lane];
#pragma unroll
    for (int w = 1; w < Warps; ++w) total += part_s[w][lane];
    if (e < split) out_a[e] = total;
    else out_b[e - split] = total;
  }
}

// Few rows: one warp per block, each lane a short chain; many rows: up to 32 warps share a column.
inline void sum_partials(cudaStream_t stream, const float* partials, int count, int E, int split,
                         float* out_a, float* out_b) {
  const unsigned grid = grid_for(std::size_t(E), 32);
  if (count <= 8)
    kernel_sum_partials<1><<<grid, 32, 0, stream>>>(partials, count, E, split, out_a, out_b);
  else if (count <= 64)
    kernel_sum_partials<8><<<grid, 32 * 8, 0, stream>>>(partials, count, E, split, out_a, out_b);
  else
    kernel_sum_partials<32><<<grid, 32 * 32, 0, stream>>>(partials, count, E, split, out_a, out_b);
  CTNN_CHECK_LAUNCH();
}

}  // namespace ctnn::kernels
