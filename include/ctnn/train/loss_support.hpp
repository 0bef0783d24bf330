#pragma once
// Shared by the loss types (train/softmax_cross_entropy.hpp, train/mse.hpp): the loss interface in
// words, and the host reference's argument checks and argmax.
//
//   struct MyLoss {
//     struct Options { ... };
//     static constexpr const char* name = "MyLoss";
//     template <class Net> static constexpr bool fits();               // static_asserts "ctnn: ..."
//     template <class Net> static constexpr std::size_t grad_layer = ...; // its output gets the gradient
//     static void validate(const Options&);
//     static void host(const Options&, const float* z, const std::int32_t* labels, const float* targets,
//                      int batch, int width, float* grad, float* loss, std::int32_t* correct, float* probs);
//   };
//
// z is grad_layer's output [batch][width]; labels [batch] class indices (or null), targets
// [batch][width] floats (or null). loss[n] is sample n's loss (their mean is the batch loss),
// correct[n] whether argmax(z_n) is the label (0 without labels), grad (unless null) the gradient of
// the batch-mean loss with respect to z. The CUDA kernels are in kernels/loss.cuh.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace ctnn::detail {

// Index of the largest of v[0..n); ties go to the lowest index (torch.argmax does the same).
inline int first_argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

inline void check_loss_args(const char* loss, const float* z, int batch, int width, const float* out_loss,
                            const std::int32_t* correct) {
  auto require = [loss](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(std::string("ctnn: ") + loss + ": " + what);
  };
  require(batch >= 1 && width >= 1, "needs batch >= 1 and width >= 1, got " + std::to_string(batch) + " and " +
                                        std::to_string(width));
  require(z != nullptr && out_loss != nullptr && correct != nullptr, "z, loss and correct must not be null");
}

// A loss given neither labels nor targets. Called in the loss's own body (`if (!labels && !targets)`),
// where the compiler sees that this path ends, so that it does not warn about reading null targets.
[[noreturn]] inline void throw_no_targets(const char* loss) {
  throw std::invalid_argument(std::string("ctnn: ") + loss + ": needs class labels or float targets, got neither");
}

inline void check_label(const char* loss, std::int32_t label, int sample, int width) {
  if (label < 0 || label >= width)
    throw std::out_of_range(std::string("ctnn: ") + loss + ": label " + std::to_string(label) + " of sample " +
                            std::to_string(sample) + " is outside 0.." + std::to_string(width - 1));
}

}  // namespace ctnn::detail
