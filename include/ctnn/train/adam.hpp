#pragma once
// Adam and AdamW, torch.optim.Adam / torch.optim.AdamW (amsgrad=False, maximize=False) in the
// arithmetic order of torch's _single_tensor_adam, so that results agree with torch to float rounding:
//   Adam:  g ← g + λ·p                     (weight decay as L2, skipped when λ = 0)
//   AdamW: p ← p·(1 − lr·λ)                (decoupled decay)
//   m ← m + (1−β1)·(g − m)                 (exp_avg.lerp_(g, 1−β1); the other lerp form when 1−β1 ≥ ½)
//   v ← β2·v + (1−β2)·g·g                  (exp_avg_sq.mul_(β2).addcmul_(g, g, 1−β2))
//   denom ← √v / √(1−β2^t) + ε
//   p ← p − (lr / (1−β1^t))·(m / denom)
// The bias corrections and step size are computed in double on the host once per step (as torch does
// in Python) and rounded to float in the per-step record.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "optimizer.hpp"

namespace ctnn {

namespace detail {

template <bool Decoupled>
struct AdamFamily {
  static constexpr std::size_t state_slots = 2;
  static constexpr std::array<const char*, state_slots> state_names{"exp_avg", "exp_avg_sq"};
  // The per-step record: {1−β1, β2, 1−β2, lr/(1−β1^t), √(1−β2^t), ε, L2 λ (Adam), 1 − lr·λ (AdamW)}.
  static constexpr std::size_t hyper_count = 8;

  template <class Options>
  static void check(const char* name, const Options& o) {
    auto require = [name](bool ok, const std::string& what) {
      if (!ok) throw std::invalid_argument(std::string("ctnn: ") + name + " " + what);
    };
    require(std::isfinite(o.beta1) && o.beta1 >= 0 && o.beta1 < 1,
            "beta1 must be in [0, 1), got " + std::to_string(o.beta1));
    require(std::isfinite(o.beta2) && o.beta2 >= 0 && o.beta2 < 1,
            "beta2 must be in [0, 1), got " + std::to_string(o.beta2));
    require(std::isfinite(o.eps) && o.eps >= 0, "eps must be finite and >= 0, got " + std::to_string(o.eps));
    require(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
            "weight decay must be finite and >= 0, got " + std::to_string(o.weight_decay));
  }

  template <class Options>
  static std::array<float, hyper_count> record(const char* name, const Options& o, float lr, std::int64_t t) {
    check_step_args(name, lr, t);
    const double b1 = o.beta1, b2 = o.beta2, step = double(t);
    const double bias_correction1 = 1 - std::pow(b1, step);
    const double bias_correction2 = 1 - std::pow(b2, step);
    const double step_size = double(lr) / bias_correction1;
    const double wd = o.weight_decay;
    return {float(1 - b1),  float(b2), float(1 - b2), float(step_size), float(std::sqrt(bias_correction2)),
            o.eps,          Decoupled ? 0.f : o.weight_decay,
            Decoupled ? float(1 - double(lr) * wd) : 1.f};
  }

  CTNN_HOST_DEVICE static void update(float& p, float g, float* s, std::size_t stride, const float* h) {
    const float w = h[0], b2 = h[1], one_minus_b2 = h[2], step_size = h[3], bc2_sqrt = h[4], eps = h[5];
    if constexpr (Decoupled) {
      p = rn::mul(p, h[7]);
    } else {
      if (h[6] != 0.f) g = rn::add(g, rn::mul(h[6], p));
    }
    float& m = s[0];
    float& v = s[stride];
    // torch's lerp: start + w·(end − start) for w < ½, end − (end − start)·(1 − w) otherwise.
    m = w < 0.5f ? rn::add(m, rn::mul(w, rn::sub(g, m))) : rn::sub(g, rn::mul(rn::sub(g, m), rn::sub(1.f, w)));
    v = rn::add(rn::mul(v, b2), rn::mul(rn::mul(one_minus_b2, g), g));
    const float denom = rn::add(rn::div(rn::sqrt(v), bc2_sqrt), eps);
    p = rn::sub(p, rn::mul(step_size, rn::div(m, denom)));
  }
};

}  // namespace detail

// torch.optim.Adam: weight decay is an L2 term added to the gradient.
struct Adam : detail::AdamFamily<false> {
  struct Options {
    float beta1 = 0.9f, beta2 = 0.999f;
    float eps = 1e-8f;
    float weight_decay = 0.f;
  };
  static constexpr const char* name = "Adam";
  static void validate(const Options& o) { check(name, o); }
  static std::array<float, hyper_count> hyper(const Options& o, float lr, std::int64_t t) {
    return record(name, o, lr, t);
  }
};

// torch.optim.AdamW: decoupled weight decay p ← p·(1 − lr·λ) before the Adam step; torch's defaults.
struct AdamW : detail::AdamFamily<true> {
  struct Options {
    float beta1 = 0.9f, beta2 = 0.999f;
    float eps = 1e-8f;
    float weight_decay = 1e-2f;
  };
  static constexpr const char* name = "AdamW";
  static void validate(const Options& o) {
    check(name, o);
  }
  static std::array<float, hyper_count> hyper(const Options& o, float lr, std::int64_t t) {
    return record(name, o, lr, t);
  }
};

}  // namespace ctnn
