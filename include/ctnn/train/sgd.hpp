#pragma once
// Stochastic gradient descent, torch.optim.SGD(lr, momentum, dampening=0, nesterov, weight_decay):
//   g ← g + λ·p              (weight decay λ as an L2 term, skipped when λ = 0)
//   b ← μ·b + g              (momentum buffer; torch starts it at g, which μ·0 + g is)
//   g ← g + μ·b if Nesterov, else g ← b
//   p ← p − lr·g
// ctnn::Sgd is that as an optimizer type (train/optimizer.hpp), run by the host loop and the fused
// CUDA kernel (kernels/optimizer.cuh). sgd_momentum_step and SgdMomentum below are the trainers'
// earlier interface (the same arithmetic without Nesterov), kept until they move to ctnn::Sgd.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "optimizer.hpp"

namespace ctnn {

struct Sgd {
  struct Options {
    float momentum = 0.9f;      // μ; 0 is plain SGD
    bool nesterov = false;      // needs μ > 0, as in torch
    float weight_decay = 0.f;   // λ
  };
  static constexpr const char* name = "Sgd";
  static constexpr std::size_t state_slots = 1;
  static constexpr std::array<const char*, state_slots> state_names{"momentum_buffer"};
  // The per-step record: {lr, μ, λ, nesterov ? 1 : 0}.
  static constexpr std::size_t hyper_count = 4;

  static void validate(const Options& o) {
    if (!(std::isfinite(o.momentum) && o.momentum >= 0))
      throw std::invalid_argument("ctnn: Sgd momentum must be finite and >= 0, got " + std::to_string(o.momentum));
    if (!(std::isfinite(o.weight_decay) && o.weight_decay >= 0))
      throw std::invalid_argument("ctnn: Sgd weight decay must be finite and >= 0, got " +
                                  std::to_string(o.weight_decay));
    if (o.nesterov && !(o.momentum > 0))
      throw std::invalid_argument("ctnn: Sgd with Nesterov momentum needs a momentum > 0");
  }

  static std::array<float, hyper_count> hyper(const Options& o, float lr, std::int64_t t) {
    detail::check_step_args(name, lr, t);
    return {lr, o.momentum, o.weight_decay, o.nesterov ? 1.f : 0.f};
  }

  CTNN_HOST_DEVICE static void update(float& p, float g, float* s, std::size_t stride, const float* h) {
    (void)stride;
    const float lr = h[0], mu = h[1], wd = h[2];
    if (wd != 0.f) g = rn::add(g, rn::mul(wd, p));
    float& b = s[0];
    b = rn::add(rn::mul(mu, b), g);
    g = h[3] != 0.f ? rn::add(g, rn::mul(mu, b)) : b;
    p = rn::sub(p, rn::mul(lr, g));
  }
};

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
