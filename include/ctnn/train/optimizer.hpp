#pragma once
// What an optimizer type provides, and the host loop that runs one over a parameter block.
//
// An optimizer is a type (ctnn::Sgd, ctnn::Adam, ctnn::AdamW) with its hyperparameters in a run-time
// `Options`. The trainer owns the state (state_slots arrays of n floats, back to back, starting at
// zero) and, once per step, computes on the host the per-step record `hyper(options, lr, t)` (t: the
// 1-based count of steps including this one). The update of one element, `update`, is one
// CTNN_HOST_DEVICE function shared by the host loop below and the fused CUDA kernel
// (kernels/optimizer.cuh), so both backends run the same arithmetic, rounded the same way.
//
//   struct MyOptimizer {
//     struct Options { ... };
//     static constexpr const char* name = "MyOptimizer";
//     static constexpr std::size_t state_slots = ...;                 // state floats per parameter
//     static constexpr std::array<const char*, state_slots> state_names{...};
//     static constexpr std::size_t hyper_count = ...;                 // floats of the per-step record
//     static void validate(const Options&);                           // throws "ctnn: ..."
//     static std::array<float, hyper_count> hyper(const Options&, float lr, std::int64_t t);
//     CTNN_HOST_DEVICE static void update(float& p, float g, float* s, std::size_t stride, const float* h);
//   };
//
// Parameter blocks have zero padding between tensors (zero parameter, zero gradient, zero state):
// every update must map that to zero again.
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/host_device.hpp"

namespace ctnn {

// The optimizer interface above, as a concept.
template <class Opt>
concept Optimizer = requires(const typename Opt::Options& o, float& p, float* s, const float* h) {
  { Opt::name } -> std::convertible_to<const char*>;
  { Opt::state_slots } -> std::convertible_to<std::size_t>;
  { Opt::hyper_count } -> std::convertible_to<std::size_t>;
  requires Opt::state_names.size() == Opt::state_slots;
  Opt::validate(o);
  { Opt::hyper(o, 0.f, std::int64_t{1}) } -> std::same_as<std::array<float, Opt::hyper_count>>;
  Opt::update(p, 0.f, s, std::size_t{1}, h);
};

namespace detail {
// Checks shared by the optimizers' hyper(): a finite lr >= 0 and a step count t >= 1.
inline void check_step_args(const char* optimizer, float lr, std::int64_t t) {
  if (!(std::isfinite(lr) && lr >= 0))
    throw std::invalid_argument(std::string("ctnn: ") + optimizer +
                                ": the learning rate must be finite and >= 0, got " + std::to_string(lr));
  if (t < 1)
    throw std::invalid_argument(std::string("ctnn: ") + optimizer +
                                ": the step count t is 1-based (the step being taken), got " + std::to_string(t));
}
}  // namespace detail

// One optimizer step on the host over n parameter floats: p[i] and its state (state[k·n + i] for
// slot k) are updated in place from g[i] and the step's record `hyper` (Opt::hyper(...).data()).
template <Optimizer Opt>
void optimizer_step(float* p, const float* g, float* state, std::size_t n, const float* hyper) {
  for (std::size_t i = 0; i < n; ++i) Opt::update(p[i], g[i], state + i, n, hyper);
}

}  // namespace ctnn
