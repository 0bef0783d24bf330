#pragma once
// Max and average pooling on the device, mirroring layers/pool.hpp: max ignores padded positions and
// sends the gradient to the first maximum of its window in row-major order; average divides by K·K,
// padding included. Backward is a gather (each thread one input element, over the windows that
// cover it, in the host's (oy, ox) order), so there are no atomics and the result equals the host's
// float accumulation bit for bit. When the windows tile the input exactly (stride K, no padding, K
// divides H and W: LeNet-5's pools), each thread instead takes one window and writes its K·K
// gradients, finding the window's maximum once instead of once per element; for 2 × 2 windows on rows
// of a multiple of 4 inputs (the CIFAR networks' pools) a thread takes two neighbouring windows, with
// 16-byte loads and stores (the pair kernels below; the same arithmetic, so the same bits).
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "../core/cuda_context.hpp"
#include "../layers/activation.hpp"
#include "../layers/pool.hpp"
#include "launch.cuh"

namespace ctnn {
namespace kernels {

template <int H_, int W_, int K_, int S_, int P_>
struct PoolDims {
  static constexpr int H = H_, W = W_, K = K_, S = S_, P = P_;
  static constexpr int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
  static constexpr int HW = H * W, OHW = OH * OW;
  static constexpr bool valid = H > 0 && W > 0 && K > 0 && S > 0 && P >= 0 && 2 * P <= K &&
                                K <= H + 2 * P && K <= W + 2 * P;
  // Every input element lies in exactly one window.
  static constexpr bool tiled = S == K && P == 0 && H % K == 0 && W % K == 0;
};

inline constexpr int pool_threads = 256;

// Calls f(iy, ix) for each in-bounds input position of window (oy, ox), in row-major order (the
// host's for_window).
template <class G, class F>
__device__ __forceinline__ void for_window(int oy, int ox, F&& f) {
#pragma unroll
  for (int ky = 0; ky < G::K; ++ky) {
    const int iy = oy * G::S - G::P + ky;
    if (iy < 0 || iy >= G::H) continue;
#pragma unroll
    for (int kx = 0; kx < G::K; ++kx) {
      const int ix = ox * G::S - G::P + kx;
      if (ix >= 0 && ix < G::W) f(iy, ix);
    }
  }
}

// Index (iy·W + ix) of the first maximum of window (oy, ox) of one plane, or -1 if all of it is padding.
template <class G>
__device__ __forceinline__ int pool_argmax(const float* __restrict__ plane, int oy, int ox) {
  int best = -1;
  float best_v = 0.f;
  for_window<G>(oy, ox, [&](int iy, int ix) {
    const float v = plane[iy * G::W + ix];
    if (best < 0 || v > best_v) best = iy * G::W + ix, best_v = v;
  });
  return best;
}

template <PoolKind Kind, class G>
__global__ void __launch_bounds__(pool_threads)
kernel_pool_forward(const float* __restrict__ x,  // [planes][H][W], planes = batch·C
                    float* __restrict__ y,        // [planes][OH][OW]
                    std::size_t outputs)          // planes·OH·OW
{
  // Preconditions
  static_assert(G::valid, "ctnn: invalid pooling geometry");
  const std::size_t i = std::size_t(blockIdx.x) * pool_threads + threadIdx.x;
  if (i >= outputs) return;
  const std::size_t plane = i / G::OHW;
  const int pix = int(i % G::OHW), oy = pix / G::OW, ox = pix % G::OW;
  const float* xp = x + plane * G::HW;
  float acc = Kind == PoolKind::max ? -INFINITY : 0.f;
  for_window<G>(oy, ox, [&](int iy, int ix) {
    const float v = xp[iy * G::W + ix];
    if constexpr (Kind == PoolKind::max) acc = v > acc ? v : acc;  // as the host: NaN never wins
    else acc += v;
  });
  y[i] = Kind == PoolKind::max ? acc : acc / float(G::K * G::K);
}

// The backward kernels' store: g, times Fn'(x) where an activation Fn precedes the pooling (its
// backward folded into this one: x, the pooling's input, is that activation's output; same bits as its
// own kernel, dy · derivative(y)).
template <class Fn>
__device__ __forceinline__ float pool_grad_out(float g, float x) {
  if constexpr (std::is_same_v<Fn, identity_fn>) return g;
  else return g * Fn::derivative(x);
}

template <PoolKind Kind, class G, class Fn = identity_fn>
__global__ void __launch_bounds__(pool_threads)
kernel_pool_backward(const float* __restrict__ x,   // [planes][H][W]
                     const float* __restrict__ dy,  // [planes][OH][OW]
                     float* __restrict__ dx,        // [planes][H][W]
                     std::size_t inputs)            // planes·H·W
{
  // Preconditions
  static_assert(G::valid, "ctnn: invalid pooling geometry");
  const std::size_t i = std::size_t(blockIdx.x) * pool_threads + threadIdx.x;
  if (i >= inputs) return;
  const std::size_t plane = i / G::HW;
  const int pos = int(i % G::HW), iy = pos / G::W, ix = pos % G::W;
  // Windows covering (iy, ix): oy·S − P <= iy <= oy·S − P + K − 1, and the same for x.
  const int ty = iy + G::P, tx = ix + G::P;
  const int oy_lo = ty >= G::K ? (ty - G::K) / G::S + 1 : 0, oy_hi = min_of(ty / G::S, G::OH - 1);
  const int ox_lo = tx >= G::K ? (tx - G::K) / G::S + 1 : 0, ox_hi = min_of(tx / G::S, G::OW - 1);
  const float* xp = x + plane * G::HW;
  const float* dyp = dy + plane * G::OHW;
  float g = 0.f;
  for (int oy = oy_lo; oy <= oy_hi; ++oy)
    for (int ox = ox_lo; ox <= ox_hi; ++ox) {
      if constexpr (Kind == PoolKind::max) {
        if (pool_argmax<G>(xp, oy, ox) == pos) g += dyp[oy * G::OW + ox];
      } else {
        g += dyp[oy * G::OW + ox] / float(G::K * G::K);
      }
    }
  dx[i] = pool_grad_out<Fn>(g, xp[pos]);
}

// Backward for windows that tile the input (G::tiled): thread i takes window i and writes its K·K
// input gradients, each exactly once, as 0 + g like the host (which turns −0 into +0).
template <PoolKind Kind, class G, class Fn = identity_fn>
__global__ void __launch_bounds__(pool_threads)
kernel_pool_backward_tiled(const float* __restrict__ x,   // [planes][H][W]
                           const float* __restrict__ dy,  // [planes][OH][OW]
                           float* __restrict__ dx,        // [planes][H][W]
                           std::size_t outputs)           // planes·OH·OW
{
  // Preconditions
  static_assert(G::valid && G::tiled, "ctnn: the windows must tile the input");
  const std::size_t i = std::size_t(blockIdx.x) * pool_threads + threadIdx.x;
  if (i >= outputs) return;
  const std::size_t plane = i / G::OHW;
  const int pix = int(i % G::OHW), oy = pix / G::OW, ox = pix % G::OW;
  const float* xp = x + plane * G::HW;
  float* dxp = dx + plane * G::HW;
  const float g = dy[i];
  const int best = Kind == PoolKind::max ? pool_argmax<G>(xp, oy, ox) : -1;
#pragma unroll
  for (int ky = 0; ky < G::K; ++ky)
#pragma unroll
    for (int kx = 0; kx < G::K; ++kx) {
      const int at = (oy * G::K + ky) * G::W + ox * G::K + kx;
      if constexpr (Kind == PoolKind::max) dxp[at] = pool_grad_out<Fn>(at == best ? 0.f + g : 0.f, xp[at]);
      else dxp[at] = pool_grad_out<Fn>(0.f + g / float(G::K * G::K), xp[at]);
    }
}

// --- Two windows a thread ----------------------------------------------------------------------------
// Tiled 2 × 2 windows, W % 4 == 0: windows (oy, 2p) and (oy, 2p + 1) read input rows 2·oy and 2·oy + 1,
// columns 4p .. 4p + 3: one 16-byte load (and store, backward) per row, where the one-window kernels'
// 4-byte accesses touch every other float of a warp's span (2026-11-28). The windows' values in the
// one-window kernels' order (row-major), so the results are theirs bit for bit.
template <class G>
inline constexpr bool pool_pairs = G::valid && G::tiled && G::K == 2 && G::W % 4 == 0;

template <PoolKind Kind>
__device__ __forceinline__ float pool_window_value(float v00, float v01, float v10, float v11) {
  if constexpr (Kind == PoolKind::max) {
    const float v[4] = {v00, v01, v10, v11};
    float acc = -INFINITY;
#pragma unroll
    for (int k = 0; k < 4; ++k) acc = v[k] > acc ? v[k] : acc;  // as kernel_pool_forward
    return acc;
  } else {
    return ((((0.f + v00) + v01) + v10) + v11) / 4.f;  // as kernel_pool_forward: 0 + each in order, / (K·K)
  }
}

// Pair i's offsets: its first input row's first float, its first output.
template <class G>
struct PoolPairAt {
  std::size_t in, out;
  __device__ explicit PoolPairAt(std::size_t i) {
    constexpr int PR = G::OW / 2;  // pairs per output row
    const std::size_t plane = i / (std::size_t(G::OH) * PR);
    const int r = int(i % (std::size_t(G::OH) * PR)), oy = r / PR, p = r % PR;
    in = plane * G::HW + std::size_t(2 * oy) * G::W + 4 * p;
    out = plane * G::OHW + oy * G::OW + 2 * p;
  }
};

template <PoolKind Kind, class G>
__global__ void __launch_bounds__(pool_threads)
kernel_pool_forward_pairs(const float* __restrict__ x,  // [planes][H][W], 16-byte aligned
                          float* __restrict__ y,        // [planes][OH][OW], 8-byte aligned
                          std::size_t pairs)            // planes·OH·OW / 2
{
  static_assert(pool_pairs<G>, "2 × 2 tiled windows, W % 4 == 0");
  const std::size_t i = std::size_t(blockIdx.x) * pool_threads + threadIdx.x;
  if (i >= pairs) return;
  const PoolPairAt<G> at(i);
  const float4 a = *reinterpret_cast<const float4*>(x + at.in), b = *reinterpret_cast<const float4*>(x + at.in + G::W);
  *reinterpret_cast<float2*>(y + at.out) =
      make_float2(pool_window_value<Kind>(a.x, a.y, b.x, b.y), pool_window_value<Kind>(a.z, a.w, b.z, b.w));
}

template <PoolKind Kind, class G, class Fn = identity_fn>
__global__ void __launch_bounds__(pool_threads)
kernel_pool_backward_pairs(const float* __restrict__ x,   // [planes][H][W], 16-byte aligned
                           const float* __restrict__ dy,  // [planes][OH][OW], 8-byte aligned
                           float* __restrict__ dx,        // [planes][H][W], 16-byte aligned
                           std::size_t pairs)             // planes·OH·OW / 2
{
  static_assert(pool_pairs<G>, "2 × 2 tiled windows, W % 4 == 0");
  const std::size_t i = std::size_t(blockIdx.x) * pool_threads + threadIdx.x;
  if (i >= pairs) return;
  const PoolPairAt<G> at(i);
  const float4 a = *reinterpret_cast<const float4*>(x + at.in), b = *reinterpret_cast<const float4*>(x + at.in + G::W);
  const float2 g = *reinterpret_cast<const float2*>(dy + at.out);
  // One window's four gradients (row-major: v00, v01, v10, v11), as kernel_pool_backward_tiled.
  auto window = [](float gw, float v00, float v01, float v10, float v11, float (&out)[4]) {
    const float v[4] = {v00, v01, v10, v11};
    int best = 0;
    if constexpr (Kind == PoolKind::max)
      for (int k = 1; k < 4; ++k)
        if (v[k] > v[best]) best = k;  // the first maximum (pool_argmax)
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (Kind == PoolKind::max) out[k] = pool_grad_out<Fn>(k == best ? 0.f + gw : 0.f, v[k]);
      else out[k] = pool_grad_out<Fn>(0.f + gw / float(G::K * G::K), v[k]);
    }
  };
  float w0[4], w1[4];
  window(g.x, a.x, a.y, b.x, b.y, w0);
  window(g.y, a.z, a.w, b.z, b.w, w1);
  *reinterpret_cast<float4*>(dx + at.in) = make_float4(w0[0], w0[1], w1[0], w1[1]);
  *reinterpret_cast<float4*>(dx + at.in + G::W) = make_float4(w0[2], w0[3], w1[2], w1[3]);
}

}  // namespace kernels

// Shared by Pool and AvgPool (distinct types, so each gets its own specialisation below).
template <class Layer, class In>
struct cuda_pooling {
  using bound = typename Layer::template bind<In>;
  using dims = kernels::PoolDims<bound::H, bound::W, Layer::kernel, Layer::stride, Layer::pad>;
  static constexpr PoolKind kind = Layer::kind;
  static_assert(dims::OH == bound::OH && dims::OW == bound::OW, "device and host agree on the shape");

  static constexpr std::size_t workspace_floats(int) { return 0; }

  static void forward(const CudaContext& ctx, const float*, const float*, const float* x, float* y,
                      int batch) {
    kernels::check_batch(batch, Layer::name);
    const std::size_t outputs = std::size_t(batch) * bound::out_size;
    if constexpr (kernels::pool_pairs<dims>)
      if (kernels::aligned_to(x, 16) && kernels::aligned_to(y, 8)) {
        kernels::kernel_pool_forward_pairs<kind, dims>
            <<<kernels::grid_for(outputs / 2, kernels::pool_threads), kernels::pool_threads, 0, ctx.stream>>>(
                x, y, outputs / 2);
        CTNN_CHECK_LAUNCH();
        return;
      }
    kernels::kernel_pool_forward<kind, dims>
        <<<kernels::grid_for(outputs, kernels::pool_threads), kernels::pool_threads, 0, ctx.stream>>>(
            x, y, outputs);
    CTNN_CHECK_LAUNCH();
  }

  static void backward(const CudaContext& ctx, const float* w, const float* x, const float*,
                       const float* dy, float* dx, float*, float*, int batch) {
    kernels::check_batch(batch, Layer::name);
    if (dx) backward_data_act<identity_fn>(ctx, w, x, dy, dx, batch);
  }

  // dx times Fn'(x): the backward of the activation Fn below the pooling (whose output x, the pooling's
  // input, is) folded into this one. The network's fused backward calls it for an activation followed
  // by a pooling.
  static constexpr bool has_backward_data_act = true;
  template <class Fn>
  static bool backward_data_act(const CudaContext& ctx, const float*, const float* x, const float* dy, float* dx,
                                int batch) {
    kernels::check_batch(batch, Layer::name);
    constexpr int T = kernels::pool_threads;
    if constexpr (kernels::pool_pairs<dims>)
      if (kernels::aligned_to(x, 16) && kernels::aligned_to(dy, 8) && kernels::aligned_to(dx, 16)) {
        const std::size_t pairs = std::size_t(batch) * bound::out_size / 2;
        kernels::kernel_pool_backward_pairs<kind, dims, Fn>
            <<<kernels::grid_for(pairs, T), T, 0, ctx.stream>>>(x, dy, dx, pairs);
        CTNN_CHECK_LAUNCH();
        return true;
      }
    if constexpr (dims::tiled) {
      const std::size_t outputs = std::size_t(batch) * bound::out_size;
      kernels::kernel_pool_backward_tiled<kind, dims, Fn>
          <<<kernels::grid_for(outputs, T), T, 0, ctx.stream>>>(x, dy, dx, outputs);
    } else {
      const std::size_t inputs = std::size_t(batch) * bound::in_size;
      kernels::kernel_pool_backward<kind, dims, Fn>
          <<<kernels::grid_for(inputs, T), T, 0, ctx.stream>>>(x, dy, dx, inputs);
    }
    CTNN_CHECK_LAUNCH();
    return true;
  }
};

template <int K, class... Opts, class In>
struct cuda_layer<Pool<K, Opts...>, In> : cuda_pooling<Pool<K, Opts...>, In> {};
template <int K, class... Opts, class In>
struct cuda_layer<AvgPool<K, Opts...>, In> : cuda_pooling<AvgPool<K, Opts...>, In> {};

}  // namespace ctnn
