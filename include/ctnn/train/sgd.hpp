#pragma once
// Stochastic gradient descent with momentum, PyTorch's convention (torch.optim.SGD, no dampening,
// no Nesterov; weight decay λ as an L2 term added to the gradient):
//   g ← g + λ·p
//   v ← μ·v + g
//   p ← p − lr·v
// The CUDA backend's fused update implements exactly this formula. It runs over all
// BufferPlan::param_floats floats; the alignment padding between tensors has zero gradient, so it
// stays zero.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace ctnn {

// One step over n floats: velocity and params are updated in place.
template <class T>
void sgd_momentum_step(T* params, const T* grads, T* velocity, std::size_t n, T learning_rate,
                       T momentum, T weight_decay = T(0)) {
  for (std::size_t i = 0; i < n; ++i) {
    const T g = grads[i] + weight_decay * params[i];
    velocity[i] = momentum * velocity[i] + g;
    params[i] -= learning_rate * velocity[i];
  }
}

// The optimizer state (one velocity per parameter float, starting at zero) and its step.
template <class T>
class SgdMomentum {
 public:
  explicit SgdMomentum(std::size_t size) : velocity_(size, T(0)) {}

  void step(std::vector<T>& params, const std::vector<T>& grads, T learning_rate, T momentum,
            T weight_decay = T(0)) {
    if (params.size() != velocity_.size() || grads.size() != velocity_.size())
      throw std::invalid_argument("ctnn: SGD step on " + std::to_string(params.size()) +
                                  " parameters and " + std::to_string(grads.size()) +
                                  " gradients, expected " + std::to_string(velocity_.size()) +
                                  " of each");
    sgd_momentum_step(params.data(), grads.data(), velocity_.data(), velocity_.size(),
                      learning_rate, momentum, weight_decay);
  }
  void reset() { velocity_.assign(velocity_.size(), T(0)); }
  const std::vector<T>& velocity() const { return velocity_; }

 private:
  std::vector<T> velocity_;
};

}  // namespace ctnn
