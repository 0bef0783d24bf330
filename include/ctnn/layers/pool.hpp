#pragma once
// Pool<K, Opts...> (also MaxPool) and AvgPool<K, Opts...>: K×K pooling per channel, options
// Stride<S> (default K) and Pad<P>. Max pooling ignores padded positions and sends the gradient to
// the first maximum in row-major window order; average pooling counts padded zeros in the divisor
// (PyTorch's count_include_pad=True).
#include <limits>
#include <string>

#include "../core/layer.hpp"
#include "../core/options.hpp"

namespace ctnn {

enum class PoolKind { max, average };

template <PoolKind Kind, int K, class... Opts>
struct Pooling : layer_tag, no_params {
  static constexpr const char* name = Kind == PoolKind::max ? "MaxPool" : "AvgPool";
  static constexpr PoolKind kind = Kind;
  static constexpr int kernel = K;
  static constexpr int stride = option_v<Stride, K, Opts...>;
  static constexpr int pad = option_v<Pad, 0, Opts...>;

  // "MaxPool 2x2", "AvgPool 3x3 stride 1 pad 1": options only where they differ from the defaults.
  static std::string label() {
    std::string s = std::string(name) + " " + std::to_string(K) + "x" + std::to_string(K);
    if (stride != K) s += " stride " + std::to_string(stride);
    if (pad != 0) s += " pad " + std::to_string(pad);
    return s;
  }

  template <class In>
  static constexpr bool check() {
    constexpr bool known = (is_pool_option_v<Opts> && ...);
    static_assert(known, "ctnn: unknown pooling option; pooling accepts Stride<S> and Pad<P>");
    constexpr bool unique = !known || options_unique_v<Opts...>;
    static_assert(unique, "ctnn: a pooling option is given twice");
    constexpr bool ok0 = known && unique;
    static_assert(!ok0 || K > 0, "ctnn: pooling window size must be positive");
    // The default stride is K: after a bad K, say nothing more about the stride.
    static_assert(!ok0 || K <= 0 || stride > 0, "ctnn: pooling stride must be positive");
    static_assert(!ok0 || pad >= 0, "ctnn: pooling padding must not be negative");
    constexpr bool ok1 = ok0 && K > 0 && stride > 0 && pad >= 0;
    static_assert(!ok1 || 2 * pad <= K,
                  "ctnn: pooling padding must be at most half the window (a window of padding "
                  "alone has no value)");
    constexpr bool ok2 = ok1 && 2 * pad <= K;
    static_assert(!ok2 || In::rank == 3,
                  "ctnn: pooling needs a C x H x W input, but its input is a flat vector");
    constexpr bool ok3 = ok2 && In::rank == 3;
    constexpr bool fits = K <= detail::dim_or_zero<In>(1) + 2 * pad &&
                          K <= detail::dim_or_zero<In>(2) + 2 * pad;
    static_assert(!ok3 || fits, "ctnn: pooling window is larger than its padded input");
    return ok3 && fits;
  }

  template <class In>
  struct bind : no_params {
    static constexpr int C = chw<In>::c, H = chw<In>::h, W = chw<In>::w;
    static constexpr int OH = detail::window_out(H, K, stride, pad, 1);
    static constexpr int OW = detail::window_out(W, K, stride, pad, 1);
    using input_shape = In;
    using output_shape = Shape<C, OH, OW>;
    static constexpr std::size_t in_size = In::size, out_size = output_shape::size;
    static constexpr std::size_t flops = out_size * K * K;

    // Calls f(iy, ix) for each in-bounds input position of output (oy, ox)'s window, row-major.
    template <class F>
    static void for_window(int oy, int ox, F&& f) {
      for (int ky = 0; ky < K; ++ky) {
        const int iy = oy * stride - pad + ky;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < K; ++kx) {
          const int ix = ox * stride - pad + kx;
          if (ix >= 0 && ix < W) f(iy, ix);
        }
      }
    }

    template <class T>
    static void forward(const T*, const T*, const T* x, T* y, int batch) {
      for (std::size_t p = 0; p < std::size_t(batch) * C; ++p)  // p = plane (sample, channel)
        for (int oy = 0; oy < OH; ++oy)
          for (int ox = 0; ox < OW; ++ox) {
            const T* plane = x + p * H * W;
            double acc = Kind == PoolKind::max ? -std::numeric_limits<double>::infinity() : 0.0;
            for_window(oy, ox, [&](int iy, int ix) {
              const double v = plane[iy * W + ix];
              acc = Kind == PoolKind::max ? (v > acc ? v : acc) : acc + v;
            });
            y[(p * OH + oy) * OW + ox] = T(Kind == PoolKind::max ? acc : acc / (K * K));
          }
    }

    template <class T>
    static void backward(const T*, const T* x, const T*, const T* dy, T* dx, T*, T*, int batch) {
      if (!dx) return;
      for (std::size_t i = 0; i < std::size_t(batch) * in_size; ++i) dx[i] = T(0);
      for (std::size_t p = 0; p < std::size_t(batch) * C; ++p)
        for (int oy = 0; oy < OH; ++oy)
          for (int ox = 0; ox < OW; ++ox) {
            const T g = dy[(p * OH + oy) * OW + ox];
            const T* plane = x + p * H * W;
            T* dplane = dx + p * H * W;
            if constexpr (Kind == PoolKind::max) {
              int best = -1;
              for_window(oy, ox, [&](int iy, int ix) {
                if (best < 0 || plane[iy * W + ix] > plane[best]) best = iy * W + ix;
              });
              dplane[best] += g;
            } else {
              for_window(oy, ox, [&](int iy, int ix) { dplane[iy * W + ix] += g / T(K * K); });
            }
          }
    }
  };
};

// Distinct types rather than aliases, so that diagnostics name the layer as the user spelled it.
template <int K, class... Opts> struct Pool : Pooling<PoolKind::max, K, Opts...> {};
template <int K, class... Opts> using MaxPool = Pool<K, Opts...>;
template <int K, class... Opts> struct AvgPool : Pooling<PoolKind::average, K, Opts...> {};

}  // namespace ctnn

// Under nvcc the layer's CUDA implementation (its cuda_layer specialisation) comes with it.
#ifdef __CUDACC__
#include "../kernels/pool.cuh"  // nvcc only
#endif
