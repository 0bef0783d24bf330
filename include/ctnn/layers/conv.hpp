#pragma once
// Conv<Out, K, Opts...>: 2-D convolution (cross-correlation, as PyTorch), square K×K kernel,
// options Stride<S>, Pad<P> (zero padding), Dilation<D>. Weight [Out][C][K][K], bias [Out].
#include <algorithm>
#include <string>
#include <vector>

#include "../core/layer.hpp"
#include "../core/options.hpp"

namespace ctnn {

template <int Out, int K, class... Opts>
struct Conv : layer_tag {
  static constexpr const char* name = "Conv";
  static constexpr int out_channels = Out, kernel = K;
  static constexpr int stride = option_v<Stride, 1, Opts...>;
  static constexpr int pad = option_v<Pad, 0, Opts...>;
  static constexpr int dilation = option_v<Dilation, 1, Opts...>;

  // "Conv 6@5x5 pad 2": options only where they differ from the defaults.
  static std::string label() {
    std::string s = "Conv " + std::to_string(Out) + "@" + std::to_string(K) + "x" + std::to_string(K);
    if (stride != 1) s += " stride " + std::to_string(stride);
    if (pad != 0) s += " pad " + std::to_string(pad);
    if (dilation != 1) s += " dilation " + std::to_string(dilation);
    return s;
  }

  template <class In>
  static constexpr bool check() {
    constexpr bool known = (is_conv_option_v<Opts> && ...);
    static_assert(known, "ctnn: unknown Conv option; Conv accepts Stride<S>, Pad<P> and Dilation<D>");
    constexpr bool unique = !known || options_unique_v<Opts...>;
    static_assert(unique, "ctnn: a Conv option is given twice");
    constexpr bool ok0 = known && unique;
    static_assert(!ok0 || Out > 0, "ctnn: Conv needs at least one output channel (Out > 0)");
    static_assert(!ok0 || K > 0, "ctnn: Conv kernel size must be positive");
    static_assert(!ok0 || stride > 0, "ctnn: Conv stride must be positive");
    static_assert(!ok0 || pad >= 0, "ctnn: Conv padding must not be negative");
    static_assert(!ok0 || dilation > 0, "ctnn: Conv dilation must be positive");
    constexpr bool ok1 = ok0 && Out > 0 && K > 0 && stride > 0 && pad >= 0 && dilation > 0;
    static_assert(!ok1 || In::rank == 3,
                  "ctnn: Conv needs a C x H x W input, but its input is a flat vector "
                  "(a Dense layer flattens; put Conv layers before it)");
    constexpr bool ok2 = ok1 && In::rank == 3;
    constexpr int span = dilation * (K - 1) + 1;  // the kernel's extent once dilated
    static_assert(!ok2 || (span <= detail::dim_or_zero<In>(1) + 2 * pad &&
                           span <= detail::dim_or_zero<In>(2) + 2 * pad),
                  "ctnn: Conv kernel (dilated) is larger than its padded input");
    return ok2 && span <= detail::dim_or_zero<In>(1) + 2 * pad &&
           span <= detail::dim_or_zero<In>(2) + 2 * pad;
  }

  template <class In>
  struct bind {
    static constexpr int C = chw<In>::c, H = chw<In>::h, W = chw<In>::w;
    static constexpr int OH = detail::window_out(H, K, stride, pad, dilation);
    static constexpr int OW = detail::window_out(W, K, stride, pad, dilation);
    using input_shape = In;
    using output_shape = Shape<Out, OH, OW>;
    using weight_shape = Shape<Out, C, K, K>;
    using bias_shape = Shape<Out>;
    static constexpr std::size_t in_size = In::size, out_size = output_shape::size;
    static constexpr std::size_t weight_count = weight_shape::size, bias_count = Out;
    static constexpr std::size_t flops = 2 * std::size_t(Out) * OH * OW * C * K * K;

    // Input row/column read by output position o and kernel tap k; may fall into the padding.
    static constexpr int in_y(int oy, int ky) { return oy * stride - pad + ky * dilation; }
    static constexpr int in_x(int ox, int kx) { return ox * stride - pad + kx * dilation; }

    template <class T>
    static void forward(const T* w, const T* b, const T* x, T* y, int batch) {
      for (int n = 0; n < batch; ++n)
        for (int o = 0; o < Out; ++o)
          for (int oy = 0; oy < OH; ++oy)
            for (int ox = 0; ox < OW; ++ox) {
              double acc = b[o];
              for (int c = 0; c < C; ++c)
                for (int ky = 0; ky < K; ++ky) {
                  const int iy = in_y(oy, ky);
                  if (iy < 0 || iy >= H) continue;
                  for (int kx = 0; kx < K; ++kx) {
                    const int ix = in_x(ox, kx);
                    if (ix < 0 || ix >= W) continue;
                    acc += double(w[((o * C + c) * K + ky) * K + kx]) *
                           double(x[((std::size_t(n) * C + c) * H + iy) * W + ix]);
                  }
                }
              y[((std::size_t(n) * Out + o) * OH + oy) * OW + ox] = T(acc);
            }
    }

    template <class T>
    static void backward(const T* w, const T* x, const T*, const T* dy, T* dx, T* dw, T* db,
                         int batch) {
      std::vector<double> gw(weight_count, 0.0), gb(Out, 0.0);
      std::vector<double> gx(dx ? in_size : 0);
      for (int n = 0; n < batch; ++n) {
        const T* xn = x + std::size_t(n) * in_size;
        const T* dyn = dy + std::size_t(n) * out_size;
        std::fill(gx.begin(), gx.end(), 0.0);
        for (int o = 0; o < Out; ++o)
          for (int oy = 0; oy < OH; ++oy)
            for (int ox = 0; ox < OW; ++ox) {
              const double g = dyn[(o * OH + oy) * OW + ox];
              gb[o] += g;
              for (int c = 0; c < C; ++c)
                for (int ky = 0; ky < K; ++ky) {
                  const int iy = in_y(oy, ky);
                  if (iy < 0 || iy >= H) continue;
                  for (int kx = 0; kx < K; ++kx) {
                    const int ix = in_x(ox, kx);
                    if (ix < 0 || ix >= W) continue;
                    const int wi = ((o * C + c) * K + ky) * K + kx, xi = (c * H + iy) * W + ix;
                    gw[wi] += g * double(xn[xi]);
                    if (dx) gx[xi] += g * double(w[wi]);
                  }
                }
            }
        if (dx)
          for (std::size_t i = 0; i < in_size; ++i) dx[std::size_t(n) * in_size + i] = T(gx[i]);
      }
      for (std::size_t i = 0; i < weight_count; ++i) dw[i] = T(gw[i]);
      for (int o = 0; o < Out; ++o) db[o] = T(gb[o]);
    }
  };
};

}  // namespace ctnn

// Under nvcc the layer's CUDA implementation (its cuda_layer specialisation) comes with it.
#ifdef __CUDACC__
#include "../kernels/conv.cuh"  // nvcc only
#endif
