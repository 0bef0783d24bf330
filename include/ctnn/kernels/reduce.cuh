#pragma once
// Deterministic reductions: warp butterflies (every lane ends with the same bits, and the order of
// additions is fixed by the lane pattern) and the second stage of the two-stage reductions, which
// sums per-block partials in a fixed order. No floating-point atomics anywhere.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

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

// Loads N consecutive floats (shared or global memory) with the widest vector access N allows. The
// caller guarantees the address is aligned to that width (16 bytes when N % 4 == 0, 8 when N % 2 == 0).
template <int N>
__device__ __forceinline__ void load_floats(const float* p, float (&r)[N]) {
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
// Block: 32·V columns (V per lane: 1, or 4 with 16-byte loads, E % 4 == 0 and partials 16-byte
// aligned) × Warps warps. Warp w sums rows w, w + Warps, ... in increasing order (a chain of loads
// the compiler keeps several deep), then warp 0 adds the Warps results in warp order. The launcher
// picks Warps from `count` alone, and V does not change the order, so the order of additions depends
// only on `count` and results are bitwise reproducible.
// Map::at(e) (e < split): where column e goes in out_a; the identity but for a kernel whose partials hold
// the columns in another order (conv_wgmma_wgrad.cuh).
struct SameColumn {
  __device__ static int at(int e) { return e; }
};
template <int Warps, int V = 1, class Map = SameColumn>
__global__ void __launch_bounds__(32 * Warps)
kernel_sum_partials(const float* __restrict__ partials,  // [count][E]
                    int count, int E, int split,
                    float* __restrict__ out_a,           // [split]
                    float* __restrict__ out_b)           // [E - split]
{
  static_assert(Warps >= 1 && 32 * Warps <= 1024, "one to 32 warps per block");
  static_assert(V == 1 || V == 4, "a column or 4 a lane");
  wait_for_prior_grids();  // (launched dependent by some callers: launch.cuh)
  __shared__ __align__(16) float part_s[Warps][32 * V];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int e = V * (blockIdx.x * 32 + lane);
  float acc[V] = {};
  if (e < E) {
#pragma unroll 8
    for (int r = warp; r < count; r += Warps) {
      float v[V];
      load_floats(partials + std::size_t(r) * E + e, v);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] += v[j];
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) part_s[warp][V * lane + j] = acc[j];
  __syncthreads();
  if (warp == 0 && e < E) {
    float total[V];
    load_floats(&part_s[0][V * lane], total);
#pragma unroll
    for (int w = 1; w < Warps; ++w) {
      float v[V];
      load_floats(&part_s[w][V * lane], v);
#pragma unroll
      for (int j = 0; j < V; ++j) total[j] += v[j];
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (e + j < split) out_a[Map::at(e + j)] = total[j];
      else out_b[e + j - split] = total[j];
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// The second stage inside the kernel that wrote the partials (no second launch), still in a fixed
// order. The `splits` blocks that share one tile of a result each write their partial sums of the
// tile's columns to row `split` of `partials` ([splits][E]) and then call finish_splits. Rows are
// summed in groups of `group` consecutive rows (group_for(splits)): the last block of a group to
// arrive (an integer ticket, an atomic add on a counter: the only atomics, and on integers) adds its
// group's rows in increasing order, into row g of `group_sums` ([groups][E]) or, with one group,
// straight into the result; with several groups, the last group to finish adds their rows in
// increasing order. Which block arrives last changes nothing: every sum has a fixed order.
//
// tickets: 1 + groups counters of this tile (group_tickets(splits)), zero before the launch; the
// blocks that use a counter last put it back to zero, so a captured graph can replay the kernel.
// The tile has `count` columns; col_of(e) is the e-th one's index in a row of E (or −1: none);
// out(col, value) stores a finished sum. Every thread of the block calls finish_splits.
inline constexpr int group_for(int splits) {
  if (splits <= 16) return splits > 0 ? splits : 1;
  int g = 1;
  while (g * g < splits) ++g;
  return g;
}
inline constexpr int group_tickets(int splits) { return 1 + ceil_div(splits, group_for(splits)); }

// For each of the block's columns, rows[r0..r1) of `rows` ([·][E]) summed in increasing order, then
// put(col, sum). A thread takes CPT columns at a time and loads RPT rows of them before adding any:
// CPT·RPT loads in flight, so that a group's rows cost a few round trips to L2, not one per row.
template <class ColOf, class Put>
__device__ __forceinline__ void sum_rows(const float* rows, int E, int r0, int r1, int count, const ColOf& col_of,
                                         const Put& put) {
  constexpr int CPT = 8, RPT = 4;
  for (int e0 = threadIdx.x; e0 < count; e0 += CPT * int(blockDim.x)) {
    int col[CPT];
    float s[CPT];
#pragma unroll
    for (int j = 0; j < CPT; ++j) {
      const int e = e0 + j * int(blockDim.x);
      col[j] = e < count ? col_of(e) : -1;
      s[j] = 0.f;
    }
    for (int r = r0; r < r1; r += RPT) {
      float v[RPT][CPT];
#pragma unroll
      for (int i = 0; i < RPT; ++i)
#pragma unroll
        for (int j = 0; j < CPT; ++j)
          v[i][j] = r + i < r1 && col[j] >= 0 ? __ldcg(rows + std::size_t(r + i) * E + col[j]) : 0.f;
#pragma unroll
      for (int i = 0; i < RPT; ++i)
#pragma unroll
        for (int j = 0; j < CPT; ++j)
          if (r + i < r1) s[j] += v[i][j];
    }
#pragma unroll
    for (int j = 0; j < CPT; ++j)
      if (col[j] >= 0) put(col[j], s[j]);
  }
}

// Thread 0 takes a ticket: the counter's old value. Release: the block's stores before the
// __syncthreads that precedes it are visible to whoever acquires the counter after it; acquire: what
// the earlier ticket holders released is visible to this block after the __syncthreads that follows.
// (Cheaper than __threadfence, a sequentially consistent fence.)
__device__ __forceinline__ unsigned take_ticket(unsigned* counter) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
  return old;
}

template <class ColOf, class Out>
__device__ void finish_splits(const float* partials, float* group_sums, unsigned* tickets, int E, int split,
                              int splits, int count, const ColOf& col_of, const Out& out) {
  __shared__ int last_s;
  const int group = group_for(splits), groups = ceil_div(splits, group);
  const int g = split / group, r0 = g * group, r1 = min_of(r0 + group, splits);
  __syncthreads();  // this block's partial row written
  if (threadIdx.x == 0) {
    const bool last = take_ticket(tickets + 1 + g) == unsigned(r1 - r0 - 1);
    if (last) tickets[1 + g] = 0u;  // every block of the group has taken its ticket
    last_s = last;
  }
  __syncthreads();
  if (!last_s) return;  // uniform over the block
  sum_rows(partials, E, r0, r1, count, col_of, [&](int col, float s) {
    if (groups == 1) out(col, s);
    else group_sums[std::size_t(g) * E + col] = s;
  });
  if (groups == 1) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    const bool last = take_ticket(tickets) == unsigned(groups - 1);
    if (last) tickets[0] = 0u;
    last_s = last;
  }
  __syncthreads();
  if (!last_s) return;
  sum_rows(group_sums, E, 0, groups, count, col_of, out);
}

// The warps of kernel_sum_partials for `count` rows (which fixes the order of additions): few rows,
// one warp per block, each lane a short chain; many rows, up to 32 warps share a column.
inline constexpr int sum_partials_warps(int count) { return count <= 8 ? 1 : count <= 64 ? 8 : 32; }

// V = 4 needs E % 4 == 0 and partials 16-byte aligned.
template <int V, class Map = SameColumn>
void launch_sum_partials(cudaStream_t stream, const float* partials, int count, int E, int split, float* out_a,
                         float* out_b, Launch how = Launch::plain) {
  if (V == 4 && (E % 4 != 0 || reinterpret_cast<std::uintptr_t>(partials) % 16 != 0))
    throw std::invalid_argument("ctnn: sum_partials 4 columns a lane: " + std::to_string(E) +
                                " columns (a multiple of 4 needed) or partials not 16-byte aligned");
  const unsigned grid = grid_for(std::size_t(ceil_div(E, V)), 32);
  auto launch = [&](auto kernel, int warps) {
    launch_kernel(kernel, grid, 32 * warps, 0, stream, 1, how, partials, count, E, split, out_a, out_b);
  };
  switch (sum_partials_warps(count)) {
    case 1: return launch(kernel_sum_partials<1, V, Map>, 1);
    case 8: return launch(kernel_sum_partials<8, V, Map>, 8);
    default: return launch(kernel_sum_partials<32, V, Map>, 32);
  }
}

// 4 columns a lane from sum_partials4_min_columns on (where E % 4 == 0 and partials is 16-byte
// aligned): a quarter of the loads and of the blocks. After a weight-gradient kernel (launched
// dependent) the pair was 1-7% faster at batch 64 (2026-11-27, H200: 64->128 s2 @16 FP32 23.6 -> 22.7
// µs, TF32 17.6 -> 16.3), while 3->32's 896 columns, 7 warps' worth that way, lost 4.5%.
inline constexpr int sum_partials4_min_columns = 8192;  // 64 blocks of 128 columns
template <class Map = SameColumn>
void sum_partials(cudaStream_t stream, const float* partials, int count, int E, int split, float* out_a,
                  float* out_b, Launch how = Launch::plain) {
  if (E >= sum_partials4_min_columns && E % 4 == 0 && reinterpret_cast<std::uintptr_t>(partials) % 16 == 0)
    launch_sum_partials<4, Map>(stream, partials, count, E, split, out_a, out_b, how);
  else
    launch_sum_partials<1, Map>(stream, partials, count, E, split, out_a, out_b, how);
}

}  // namespace ctnn::kernels
