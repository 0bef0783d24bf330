#pragma once
// One kernel for a whole network's forward in evaluation mode, at small batches: block n takes sample
// n through every layer, its activations in shared memory (two buffers; element-wise layers work in
// place). At batch 1 the layers' own kernels are bound by latency, a launch and a drain each with most
// of their blocks idle; one launch does the same arithmetic without the round trips. CudaNetwork::
// forward_fused picks it (network/cuda_network.hpp maps each layer to a step below: sample_op_of).
// A launch of no more blocks than the GPU has multiprocessors (each block has one to itself) stages the
// convolutions' and Dense layers' weights and biases in shared memory first (bulk copies, which land
// while the steps before them run: SamplePlan::staging); other launches read them through the cache.
//
// Steps (Op), each one sample's forward of a layer by all NT threads of the block, from x to y (both
// in shared memory; y == x for an in-place step; a third region, the scratch, for the step's own use):
//   SampleConv     Conv, with the activation and the pooling after it taken in: a thread per few
//                  channels × a few outputs of a row over a share of the input channels, registers
//                  reused across the kernel's columns; a padded input copied with a zero border into
//                  the scratch; split sums, activation and pooling in a pass over the scratch, or
//                  a non-overlapping pooling in registers
//   SamplePool     max or average pooling (average over K·K, padding counted, as the host)
//   SampleMap      an element-wise activation (relu_fn, ...), in place
//   SampleDense    Dense, with the activation after it taken in: a warp per 4 units, lanes over the
//                  inputs (coalesced rows), butterfly sums; with fewer units than warps, the warps of
//                  4 units split the inputs
//   SampleSoftmax  Softmax: one warp (softmax.cuh's softmax_row)
//   SampleNorm     BatchNorm in evaluation (running statistics), in place, in double as its kernel
//   SampleMean     GlobalAvgPool: a warp per channel
//   SampleAbsorbed a layer with nothing to run, and no barrier: one the step before took in, or
//                  Dropout in evaluation
// A layer without a step (a Residual block, say) sends the network down the layer-by-layer path.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "../core/cuda_check.hpp"
#include "../core/layer.hpp"
#include "../layers/batchnorm.hpp"
#include "../layers/pool.hpp"
#include "bulk_copy.cuh"
#include "launch.cuh"
#include "reduce.cuh"
#include "softmax.cuh"

// The largest batch that runs the network kernel (measured on LeNet-5, H100: docs/fusion.md).
#ifndef CTNN_NETWORK_KERNEL_MAX_BATCH
#define CTNN_NETWORK_KERNEL_MAX_BATCH 256
#endif
// Whether small launches stage the weights and biases in shared memory (cuda_network_kernel::stages; 0
// turns it off, for measuring).
#ifndef CTNN_NETWORK_KERNEL_STAGING
#define CTNN_NETWORK_KERNEL_STAGING 1
#endif
// Threads of a network kernel's block.
#ifndef CTNN_NETWORK_KERNEL_THREADS
#define CTNN_NETWORK_KERNEL_THREADS 512
#endif

namespace ctnn::kernels {

// The largest divisor of n that is at most m.
constexpr int divisor_at_most(int n, int m) {
  for (int d = m; d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

// The most floats of a SampleConv step's partial sums (its scratch): LeNet-5's conv1 output, 4,704.
inline constexpr std::size_t network_step_partial_floats = 5120;

// A pooling that a SampleConv step takes in (its window; PoolKind::max or ::avg; void: none).
template <PoolKind Kind_, int K_, int Stride_, int Pad_>
struct PoolWindow {
  static constexpr PoolKind kind = Kind_;
  static constexpr int K = K_, stride = Stride_, pad = Pad_;
};

// The pooling of (oy, ox)'s window in plane c of an H × W input whose values value(c, iy, ix) gives:
// max pooling skips padded positions, average pooling counts them (divides by K·K), as the host does.
template <PoolKind Kind, int H, int W, int K, int Stride, int Pad, class Value>
__device__ __forceinline__ float pool_window(int c, int oy, int ox, Value&& value) {
  float acc = Kind == PoolKind::max ? -INFINITY : 0.f;
#pragma unroll
  for (int ky = 0; ky < K; ++ky) {
    const int iy = oy * Stride - Pad + ky;
    if (iy < 0 || iy >= H) continue;
#pragma unroll
    for (int kx = 0; kx < K; ++kx) {
      const int ix = ox * Stride - Pad + kx;
      if (ix < 0 || ix >= W) continue;
      const float v = value(c, iy, ix);
      acc = Kind == PoolKind::max ? fmaxf(acc, v) : acc + v;
    }
  }
  return Kind == PoolKind::max ? acc : acc / float(K * K);
}

// A convolution, with the activation Fn that follows it and the pooling after that (Pool, or void)
// taken in: one step where there were three, two barriers and two passes over the activations fewer.
// A thread computes RC output channels × RX neighbouring outputs of a row over a CS-th of the input
// channels: per input channel and kernel row it loads the row's SPAN inputs into registers once and each
// weight once (the same address across the warp: a broadcast), then RC·RX·K FMAs. A padded input is
// first copied into `scratch` with a zero border, so that no tap needs a bounds check. At one sample a
// thread's chain of dependent loads and FMAs, not the arithmetic, is the step's time, so RC and CS are
// those that give the shortest chain for the block's threads (tiling(); LeNet-5's conv2: 2 channels,
// input channels split 3 ways, 480 threads with 690 instructions each, where 1 channel unsplit gave 320
// threads 1,170). With CS > 1 or a pooling the sums go to the scratch first (split s at s·conv_out, the
// first from the bias), and after a barrier one pass adds the splits in order, applies Fn and pools.
template <int C, int H, int W, int Out, int K, int Stride, int Pad, int Dilation, class Fn = identity_fn,
          class Pool = void>
struct SampleConv {
  static constexpr int OH = ctnn::detail::window_out(H, K, Stride, Pad, Dilation);
  static constexpr int OW = ctnn::detail::window_out(W, K, Stride, Pad, Dilation);
  static constexpr int HP = H + 2 * Pad, WP = W + 2 * Pad;
  // Row stride of the input the taps read: a padded copy's rows an odd number of floats apart, so that
  // the threads of a warp, on neighbouring rows, read distinct banks (LeNet-5's conv1: 32 floats apart,
  // 8 threads a bank, made the step 3.1x slower).
  static constexpr int RS = Pad > 0 && WP % 2 == 0 ? WP + 1 : WP;
  static constexpr bool pools = !std::is_void_v<Pool>;
  static constexpr int POH = [] {
    if constexpr (pools) return ctnn::detail::window_out(OH, Pool::K, Pool::stride, Pool::pad, 1);
    else return OH;
  }();
  static constexpr int POW = [] {
    if constexpr (pools) return ctnn::detail::window_out(OW, Pool::K, Pool::stride, Pool::pad, 1);
    else return OW;
  }();
  static constexpr std::size_t in_size = std::size_t(C) * H * W, conv_out = std::size_t(Out) * OH * OW;
  static constexpr std::size_t out_size = std::size_t(Out) * POH * POW;
  static constexpr std::size_t pad_floats = Pad > 0 ? (std::size_t(C) * HP * RS + 3) / 4 * 4 : 0;
  static constexpr bool in_place = false;
  static constexpr int RX = divisor_at_most(OW, 8);
  static constexpr int SPAN = (RX - 1) * Stride + (K - 1) * Dilation + 1;
  // Pooling in registers: a non-overlapping pooling (stride = window, no padding) after a stride-1
  // convolution, its window dividing the output: a thread computes PK rows × RXP columns (RXP, the
  // widest of up to 8 that PK and OW allow) of RC channels and stores their pooled values, with no pass
  // over the scratch (LeNet-5's conv1: its 4,704 sums stayed out of shared memory).
  static constexpr int PK = [] {
    if constexpr (pools) return Pool::K;
    else return 1;
  }();
  static constexpr int RXP = [] {
    for (int r = 8; r >= PK; --r)
      if (OW % r == 0 && r % PK == 0) return r;
    return 0;
  }();
  static constexpr bool regpool_shape = [] {
    if constexpr (pools) return Stride == 1 && Dilation == 1 && Pool::stride == PK && Pool::pad == 0 && OH % PK == 0 && RXP > 0;
    else return false;
  }();
  static constexpr int RROWS = PK + K - 1, RSPAN = RXP + K - 1;  // a regpool thread's input rows and their span
  struct Tiling {
    int rc, cs;
    bool regpool;
  };
  // The candidate with the shortest chain of loads and FMAs a thread issues (their count: the time at one
  // sample, where at most 4 warps a scheduler wait on shared-memory loads), the pass over the scratch
  // counted as a barrier (50) and its loads.
  template <int NT>
  static constexpr Tiling tiling() {
    Tiling best{1, 1, false};
    long long best_cost = -1;
    auto consider = [&](Tiling t, long long items, long long chain) {
      const long long passes = (items * t.cs + NT - 1) / NT;
      const bool pass = !t.regpool && (pools || t.cs > 1);
      const long long cost = passes * chain + (pass ? 50 + ((long long)conv_out * t.cs + NT - 1) / NT +
                                                          ((long long)out_size + NT - 1) / NT * (t.cs * PK * PK + 4)
                                                    : 0);
      if (best_cost < 0 || cost < best_cost) best = t, best_cost = cost;
    };
    for (int rc : {1, 2, 4}) {
      if (Out % rc != 0) continue;
      for (int cs = 1; cs <= C; ++cs)
        if (C % cs == 0 && (cs == 1 || std::size_t(cs) * conv_out <= network_step_partial_floats))
          consider({rc, cs, false}, (long long)(Out / rc) * OH * (OW / RX),
                   (long long)(C / cs) * K * (SPAN + K * rc * (1 + RX)));
      if (regpool_shape && RROWS * RSPAN + rc * PK * RXP <= 80)  // its inputs and sums in registers, no spills
        consider({rc, 1, true}, (long long)(Out / rc) * (OH / PK) * (OW / max_of(RXP, 1)),
                 (long long)C * (RROWS * RSPAN + K * K * (rc + rc * PK * RXP)));
    }
    return best;
  }
  template <int NT>
  static constexpr bool via_scratch = !tiling<NT>().regpool && (pools || tiling<NT>().cs > 1);
  template <int NT>
  static constexpr std::size_t partial_floats = via_scratch<NT> ? std::size_t(tiling<NT>().cs) * conv_out : 0;
  static_assert(!pools || conv_out <= network_step_partial_floats, "a pooling is taken in only where the sums fit");
  // The scratch of the block sizes launches take (the network kernel's, the tail kernel's 256).
  static constexpr std::size_t scratch_floats =
      pad_floats + max_of(max_of(partial_floats<CTNN_NETWORK_KERNEL_THREADS>, partial_floats<256>), partial_floats<128>);
  // Staging (SamplePlan): all the weights or none.
  static constexpr int stage_rows = Out, stage_first_multiple = Out;
  static constexpr std::size_t stage_row_floats = std::size_t(C) * K * K;

  // The tiling's regpool: item (RC channels from o0, pooled row py, RXP columns from ox0).
  template <int NT, int RC, int First>
  __device__ static void run_pooling_in_registers(const float* __restrict__ w, const float* __restrict__ b,
                                                  const float* __restrict__ in, float* __restrict__ y,
                                                  const float* __restrict__ w_staged) {
    if constexpr (regpool_shape) {
      constexpr int segments = OW / RXP, rows = OH / PK, items = (Out / RC) * rows * segments;
      for (int e = threadIdx.x; e < items; e += NT) {
        const int o0 = e / (rows * segments) * RC, py = e % (rows * segments) / segments, ox0 = e % segments * RXP;
        float acc[RC][PK][RXP];
#pragma unroll
        for (int j = 0; j < RC; ++j) {
          const float bias = First == 0 ? b[o0 + j] : __ldg(b + o0 + j);
#pragma unroll
          for (int dy = 0; dy < PK; ++dy)
#pragma unroll
            for (int r = 0; r < RXP; ++r) acc[j][dy][r] = bias;
        }
        for (int c = 0; c < C; ++c) {
          float v[RROWS][RSPAN];  // the input rows of the PK output rows, loaded once
#pragma unroll
          for (int r = 0; r < RROWS; ++r)
#pragma unroll
            for (int q = 0; q < RSPAN; ++q) v[r][q] = in[(c * HP + py * PK + r) * RS + ox0 + q];
#pragma unroll
          for (int ky = 0; ky < K; ++ky)
#pragma unroll
            for (int kx = 0; kx < K; ++kx)
#pragma unroll
              for (int j = 0; j < RC; ++j) {
                const std::size_t at = ((std::size_t(o0 + j) * C + c) * K + ky) * K + kx;
                const float wv = First == 0 ? w_staged[at] : __ldg(w + at);
#pragma unroll
                for (int dy = 0; dy < PK; ++dy)
#pragma unroll
                  for (int r = 0; r < RXP; ++r) acc[j][dy][r] = fmaf(wv, v[dy + ky][r + kx], acc[j][dy][r]);
              }
        }
#pragma unroll
        for (int j = 0; j < RC; ++j)
#pragma unroll
          for (int q = 0; q < RXP / PK; ++q) {  // as pool_window: rows, then columns
            float m = Pool::kind == PoolKind::max ? -INFINITY : 0.f;
#pragma unroll
            for (int dy = 0; dy < PK; ++dy)
#pragma unroll
              for (int dx = 0; dx < PK; ++dx) {
                const float v = Fn::apply(acc[j][dy][q * PK + dx]);
                m = Pool::kind == PoolKind::max ? fmaxf(m, v) : m + v;
              }
            y[((o0 + j) * POH + py) * POW + ox0 / PK + q] = Pool::kind == PoolKind::max ? m : m / float(PK * PK);
          }
      }
    }
  }

  // First = 0: the weights are read from their staged copy w_staged in shared memory, and b points to
  // the staged bias there; else both are read from global memory.
  template <int NT, int First = Out>
  __device__ static void run(const float* __restrict__ w, const float* __restrict__ b, const float*,
                             const float* __restrict__ x, float* __restrict__ y, float* __restrict__ scratch,
                             const float* __restrict__ w_staged = nullptr) {
    static_assert(First == 0 || First == Out, "all the weights or none");
    const float* in = x;
    if constexpr (Pad > 0) {
      for (int i = threadIdx.x; i < C * HP * RS; i += NT) {
        const int c = i / (HP * RS), iy = i % (HP * RS) / RS - Pad, ix = i % RS - Pad;
        scratch[i] = iy >= 0 && iy < H && ix >= 0 && ix < W ? x[(c * H + iy) * W + ix] : 0.f;
      }
      __syncthreads();
      in = scratch;
    }
    constexpr Tiling T = tiling<NT>();
    if constexpr (T.regpool) {
      run_pooling_in_registers<NT, T.rc, First>(w, b, in, y, w_staged);
      return;
    }
    constexpr int RC = T.rc, CS = T.cs, CPS = C / CS, segments = OW / RX, items = (Out / RC) * OH * segments;
    static_assert(pad_floats + partial_floats<NT> <= scratch_floats, "the sums fit the scratch");
    float* part = scratch + pad_floats;  // [CS][Out][OH][OW] via the scratch
    for (int e = threadIdx.x; e < items * CS; e += NT) {
      const int split = e / items, item = e % items;
      const int o0 = item / (OH * segments) * RC, oy = item % (OH * segments) / segments, ox0 = item % segments * RX;
      float acc[RC][RX];
#pragma unroll
      for (int j = 0; j < RC; ++j) {
        const float bias = split > 0 ? 0.f : First == 0 ? b[o0 + j] : __ldg(b + o0 + j);
#pragma unroll
        for (int r = 0; r < RX; ++r) acc[j][r] = bias;
      }
      for (int c = split * CPS; c < (split + 1) * CPS; ++c) {
#pragma unroll
        for (int ky = 0; ky < K; ++ky) {
          const float* row = in + (c * HP + oy * Stride + ky * Dilation) * RS + ox0 * Stride;
          float v[SPAN];
#pragma unroll
          for (int q = 0; q < SPAN; ++q) v[q] = row[q];
#pragma unroll
          for (int kx = 0; kx < K; ++kx) {
#pragma unroll
            for (int j = 0; j < RC; ++j) {
              const std::size_t at = ((std::size_t(o0 + j) * C + c) * K + ky) * K + kx;
              const float wv = First == 0 ? w_staged[at] : __ldg(w + at);
#pragma unroll
              for (int r = 0; r < RX; ++r) acc[j][r] = fmaf(wv, v[r * Stride + kx * Dilation], acc[j][r]);
            }
          }
        }
      }
      float* dst = via_scratch<NT> ? part + std::size_t(split) * conv_out : y;
#pragma unroll
      for (int j = 0; j < RC; ++j)
#pragma unroll
        for (int r = 0; r < RX; ++r) {
          const float v = acc[j][r];
          dst[((o0 + j) * OH + oy) * OW + ox0 + r] = via_scratch<NT> ? v : Fn::apply(v);
        }
    }
    if constexpr (via_scratch<NT>) {
      __syncthreads();  // every split's sums are in the scratch
      auto value = [&](int c, int iy, int ix) {
        const int i = (c * OH + iy) * OW + ix;
        float sum = part[i];
#pragma unroll
        for (int sp = 1; sp < CS; ++sp) sum += part[sp * conv_out + i];
        return Fn::apply(sum);
      };
      for (int e = threadIdx.x; e < int(out_size); e += NT) {
        const int c = e / (POH * POW), oy = e % (POH * POW) / POW, ox = e % POW;
        if constexpr (pools) y[e] = pool_window<Pool::kind, OH, OW, Pool::K, Pool::stride, Pool::pad>(c, oy, ox, value);
        else y[e] = value(c, oy, ox);
      }
    }
  }
};

template <PoolKind Kind, int C, int H, int W, int K, int Stride, int Pad>
struct SamplePool {
  static constexpr int OH = ctnn::detail::window_out(H, K, Stride, Pad, 1), OW = ctnn::detail::window_out(W, K, Stride, Pad, 1);
  static constexpr std::size_t in_size = std::size_t(C) * H * W, out_size = std::size_t(C) * OH * OW;
  static constexpr bool in_place = false;
  template <int NT>
  __device__ static void run(const float*, const float*, const float*, const float* __restrict__ x,
                             float* __restrict__ y, float*) {
    constexpr int plane = OH * OW;
    for (int e = threadIdx.x; e < C * plane; e += NT)
      y[e] = pool_window<Kind, H, W, K, Stride, Pad>(e / plane, e % plane / OW, e % OW,
                                                     [&](int c, int iy, int ix) { return x[(c * H + iy) * W + ix]; });
  }
};

template <class Fn, std::size_t N>
struct SampleMap {
  static constexpr std::size_t in_size = N, out_size = N;
  static constexpr bool in_place = true;
  template <int NT>
  __device__ static void run(const float*, const float*, const float*, const float*, float* y, float*) {
    for (int i = threadIdx.x; i < int(N); i += NT) y[i] = Fn::apply(y[i]);
  }
};

// The ways SampleDense splits a unit group's inputs: the warps each group gets, at most one per load round.
constexpr int dense_input_splits(int warps, int unit_groups, int rounds) {
  return warps > unit_groups ? (warps / unit_groups < rounds ? warps / unit_groups : rounds) : 1;
}

// A warp computes G units at once: every lane loads its share of G weight rows (16-byte loads where
// the rows allow: I a multiple of 4, rows starting 16-byte aligned as the arena plan places them)
// before the first FMA, so that a warp has G·I/32 loads in flight, not a few. At batch 1 the weights
// come from L2 and the latency of those loads, not arithmetic, is the layer's time; so a launch at
// small batches stages the rows from `First` on (whole unit groups) in shared memory
// (kernel_network_forward), and the warps of those units read them there. The rows before First, read
// from L2, are the first unit groups, which the warps take first.
template <int I, int N, class Fn = identity_fn>
struct SampleDense {
  static constexpr std::size_t in_size = std::size_t(I), out_size = std::size_t(N);
  static constexpr bool in_place = false;
  static constexpr int V = I % 4 == 0 ? 4 : 1;       // floats per load
  static constexpr int G = 4;                         // units per warp at a time
  static constexpr int rounds = (I + 32 * V - 1) / (32 * V);  // loads per lane and unit
  static constexpr int R = rounds < 4 ? rounds : 4;            // of them in flight at once
  // With fewer unit groups than warps, the warps of a group split its inputs (S ways) and add their
  // partial sums through the scratch, in split order: a Dense<10> on 2,048 inputs keeps 15 warps busy
  // instead of 3.
  static constexpr int UG = (N + G - 1) / G;  // unit groups
  static constexpr int max_splits = dense_input_splits(CTNN_NETWORK_KERNEL_THREADS / 32, UG, rounds);
  static constexpr std::size_t scratch_floats = max_splits > 1 ? std::size_t(max_splits) * std::size_t(UG * G) : 0;
  // Staging (SamplePlan): the weight rows, floats a row, and what a partial staging's first row is a
  // multiple of (whole unit groups).
  static constexpr int stage_rows = N, stage_first_multiple = G;
  static constexpr std::size_t stage_row_floats = std::size_t(I);

  // w: the weights in global memory; w_staged: rows First .. N - 1 of them in shared memory. b: the bias,
  // in shared memory (staged) where First < N.
  template <int NT, int First = N>
  __device__ static void run(const float* __restrict__ w, const float* __restrict__ b, const float*,
                             const float* __restrict__ x, float* __restrict__ y, float* __restrict__ scratch,
                             const float* __restrict__ w_staged = nullptr) {
    static_assert(First % G == 0 || First == N, "staged rows are whole unit groups");
    constexpr int S = dense_input_splits(NT / 32, UG, rounds), per = (rounds + S - 1) / S;
    static_assert(S == 1 || std::size_t(S * UG * G) <= scratch_floats, "the partial sums fit the scratch");
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    // Warp `warp`: unit groups from warp / S (stride NT/32/S), inputs of split warp % S.
    const int split = S == 1 ? 0 : warp % S, k_first = split * per, k_end = min(k_first + per, rounds);
    const bool active = S == 1 || warp < S * UG;
    // The bias of the units a lane stores, loaded before the products (its latency then hides).
    auto bias_of = [&](int o) { return o >= N ? 0.f : First < N ? b[o] : __ldg(b + o); };
    // The G sums of units o0 .. o0 + G - 1 over this warp's inputs, the weights read from `from`
    // (shared memory when Shared).
    auto products = [&](auto shared, const float* from, int o0, float (&acc)[G]) {
      constexpr bool Shared = decltype(shared)::value;
      for (int k0 = k_first; k0 < k_end; k0 += R) {
        float wv[R][G][V];  // all of this chunk's loads first, then the FMAs
#pragma unroll
        for (int k = 0; k < R; ++k) {
          const int i = ((k0 + k) * 32 + lane) * V;
#pragma unroll
          for (int g = 0; g < G; ++g) {
            const float* row = from + std::size_t(o0 + g < N ? o0 + g : o0) * I + (i < I ? i : 0);
            if constexpr (V == 4) {
              const float4 q = Shared ? *reinterpret_cast<const float4*>(row) : __ldg(reinterpret_cast<const float4*>(row));
              wv[k][g][0] = q.x, wv[k][g][1] = q.y, wv[k][g][2] = q.z, wv[k][g][3] = q.w;
            } else {
              wv[k][g][0] = Shared ? *row : __ldg(row);
            }
          }
        }
#pragma unroll
        for (int k = 0; k < R; ++k) {
          const int i = ((k0 + k) * 32 + lane) * V;
          if (i >= I || k0 + k >= k_end) continue;
          float xv[V];  // one 16-byte load where V = 4 (four 4-byte ones, 16 bytes apart, took 4 bank cycles each)
          if constexpr (V == 4) {
            const float4 q = *reinterpret_cast<const float4*>(x + i);
            xv[0] = q.x, xv[1] = q.y, xv[2] = q.z, xv[3] = q.w;
          } else {
            xv[0] = x[i];
          }
#pragma unroll
          for (int v = 0; v < V; ++v)
#pragma unroll
            for (int g = 0; g < G; ++g) acc[g] = fmaf(wv[k][g][v], xv[v], acc[g]);
        }
      }
    };
    for (int o0 = warp / S * G; active && o0 < N; o0 += NT / 32 / S * G) {  // uniform per warp: full warps shuffle
      float bias[G];
#pragma unroll
      for (int g = 0; g < G; ++g) bias[g] = S == 1 && lane == 0 ? bias_of(o0 + g) : 0.f;
      float acc[G] = {};
      if (o0 >= First) products(std::true_type{}, w_staged - std::size_t(First) * I, o0, acc);
      else products(std::false_type{}, w, o0, acc);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float sum = warp_sum(acc[g]);
        if (lane == 0 && o0 + g < N) {
          if constexpr (S == 1) y[o0 + g] = Fn::apply(sum + bias[g]);
          else scratch[split * (UG * G) + o0 + g] = sum;
        }
      }
    }
    if constexpr (S > 1) {
      const float bias = threadIdx.x < N ? bias_of(int(threadIdx.x)) : 0.f;
      __syncthreads();  // every split's partial sums are in the scratch
      for (int o = threadIdx.x; o < N; o += NT) {
        float sum = scratch[o];
        for (int sp = 1; sp < S; ++sp) sum += scratch[sp * (UG * G) + o];
        y[o] = Fn::apply(sum + (o == int(threadIdx.x) ? bias : bias_of(o)));
      }
    }
  }
};

template <int N>
struct SampleSoftmax {
  static constexpr std::size_t in_size = std::size_t(N), out_size = std::size_t(N);
  static constexpr bool in_place = false;
  template <int NT>
  __device__ static void run(const float*, const float*, const float*, const float* x, float* y, float*) {
    if (threadIdx.x < 32) softmax_row<N>(x, y, int(threadIdx.x));
  }
};

// BatchNorm in evaluation: C channels of S values; state = running mean [C], running variance [C].
template <int C, int S>
struct SampleNorm {
  static constexpr std::size_t in_size = std::size_t(C) * S, out_size = in_size;
  static constexpr bool in_place = true;
  template <int NT>
  __device__ static void run(const float* w, const float* b, const float* state, const float*, float* y, float*) {
    for (int i = threadIdx.x; i < C * S; i += NT) {
      const int c = i / S;
      const double inv = 1.0 / sqrt(double(state[C + c]) + BatchNorm::eps);
      y[i] = float((double(y[i]) - double(state[c])) * inv * double(w[c]) + double(b[c]));
    }
  }
};

template <int C, int S>
struct SampleMean {
  static constexpr std::size_t in_size = std::size_t(C) * S, out_size = std::size_t(C);
  static constexpr bool in_place = false;
  template <int NT>
  __device__ static void run(const float*, const float*, const float*, const float* __restrict__ x,
                             float* __restrict__ y, float*) {
    const int lane = threadIdx.x % 32;
    for (int c = threadIdx.x / 32; c < C; c += NT / 32) {
      float s = 0.f;
      for (int k = lane; k < S; k += 32) s += x[c * S + k];
      s = warp_sum(s);
      if (lane == 0) y[c] = s / float(S);
    }
  }
};

// A layer with nothing to run, and no barrier: one that the step before it took in (an activation after
// a Conv or Dense step, a pooling after a Conv step), or Dropout in evaluation. N: the size of the
// activation it leaves in place.
template <std::size_t N>
struct SampleAbsorbed {
  static constexpr std::size_t in_size = N, out_size = N;
  static constexpr bool in_place = true, absorbed = true;
};

// A layer's step and where its parameters and state start (float offsets into the parameter and state
// arrays; unused where the layer has none).
template <class Op, std::size_t WeightAt, std::size_t BiasAt, std::size_t StateAt>
struct SampleStep {
  using op = Op;
  static constexpr std::size_t weight_at = WeightAt, bias_at = BiasAt, state_at = StateAt;
};

template <class Op>
constexpr bool is_absorbed() {
  return requires { Op::absorbed; };
}
template <class Op>
constexpr std::size_t scratch_of() {
  if constexpr (requires { Op::scratch_floats; }) return Op::scratch_floats;
  else return 0;
}
// A step that can stage its weights (SampleConv, SampleDense): stage_rows rows of stage_row_floats
// floats, staged from a first row that is a multiple of stage_first_multiple (0: all of them).
template <class Op>
constexpr bool stages_rows() {
  return requires { Op::stage_rows; };
}
// The floats that rows first .. stage_rows - 1 of Op's weights take, then its bias (stage_rows floats),
// each in whole 16-byte chunks: the sources start 16-byte aligned (first·stage_row_floats being a
// multiple of 4), and the roundings read nothing foreign (the arena's next region starts 64 floats on).
template <class Op>
constexpr std::size_t staged_weight_floats(int first) {
  if constexpr (stages_rows<Op>()) return (std::size_t(Op::stage_rows - first) * Op::stage_row_floats + 3) / 4 * 4;
  else return 0;
}
template <class Op>
constexpr std::size_t staged_bias_floats() {
  if constexpr (stages_rows<Op>()) return (std::size_t(Op::stage_rows) + 3) / 4 * 4;
  else return 0;
}
template <class Op>
constexpr std::size_t staged_floats(int first) {
  return staged_weight_floats<Op>(first) + staged_bias_floats<Op>();
}

// The steps' shared-memory plan: buffer_of[i] holds slot i (0: the input, i: step i-1's output).
// Layout (floats): the two buffers, the scratch, then, in a launch that stages weights, each staged
// step's weights (staged_at) and a barrier (8 bytes) per staged step.
template <class... Steps>
struct SamplePlan {
  static constexpr std::size_t count = sizeof...(Steps);
  static constexpr std::size_t in_size = std::get<0>(std::make_tuple(Steps::op::in_size...));
  static constexpr std::size_t out_size = std::get<count - 1>(std::make_tuple(Steps::op::out_size...));
  // Floats of each of the two buffers (a multiple of 4: 16-byte aligned second buffer).
  static constexpr std::size_t buffer_floats =
      (std::max({in_size, Steps::op::out_size...}) + 3) / 4 * 4;
  // Floats of the scratch after them (a padded convolution's input, partial sums), a multiple of 4.
  static constexpr std::size_t scratch_floats =
      (std::max({std::size_t{0}, scratch_of<typename Steps::op>()...}) + 3) / 4 * 4;
  static constexpr std::size_t smem_bytes = (2 * buffer_floats + scratch_floats) * sizeof(float);
  static constexpr std::array<int, count + 1> buffer_of = [] {
    std::array<int, count + 1> b{};
    const bool in_place[] = {Steps::op::in_place...};
    for (std::size_t i = 0; i < count; ++i) b[i + 1] = in_place[i] ? b[i] : 1 - b[i];
    return b;
  }();
  // Staged weights, for a launch that stages (227 KB of shared memory a block, sm_90). First the steps
  // whose weights are smallest, whole, while they fit; then, in step order, as many of a step's last
  // rows as fit what is left (LeNet-5: both convolutions, Dense 120->84 and 84->10 whole, the last 88
  // of Dense 400->120's 120 rows). Step i stages rows first[i] .. (first[i] == stage_rows: none), at
  // at[i] floats past the scratch; its barrier is the barrier[i]-th after all of them.
  static constexpr std::size_t staging_budget = 227 * 1024;
  struct Staging {
    std::array<int, count> first{};
    std::array<std::size_t, count> at{};
    std::array<int, count> barrier{};
    std::size_t floats = 0;
    int barriers = 0;
    constexpr bool staged(std::size_t i) const { return at[i] != ~std::size_t{0}; }
  };
  static constexpr Staging staging = [] {
    const bool can[] = {stages_rows<typename Steps::op>()...};
    const int rows[] = {[] {
      if constexpr (stages_rows<typename Steps::op>()) return Steps::op::stage_rows;
      else return 0;
    }()...};
    const int multiple[] = {[] {
      if constexpr (stages_rows<typename Steps::op>()) return Steps::op::stage_first_multiple;
      else return 1;
    }()...};
    const std::size_t row_floats[] = {[] {
      if constexpr (stages_rows<typename Steps::op>()) return Steps::op::stage_row_floats;
      else return std::size_t{0};
    }()...};
    std::size_t (*const floats_of[])(int) = {&staged_floats<typename Steps::op>...};
    const std::size_t fixed = 2 * buffer_floats + scratch_floats;
    const std::size_t budget = staging_budget / sizeof(float) > fixed ? staging_budget / sizeof(float) - fixed : 0;
    std::array<int, count> first{};
    std::size_t used = 0, bars = 0;
    // room for rows f.. of step j and one more barrier (2 floats) besides those already planned
    auto fits = [&](std::size_t j, int f) { return used + floats_of[j](f) + 2 * (bars + 1) <= budget; };
    for (std::size_t i = 0; i < count; ++i) first[i] = rows[i];
    for (std::size_t taken = 0; taken < count; ++taken) {  // whole, smallest first
      std::size_t best = count;
      for (std::size_t j = 0; j < count; ++j)
        if (can[j] && first[j] == rows[j] && fits(j, 0) && (best == count || floats_of[j](0) < floats_of[best](0)))
          best = j;
      if (best == count) break;
      used += floats_of[best](0), ++bars, first[best] = 0;
    }
    for (std::size_t j = 0; j < count; ++j) {  // the last rows of the rest, in step order
      if (!can[j] || first[j] == 0) continue;
      int f = (rows[j] + multiple[j] - 1) / multiple[j] * multiple[j];
      while (f - multiple[j] > 0 && fits(j, f - multiple[j]) && (f - multiple[j]) * row_floats[j] % 4 == 0)
        f -= multiple[j];
      if (f < rows[j] && f * row_floats[j] % 4 == 0) used += floats_of[j](f), ++bars, first[j] = f;
    }
    Staging t{};
    for (std::size_t i = 0; i < count; ++i) {
      t.first[i] = first[i], t.at[i] = ~std::size_t{0}, t.barrier[i] = t.barriers;
      if (first[i] < rows[i]) t.at[i] = t.floats, t.floats += floats_of[i](first[i]), ++t.barriers;
    }
    return t;
  }();
  // A barrier counts at most 2^20 - 1 bytes in flight.
  static constexpr bool copies_count_bytes = [] {
    std::size_t (*const floats_of[])(int) = {&staged_floats<typename Steps::op>...};
    for (std::size_t i = 0; i < count; ++i)
      if (staging.staged(i) && floats_of[i](staging.first[i]) * sizeof(float) >= (std::size_t{1} << 20)) return false;
    return true;
  }();
  static constexpr std::size_t staged_base = 2 * buffer_floats + scratch_floats;
  static constexpr std::size_t staged_smem_bytes =
      smem_bytes + staging.floats * sizeof(float) + std::size_t(staging.barriers) * 8;
};

// Whether a launch of these steps that asks for staging stages any weights (bulk copies need sm_90).
template <bool Staged, class... Steps>
inline constexpr bool network_bulk_staged =
    Staged && SamplePlan<Steps...>::staging.barriers > 0 && bulk::available;

// Thread 0 of a block that stages: starts the bulk copies (bulk_copy.cuh) of every staged step's
// weights and bias into `staged`, in step order, one barrier per step; they land while the steps
// before them run. A __syncthreads() must follow before any thread waits on a barrier.
template <class... Steps>
__device__ void network_start_staging(const float* __restrict__ params, float* staged, std::uint64_t* barriers) {
  using P = SamplePlan<Steps...>;
  for (int i = 0; i < P::staging.barriers; ++i) bulk::init(barriers + i);
  bulk::fence_init();
  static_for<int(P::count)>([&](auto si) {
    constexpr int s = decltype(si)::value;
    using S = std::tuple_element_t<s, std::tuple<Steps...>>;
    if constexpr (P::staging.staged(s)) {
      using Op = typename S::op;
      constexpr int first = P::staging.first[s];
      constexpr std::size_t wf = staged_weight_floats<Op>(first), bf = staged_bias_floats<Op>();
      std::uint64_t* const bar = barriers + P::staging.barrier[s];
      bulk::expect(bar, std::uint32_t((wf + bf) * sizeof(float)));
      bulk::copy(staged + P::staging.at[s], params + S::weight_at + std::size_t(first) * Op::stage_row_floats,
                 std::uint32_t(wf * sizeof(float)), bar);
      bulk::copy(staged + P::staging.at[s] + wf, params + S::bias_at, std::uint32_t(bf * sizeof(float)), bar);
    }
  });
}

// A network kernel block's shared memory (SamplePlan's layout): the two activation buffers and the
// scratch (buf), then, in a launch that stages, the staged weights and their barriers. Constructed by
// every thread at entry; in a launch that stages, thread 0 also starts the copies.
template <bool BulkStaged, class... Steps>
struct NetworkBlock {
  using P = SamplePlan<Steps...>;
  float* buf;
  float* staged;
  std::uint64_t* barriers;
  __device__ explicit NetworkBlock(const float* __restrict__ params) {
    extern __shared__ float4 network_smem[];
    buf = reinterpret_cast<float*>(network_smem);
    staged = buf + P::staged_base;
    barriers = reinterpret_cast<std::uint64_t*>(staged + P::staging.floats);
    if constexpr (BulkStaged)
      if (threadIdx.x == 0) network_start_staging<Steps...>(params, staged, barriers);
  }
};

// Every step, all NT threads, from the sample in buf's slot 0 to the output in slot buffer_of[count]
// (returned). A staged step waits for its copies first (at once after the first time: each barrier
// completes one phase and stays so).
template <int NT, bool BulkStaged, class... Steps>
__device__ const float* network_run_steps(const float* __restrict__ params, const float* __restrict__ state,
                                          float* buf, const float* staged, std::uint64_t* barriers) {
  using P = SamplePlan<Steps...>;
  constexpr std::size_t A = P::buffer_floats;
  static_for<int(P::count)>([&](auto si) {
    constexpr int s = decltype(si)::value;
    using S = std::tuple_element_t<s, std::tuple<Steps...>>;
    float* const from = buf + P::buffer_of[s] * A;
    float* const to = buf + P::buffer_of[s + 1] * A;
    if constexpr (is_absorbed<typename S::op>()) {
      // nothing to run, no barrier
    } else if constexpr (BulkStaged && P::staging.staged(s)) {
      bulk::wait(barriers + P::staging.barrier[s]);
      constexpr int first = P::staging.first[s];
      const float* const w_staged = staged + P::staging.at[s];
      S::op::template run<NT, first>(params + S::weight_at, w_staged + staged_weight_floats<typename S::op>(first),
                                     state + S::state_at, from, to, buf + 2 * A, w_staged);
    } else {
      S::op::template run<NT>(params + S::weight_at, params + S::bias_at, state + S::state_at, from, to, buf + 2 * A);
    }
    if constexpr (!is_absorbed<typename S::op>()) __syncthreads();
  });
  return buf + P::buffer_of[P::count] * A;
}

// Staged = true: thread 0 first starts bulk copies of every staged step's weights into shared memory,
// which land while the steps before them run; each such step waits for its own. Without them (before
// sm_90) the steps read their weights from global memory as in a launch without staging.
template <int NT, bool Staged, class... Steps>
__global__ void __launch_bounds__(NT)
kernel_network_forward(const float* __restrict__ params,  // the network's parameters (BufferPlan)
                       const float* __restrict__ state,   // its layer state
                       const float* __restrict__ x,       // [batch][in_size]
                       float* __restrict__ y)             // [batch][out_size]
{
  using P = SamplePlan<Steps...>;
  constexpr bool bulk_staged = network_bulk_staged<Staged, Steps...>;
  const NetworkBlock<bulk_staged, Steps...> block(params);
  float* const buf = block.buf;
  const std::size_t n = blockIdx.x;
  // The sample's input: every load in flight before the first store (16-byte loads where aligned), so
  // that a large input (a tail kernel's 8,192 floats) costs one memory latency, not one per stride.
  constexpr int quads = int(P::in_size / 4), per_thread = (quads + NT - 1) / NT;
  if (P::in_size % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0) {
    const float4* xq = reinterpret_cast<const float4*>(x + n * P::in_size);
    float4 v[per_thread > 0 ? per_thread : 1];
#pragma unroll
    for (int j = 0; j < per_thread; ++j)
      if (threadIdx.x + j * NT < quads) v[j] = __ldg(xq + threadIdx.x + j * NT);
#pragma unroll
    for (int j = 0; j < per_thread; ++j)
      if (threadIdx.x + j * NT < quads) reinterpret_cast<float4*>(buf)[threadIdx.x + j * NT] = v[j];
  } else {
    for (int i = threadIdx.x; i < int(P::in_size); i += NT) buf[i] = __ldg(x + n * P::in_size + std::size_t(i));
  }
  __syncthreads();  // (also publishes the barriers' initialisation)
  const float* out = network_run_steps<NT, bulk_staged, Steps...>(params, state, buf, block.staged, block.barriers);
  for (int i = threadIdx.x; i < int(P::out_size); i += NT) y[n * P::out_size + std::size_t(i)] = out[i];
}

// The whole forward of `batch` samples in one launch.
template <class... Steps>
struct cuda_network_kernel {
  using plan = SamplePlan<Steps...>;
  using steps = std::tuple<Steps...>;
  static constexpr int threads = CTNN_NETWORK_KERNEL_THREADS;
  // Two activations (and the scratch) must fit the shared memory a block has without opting in (the
  // whole network's kernel, measured so), or, opting in, 96 KB (a tail kernel: CudaNetwork::tail_first).
  static constexpr bool fits = plan::smem_bytes <= std::size_t(smem_limit_floats) * sizeof(float);
  static constexpr bool fits_opt_in = plan::smem_bytes <= 96 * 1024;
  static constexpr int max_batch = CTNN_NETWORK_KERNEL_MAX_BATCH;

  // Staging the weights (kernel_network_forward<..., true>) takes them through the shared memory that
  // blocks would otherwise share a multiprocessor with, so it runs only where each block has a
  // multiprocessor to itself anyway (batch <= the SM count), on sm_90 and later (bulk copies, and the
  // 227 KB a block may opt in to).
  static constexpr std::size_t staged_bytes = plan::staged_smem_bytes;
  static constexpr bool can_stage = CTNN_NETWORK_KERNEL_STAGING && plan::staging.barriers > 0 && staged_bytes <= 227 * 1024 && plan::copies_count_bytes;
  static bool stages(int batch) {
    if constexpr (!can_stage) {
      return false;
    } else {  // asked once per device (three attribute queries would cost a batch-1 forward host time)
      static std::atomic<long long> limit[64];  // per device: 0 unknown, -1 never, else the largest batch
      int device = 0;
      CTNN_CUDA_CHECK(cudaGetDevice(&device));
      std::atomic<long long>& l = limit[device % 64];
      if (l.load() == 0)
        l.store(clusters_supported() && smem_opt_in_bytes() >= staged_bytes ? (long long)sm_count() : -1);
      return batch <= l.load();
    }
  }

  template <int NT = threads>
  static void forward(cudaStream_t stream, const float* params, const float* state, const float* x, float* y,
                      int batch) {
    static_assert(fits_opt_in, "two activations fit the shared memory");
    static_assert(NT % 32 == 0 && NT <= CTNN_NETWORK_KERNEL_THREADS, "whole warps, the scratch sized for the most");
    if constexpr (can_stage) {
      if (stages(batch)) {
        constexpr auto kernel = kernel_network_forward<NT, true, Steps...>;
        request_dynamic_smem<kernel, int(staged_bytes)>();
        kernel<<<unsigned(batch), NT, staged_bytes, stream>>>(params, state, x, y);
        CTNN_CHECK_LAUNCH();
        return;
      }
    }
    constexpr auto kernel = kernel_network_forward<NT, false, Steps...>;
    request_dynamic_smem<kernel, int(plan::smem_bytes)>();
    kernel<<<unsigned(batch), NT, plan::smem_bytes, stream>>>(params, state, x, y);
    CTNN_CHECK_LAUNCH();
  }
};

}  // namespace ctnn::kernels
