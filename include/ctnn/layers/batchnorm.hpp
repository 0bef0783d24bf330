#pragma once
// BatchNorm: batch normalisation per channel after a convolution (C×H×W input, PyTorch's
// nn.BatchNorm2d) or per feature after a dense layer (flat input of C features, nn.BatchNorm1d).
//
//   training:    y = (x − μ_B) / sqrt(σ²_B + eps) · weight + bias, with μ_B, σ²_B the mean and biased
//                variance of the channel over the batch (and H·W); then, as PyTorch does,
//                running_mean ← (1 − m)·running_mean + m·μ_B,
//                running_var  ← (1 − m)·running_var  + m·σ²_B·M/(M − 1)   (unbiased; M values)
//                num_batches_tracked += 1
//   evaluation:  y = (x − running_mean) / sqrt(running_var + eps) · weight + bias
//
// eps = 1e-5, momentum m = 0.1. weight and bias [C] are parameters (initialised to 1 and 0);
// running_mean [C] (0), running_var [C] (1) and num_batches_tracked (0, an integer) are state, named
// as PyTorch names them so that a weight file loads into an nn.Sequential. A training forward keeps
// μ_B and 1/sqrt(σ²_B + eps) of each channel for backward (the first 2C floats of its saved
// buffer); backward is the full-batch formula, after a training forward:
//   dx = weight/sqrt(σ²_B + eps) / M · (M·dy − Σdy − x̂·Σ(dy·x̂)),  x̂ = (x − μ_B)/sqrt(σ²_B + eps).
// Statistics are accumulated in double on both backends.
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "../core/layer.hpp"
#include "../core/random.hpp"
#include "../core/shape.hpp"

namespace ctnn {

struct BatchNorm : layer_tag {
  static constexpr const char* name = "BatchNorm";
  static constexpr double eps = 1e-5;
  static constexpr double momentum = 0.1;
  static std::string label() { return name; }

  template <class In>
  static constexpr bool check() {
    constexpr bool ok = In::rank == 1 || In::rank == 3;
    static_assert(ok, "ctnn: BatchNorm needs a C x H x W input (BatchNorm2d) or a flat one (BatchNorm1d)");
    return ok;
  }

  template <class In>
  struct bind {
    static constexpr int C = In::dims[0];                                  // channels or features
    static constexpr int S = In::rank == 3 ? In::dims[1] * In::dims[2] : 1;  // values per channel and sample
    using input_shape = In;
    using output_shape = In;
    using weight_shape = Shape<C>;
    using bias_shape = Shape<C>;
    static constexpr std::size_t in_size = In::size, out_size = In::size;
    static constexpr std::size_t weight_count = std::size_t(C), bias_count = std::size_t(C);
    static constexpr std::size_t flops = 4 * In::size;
    static constexpr std::array<StateTensor, 3> state{
        {{"running_mean", std::size_t(C)}, {"running_var", std::size_t(C)}, {"num_batches_tracked", 1, true}}};
    static constexpr std::size_t saved_size = 2 * std::size_t(C);  // μ_B and 1/σ_B per channel (batch ≥ 1)

    template <class T>
    static void init(T* w, T* b, T* state, Random&) {
      for (int c = 0; c < C; ++c) w[c] = T(1), b[c] = T(0), state[c] = T(0), state[C + c] = T(1);
      state[2 * C] = T(0);
    }

    // Values per channel in a batch; training needs at least two (PyTorch: "Expected more than 1 value
    // per channel when training").
    static std::size_t values(int batch) { return std::size_t(batch) * S; }
    static void check_training_batch(int batch) {
      if (values(batch) < 2)
        throw std::invalid_argument("ctnn: BatchNorm in training needs more than one value per channel, got a "
                                    "batch of " + std::to_string(batch) + " on a flat input");
    }
    static std::size_t at(int n, int c, int s) { return (std::size_t(n) * C + std::size_t(c)) * S + std::size_t(s); }

    template <class T>
    static void forward(const ForwardArgs<T>& a) {
      T* running_mean = a.state;
      T* running_var = a.state + C;
      if (a.mode == Mode::eval) {
        for (int c = 0; c < C; ++c) {
          const double inv = 1.0 / std::sqrt(double(running_var[c]) + eps);
          for (int n = 0; n < a.batch; ++n)
            for (int s = 0; s < S; ++s)
              a.y[at(n, c, s)] = T((double(a.x[at(n, c, s)]) - double(running_mean[c])) * inv * double(a.w[c]) +
                                   double(a.b[c]));
        }
        return;
      }
      check_training_batch(a.batch);
      const double M = double(values(a.batch));
      for (int c = 0; c < C; ++c) {
        double sum = 0;
        for (int n = 0; n < a.batch; ++n)
          for (int s = 0; s < S; ++s) sum += double(a.x[at(n, c, s)]);
        const double mean = sum / M;
        double sq = 0;
        for (int n = 0; n < a.batch; ++n)
          for (int s = 0; s < S; ++s) {
            const double d = double(a.x[at(n, c, s)]) - mean;
            sq += d * d;
          }
        const double var = sq / M;
        const double inv = 1.0 / std::sqrt(var + eps);
        a.saved[c] = T(mean);
        a.saved[C + c] = T(inv);
        for (int n = 0; n < a.batch; ++n)
          for (int s = 0; s < S; ++s)
            a.y[at(n, c, s)] = T((double(a.x[at(n, c, s)]) - mean) * inv * double(a.w[c]) + double(a.b[c]));
        running_mean[c] = T((1 - momentum) * double(running_mean[c]) + momentum * mean);
        running_var[c] = T((1 - momentum) * double(running_var[c]) + momentum * var * M / (M - 1));
      }
      a.state[2 * C] += T(1);
    }

    template <class T>
    static void backward(const BackwardArgs<T>& a) {
      const double M = double(values(a.batch));
      for (int c = 0; c < C; ++c) {
        const double mean = double(a.saved[c]), inv = double(a.saved[C + c]);
        double sum_dy = 0, sum_dy_xhat = 0;
        for (int n = 0; n < a.batch; ++n)
          for (int s = 0; s < S; ++s) {
            const double dy = double(a.dy[at(n, c, s)]);
            sum_dy += dy;
            sum_dy_xhat += dy * (double(a.x[at(n, c, s)]) - mean) * inv;
          }
        if (a.dw) a.dw[c] = T(sum_dy_xhat);
        if (a.db) a.db[c] = T(sum_dy);
        if (!a.dx) continue;
        const double k = double(a.w[c]) * inv / M;
        for (int n = 0; n < a.batch; ++n)
          for (int s = 0; s < S; ++s) {
            const double xhat = (double(a.x[at(n, c, s)]) - mean) * inv;
            a.dx[at(n, c, s)] = T(k * (M * double(a.dy[at(n, c, s)]) - sum_dy - xhat * sum_dy_xhat));
          }
      }
    }
  };
};

}  // namespace ctnn

#ifdef __CUDACC__
#include "../kernels/batchnorm.cuh"  // nvcc only
#endif
