#pragma once
// One kernel for a whole network's forward in evaluation mode, at small batches: block n takes sample
// n through every layer, its activations in shared memory (two buffers; element-wise layers work in
// place), the weights read through the cache. At batch 1
// the layers' own kernels are bound by latency, a launch and a drain each with most of their blocks
// idle; one launch does the same arithmetic without the round trips. CudaNetwork::forward_fused picks
// it (network/cuda_network.hpp maps each layer to a step below: sample_op_of).
//
// Steps (Op), each one sample's forward of a layer by all NT threads of the block, from x to y (both
// in shared memory; y == x for an in-place step; a third region, the scratch, for the step's own use):
//   SampleConv     Conv: a thread per few channels × a few outputs of a row, registers reused across
//                  the kernel's columns; a padded input copied with a zero border into the scratch
//   SamplePool     max or average pooling (average over K·K, padding counted, as the host)
//   SampleMap      an element-wise activation (relu_fn, ...), in place
//   SampleDense    Dense: a warp per 4 units, lanes over the inputs (coalesced rows), butterfly sums;
//                  with fewer units than warps, the warps of 4 units split the inputs
//   SampleSoftmax  Softmax: one warp (softmax.cuh's softmax_row)
//   SampleNorm     BatchNorm in evaluation (running statistics), in place, in double as its kernel
//   SampleMean     GlobalAvgPool: a warp per channel
//   SampleKeep     Dropout in evaluation: nothing to do
// A layer without a step (a Residual block, say) sends the network down the layer-by-layer path.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "../core/cuda_check.hpp"
#include "../core/layer.hpp"
#include "../layers/batchnorm.hpp"
#include "../layers/pool.hpp"
#include "launch.cuh"
#include "reduce.cuh"
#include "softmax.cuh"

// The largest batch that runs the network kernel (measured on LeNet-5, H100: docs/fusion.md).
#ifndef CTNN_NETWORK_KERNEL_MAX_BATCH
#define CTNN_NETWORK_KERNEL_MAX_BATCH 256
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

// A thread computes RC output channels × RX neighbouring outputs of a row: per input channel and
// kernel row it loads the row's SPAN inputs into registers once and each weight once (the same
// address across the warp: a broadcast), then RC·RX·K FMAs. A padded input is first copied into
// `scratch` with a zero border, so that no tap needs a bounds check.
template <int C, int H, int W, int Out, int K, int Stride, int Pad, int Dilation>
struct SampleConv {
  static constexpr int OH = ctnn::detail::window_out(H, K, Stride, Pad, Dilation);
  static constexpr int OW = ctnn::detail::window_out(W, K, Stride, Pad, Dilation);
  static constexpr int HP = H + 2 * Pad, WP = W + 2 * Pad;
  static constexpr std::size_t in_size = std::size_t(C) * H * W, out_size = std::size_t(Out) * OH * OW;
  static constexpr std::size_t scratch_floats = Pad > 0 ? std::size_t(C) * HP * WP : 0;
  static constexpr bool in_place = false;
  static constexpr int RX = divisor_at_most(OW, 8);
  static constexpr int SPAN = (RX - 1) * Stride + (K - 1) * Dilation + 1;
  // Channels per thread: the most (4, 2 or 1) that still leaves work for half the block's threads.
  template <int NT>
  static constexpr int channels_per_thread() {
    for (int rc : {4, 2})
      if (Out % rc == 0 && (Out / rc) * OH * (OW / RX) >= NT / 2) return rc;
    return 1;
  }
  template <int NT>
  __device__ static void run(const float* __restrict__ w, const float* __restrict__ b, const float*,
                             const float* __restrict__ x, float* __restrict__ y, float* __restrict__ scratch) {
    const float* in = x;
    if constexpr (Pad > 0) {
      for (int i = threadIdx.x; i < C * HP * WP; i += NT) {
        const int c = i / (HP * WP), iy = i % (HP * WP) / WP - Pad, ix = i % WP - Pad;
        scratch[i] = iy >= 0 && iy < H && ix >= 0 && ix < W ? x[(c * H + iy) * W + ix] : 0.f;
      }
      __syncthreads();
      in = scratch;
    }
    constexpr int RC = channels_per_thread<NT>(), segments = OW / RX;
    for (int e = threadIdx.x; e < (Out / RC) * OH * segments; e += NT) {
      const int o0 = e / (OH * segments) * RC, oy = e % (OH * segments) / segments, ox0 = e % segments * RX;
      float acc[RC][RX];
#pragma unroll
      for (int j = 0; j < RC; ++j) {
        const float bias = __ldg(b + o0 + j);
#pragma unroll
        for (int r = 0; r < RX; ++r) acc[j][r] = bias;
      }
      for (int c = 0; c < C; ++c) {
#pragma unroll
        for (int ky = 0; ky < K; ++ky) {
          const float* row = in + (c * HP + oy * Stride + ky * Dilation) * WP + ox0 * Stride;
          float v[SPAN];
#pragma unroll
          for (int q = 0; q < SPAN; ++q) v[q] = row[q];
#pragma unroll
          for (int kx = 0; kx < K; ++kx) {
#pragma unroll
            for (int j = 0; j < RC; ++j) {
              const float wv = __ldg(w + ((std::size_t(o0 + j) * C + c) * K + ky) * K + kx);
#pragma unroll
              for (int r = 0; r < RX; ++r) acc[j][r] = fmaf(wv, v[r * Stride + kx * Dilation], acc[j][r]);
            }
          }
        }
      }
#pragma unroll
      for (int j = 0; j < RC; ++j)
#pragma unroll
        for (int r = 0; r < RX; ++r) y[((o0 + j) * OH + oy) * OW + ox0 + r] = acc[j][r];
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
    for (int e = threadIdx.x; e < C * plane; e += NT) {
      const int c = e / plane, oy = e % plane / OW, ox = e % OW;
      float acc = Kind == PoolKind::max ? -INFINITY : 0.f;
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        const int iy = oy * Stride - Pad + ky;
        if (iy < 0 || iy >= H) continue;
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          const int ix = ox * Stride - Pad + kx;
          if (ix < 0 || ix >= W) continue;
          const float v = x[(c * H + iy) * W + ix];
          acc = Kind == PoolKind::max ? fmaxf(acc, v) : acc + v;
        }
      }
      y[e] = Kind == PoolKind::max ? acc : acc / float(K * K);
    }
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
// come from L2 and the latency of those loads, not arithmetic, is the layer's time.
template <int I, int N>
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
  template <int NT>
  __device__ static void run(const float* __restrict__ w, const float* __restrict__ b, const float*,
                             const float* __restrict__ x, float* __restrict__ y, float* __restrict__ scratch) {
    constexpr int S = dense_input_splits(NT / 32, UG, rounds), per = (rounds + S - 1) / S;
    static_assert(S == 1 || std::size_t(S * UG * G) <= scratch_floats, "the partial sums fit the scratch");
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    // Warp `warp`: unit groups from warp / S (stride NT/32/S), inputs of split warp % S.
    const int split = S == 1 ? 0 : warp % S, k_first = split * per, k_end = min(k_first + per, rounds);
    const bool active = S == 1 || warp < S * UG;
    for (int o0 = warp / S * G; active && o0 < N; o0 += NT / 32 / S * G) {  // uniform per warp: full warps shuffle
      float acc[G] = {};
      for (int k0 = k_first; k0 < k_end; k0 += R) {
        float wv[R][G][V];  // all of this chunk's loads first, then the FMAs
#pragma unroll
        for (int k = 0; k < R; ++k) {
          const int i = ((k0 + k) * 32 + lane) * V;
#pragma unroll
          for (int g = 0; g < G; ++g) {
            const float* row = w + std::size_t(o0 + g < N ? o0 + g : o0) * I + (i < I ? i : 0);
            if constexpr (V == 4) {
              const float4 q = __ldg(reinterpret_cast<const float4*>(row));
              wv[k][g][0] = q.x, wv[k][g][1] = q.y, wv[k][g][2] = q.z, wv[k][g][3] = q.w;
            } else {
              wv[k][g][0] = __ldg(row);
            }
          }
        }
#pragma unroll
        for (int k = 0; k < R; ++k) {
          const int i = ((k0 + k) * 32 + lane) * V;
          if (i >= I || k0 + k >= k_end) continue;
#pragma unroll
          for (int v = 0; v < V; ++v) {
            const float xv = x[i + v];
#pragma unroll
            for (int g = 0; g < G; ++g) acc[g] = fmaf(wv[k][g][v], xv, acc[g]);
          }
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float sum = warp_sum(acc[g]);
        if (lane == 0 && o0 + g < N) {
          if constexpr (S == 1) y[o0 + g] = sum + __ldg(b + o0 + g);
          else scratch[split * (UG * G) + o0 + g] = sum;
        }
      }
    }
    if constexpr (S > 1) {
      __syncthreads();  // every split's partial sums are in the scratch
      for (int o = threadIdx.x; o < N; o += NT) {
        float sum = scratch[o];
        for (int sp = 1; sp < S; ++sp) sum += scratch[sp * (UG * G) + o];
        y[o] = sum + __ldg(b + o);
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

template <std::size_t N>
struct SampleKeep {
  static constexpr std::size_t in_size = N, out_size = N;
  static constexpr bool in_place = true;
  template <int NT>
  __device__ static void run(const float*, const float*, const float*, const float*, float*, float*) {}
};

// A layer's step and where its parameters and state start (float offsets into the parameter and state
// arrays; unused where the layer has none).
template <class Op, std::size_t WeightAt, std::size_t BiasAt, std::size_t StateAt>
struct SampleStep {
  using op = Op;
  static constexpr std::size_t weight_at = WeightAt, bias_at = BiasAt, state_at = StateAt;
};

template <class Op>
constexpr std::size_t scratch_of() {
  if constexpr (requires { Op::scratch_floats; }) return Op::scratch_floats;
  else return 0;
}

// The steps' shared-memory plan: buffer_of[i] holds slot i (0: the input, i: step i-1's output).
template <class... Steps>
struct SamplePlan {
  static constexpr std::size_t count = sizeof...(Steps);
  static constexpr std::size_t in_size = std::get<0>(std::make_tuple(Steps::op::in_size...));
  static constexpr std::size_t out_size = std::get<count - 1>(std::make_tuple(Steps::op::out_size...));
  // Floats of each of the two buffers (a multiple of 4: 16-byte aligned second buffer).
  static constexpr std::size_t buffer_floats =
      (std::max({in_size, Steps::op::out_size...}) + 3) / 4 * 4;
  // Floats of the scratch after them (a padded convolution's input).
  static constexpr std::size_t scratch_floats = std::max({std::size_t{0}, scratch_of<typename Steps::op>()...});
  static constexpr std::size_t smem_bytes = (2 * buffer_floats + scratch_floats) * sizeof(float);
  static constexpr std::array<int, count + 1> buffer_of = [] {
    std::array<int, count + 1> b{};
    const bool in_place[] = {Steps::op::in_place...};
    for (std::size_t i = 0; i < count; ++i) b[i + 1] = in_place[i] ? b[i] : 1 - b[i];
    return b;
  }();
};

template <int NT, class... Steps>
__global__ void __launch_bounds__(NT)
kernel_network_forward(const float* __restrict__ params,  // the network's parameters (BufferPlan)
                       const float* __restrict__ state,   // its layer state
                       const float* __restrict__ x,       // [batch][in_size]
                       float* __restrict__ y)             // [batch][out_size]
{
  using P = SamplePlan<Steps...>;
  extern __shared__ float4 network_smem[];
  float* const buf = reinterpret_cast<float*>(network_smem);
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
  __syncthreads();
  constexpr std::size_t A = P::buffer_floats;
  static_for<int(P::count)>([&](auto si) {
    constexpr int s = decltype(si)::value;
    using S = std::tuple_element_t<s, std::tuple<Steps...>>;
    S::op::template run<NT>(params + S::weight_at, params + S::bias_at, state + S::state_at,
                            buf + P::buffer_of[s] * A, buf + P::buffer_of[s + 1] * A, buf + 2 * A);
    __syncthreads();
  });
  const float* out = buf + P::buffer_of[P::count] * A;
  for (int i = threadIdx.x; i < int(P::out_size); i += NT) y[n * P::out_size + std::size_t(i)] = out[i];
}

// The whole forward of `batch` samples in one launch.
template <class... Steps>
struct cuda_network_kernel {
  using plan = SamplePlan<Steps...>;
  static constexpr int threads = CTNN_NETWORK_KERNEL_THREADS;
  // Two activations (and the scratch) must fit the shared memory a block has without opting in (the
  // whole network's kernel, measured so), or, opting in, 96 KB (a tail kernel: CudaNetwork::tail_first).
  static constexpr bool fits = plan::smem_bytes <= std::size_t(smem_limit_floats) * sizeof(float);
  static constexpr bool fits_opt_in = plan::smem_bytes <= 96 * 1024;
  static constexpr int max_batch = CTNN_NETWORK_KERNEL_MAX_BATCH;

  template <int NT = threads>
  static void forward(cudaStream_t stream, const float* params, const float* state, const float* x, float* y,
                      int batch) {
    static_assert(fits_opt_in, "two activations fit the shared memory");
    static_assert(NT % 32 == 0 && NT <= CTNN_NETWORK_KERNEL_THREADS, "whole warps, the scratch sized for the most");
    constexpr auto kernel = kernel_network_forward<NT, Steps...>;
    request_dynamic_smem<kernel, int(plan::smem_bytes)>();
    kernel<<<unsigned(batch), NT, plan::smem_bytes, stream>>>(params, state, x, y);
    CTNN_CHECK_LAUNCH();
  }
};

}  // namespace ctnn::kernels
