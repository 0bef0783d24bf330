#pragma once
// Seeded deterministic initialisation into a parameter array laid out by BufferPlan.
// A Conv or Dense followed by ReLU gets He-normal weights (std = sqrt(2 / fan_in)); any other
// gets Xavier-uniform (±sqrt(6 / (fan_in + fan_out))). Biases start at zero.
#include <cstdint>
#include <type_traits>

#include "../core/random.hpp"
#include "../layers/activation.hpp"
#include "plan.hpp"

namespace ctnn {

template <class Net, class T>
void init_parameters(T* params, std::uint64_t seed) {
  using Plan = BufferPlan<Net>;
  for (std::size_t i = 0; i < Plan::param_floats; ++i) params[i] = T(0);
  Random rng(seed);
  Net::for_each_layer([&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    using B = typename Net::template bound_at<i>;
    if constexpr (B::weight_count > 0) {
      using WS = typename B::weight_shape;  // [Out][In...]
      constexpr std::size_t fan_out_units = std::size_t(WS::dims[0]);
      constexpr std::size_t fan_in = B::weight_count / fan_out_units;
      constexpr std::size_t receptive = WS::rank == 4 ? std::size_t(WS::dims[2]) * WS::dims[3] : 1;
      constexpr std::size_t fan_out = fan_out_units * receptive;
      constexpr bool before_relu =
          i + 1 < Net::layer_count &&
          std::is_same_v<typename Net::template layer_at<(i + 1 < Net::layer_count ? i + 1 : i)>, ReLU>;
      T* w = params + Plan::weight_offset[i];
      if constexpr (before_relu) {
        const double stddev = std::sqrt(2.0 / double(fan_in));
        for (std::size_t k = 0; k < B::weight_count; ++k) w[k] = T(stddev * rng.normal());
      } else {
        const double limit = std::sqrt(6.0 / double(fan_in + fan_out));
        for (std::size_t k = 0; k < B::weight_count; ++k) w[k] = T(rng.uniform(-limit, limit));
      }
    }
  });
}

}  // namespace ctnn
