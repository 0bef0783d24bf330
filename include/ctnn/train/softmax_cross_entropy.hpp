#pragma once
// Softmax cross-entropy, torch.nn.CrossEntropyLoss(label_smoothing=ε, reduction='mean') applied to the
// logits z, the input of the network's final Softmax layer. With class labels the target
// distribution is q = (1 − ε)·onehot(label) + ε/K (K = width); with float targets (class
// probabilities, as torch accepts) q = (1 − ε)·t + ε/K. Per sample, in double:
//   loss = Σ_i q_i·(lse(z) − z_i),   lse(z) = max z + log Σ exp(z − max z)
//   d loss / d z_i = p_i·Σq − q_i    (p = softmax(z); Σq = 1 for labels)
// and the gradient written is that divided by the batch (the batch mean), the fused ŷ − y that lets
// training skip the Softmax layer's own backward: grad_layer is the layer below the Softmax.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../layers/softmax.hpp"
#include "loss_support.hpp"

namespace ctnn {

struct SoftmaxCrossEntropy {
  struct Options {
    float label_smoothing = 0.f;  // ε in [0, 1]
  };
  static constexpr const char* name = "SoftmaxCrossEntropy";

  // The network must end in Softmax with at least one layer before it; one message per mistake.
  template <class Net>
  static constexpr bool fits() {
    constexpr std::size_t L = Net::layer_count;
    constexpr bool ends_in_softmax =
        L >= 1 && std::is_same_v<typename Net::template layer_at<(L >= 1 ? L - 1 : 0)>, Softmax>;
    static_assert(!Net::valid || ends_in_softmax,
                  "ctnn: SoftmaxCrossEntropy needs a network whose last layer is ctnn::Softmax "
                  "(for a network without one, use ctnn::Mse)");
    static_assert(!Net::valid || !ends_in_softmax || L >= 2,
                  "ctnn: SoftmaxCrossEntropy needs at least one layer before the Softmax (it takes its logits)");
    return Net::valid && ends_in_softmax && L >= 2;
  }
  template <class Net>
  static constexpr std::size_t grad_layer = Net::layer_count - 2;

  static void validate(const Options& o) {
    if (!(o.label_smoothing >= 0.f && o.label_smoothing <= 1.f))
      throw std::invalid_argument("ctnn: SoftmaxCrossEntropy label smoothing must be in [0, 1], got " +
                                  std::to_string(o.label_smoothing));
  }

  // See train/loss_support.hpp; probs (unless null) receives softmax(z). Labels take precedence
  // over targets when both are given.
  static void host(const Options& o, const float* z, const std::int32_t* labels, const float* targets, int batch,
                   int width, float* grad, float* loss, std::int32_t* correct, float* probs) {
    validate(o);
    detail::check_loss_args(name, z, batch, width, loss, correct);
    if (!labels && !targets) detail::throw_no_targets(name);
    const double eps = o.label_smoothing, uniform = eps / width;
    for (int n = 0; n < batch; ++n) {
      const std::size_t row = std::size_t(n) * width;
      const float* zn = z + row;
      const int label = labels ? labels[n] : -1;
      if (labels) detail::check_label(name, label, n, width);
      const int top = detail::first_argmax(zn, width);
      const double zmax = zn[top];
      double sum = 0;
      for (int i = 0; i < width; ++i) sum += std::exp(double(zn[i]) - zmax);
      const double lse = zmax + std::log(sum);
      auto target = [&](int i) {  // q_i
        const double t = labels ? (i == label ? 1.0 : 0.0) : double(targets[row + i]);
        return (1 - eps) * t + uniform;
      };
      double total = 0, qsum = 0;
      for (int i = 0; i < width; ++i) {
        const double q = target(i);
        total += q * (lse - double(zn[i]));
        qsum += q;
      }
      if (labels) qsum = 1;
      loss[n] = float(total);
      correct[n] = labels && top == label ? 1 : 0;
      for (int i = 0; i < width; ++i) {
        const double p = std::exp(double(zn[i]) - zmax) / sum;
        if (probs) probs[row + i] = float(p);
        if (grad) grad[row + i] = float((p * qsum - target(i)) / batch);
      }
    }
  }
};

}  // namespace ctnn
