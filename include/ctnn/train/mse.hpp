#pragma once
// Mean squared error, torch.nn.MSELoss(reduction='mean') over batch × width, against one-hot class
// labels or against float targets t. Per sample, in double:
//   loss = Σ_i (z_i − t_i)² / width      (so the mean over samples is torch's mean over all elements)
//   d(batch-mean loss) / d z_i = 2·(z_i − t_i) / (batch·width)
// z is the network's output (grad_layer is the last layer): a network need not end in Softmax, and
// when it does, the gradient goes through the Softmax layer's own backward.
#include <cstddef>
#include <cstdint>

#include "loss_support.hpp"

namespace ctnn {

struct Mse {
  struct Options {};
  static constexpr const char* name = "Mse";

  template <class Net>
  static constexpr bool fits() {
    static_assert(!Net::valid || Net::layer_count >= 1, "ctnn: Mse needs a network with at least one layer");
    return Net::valid && Net::layer_count >= 1;
  }
  template <class Net>
  static constexpr std::size_t grad_layer = Net::layer_count - 1;

  static void validate(const Options&) {}

  // See train/loss_support.hpp; probs is not used (pass null). Labels take precedence over targets
  // when both are given.
  static void host(const Options&, const float* z, const std::int32_t* labels, const float* targets, int batch,
                   int width, float* grad, float* loss, std::int32_t* correct, float* /*probs*/) {
    detail::check_loss_args(name, z, batch, width, loss, correct);
    if (!labels && !targets) detail::throw_no_targets(name);
    const double scale = 2.0 / (double(batch) * width);
    for (int n = 0; n < batch; ++n) {
      const std::size_t row = std::size_t(n) * width;
      const int label = labels ? labels[n] : -1;
      if (labels) detail::check_label(name, label, n, width);
      double total = 0;
      for (int i = 0; i < width; ++i) {
        const double t = labels ? (i == label ? 1.0 : 0.0) : double(targets[row + i]);
        const double d = double(z[row + i]) - t;
        total += d * d;
        if (grad) grad[row + i] = float(scale * d);
      }
      loss[n] = float(total / width);
      correct[n] = labels && detail::first_argmax(z + row, width) == label ? 1 : 0;
    }
  }
};

}  // namespace ctnn
