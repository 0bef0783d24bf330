#pragma once
// A finite-difference check of one bound layer in the full form of core/layer.hpp (mode, state,
// saved data, random stream), in double: loss ⟨r, y⟩ with r fixed, every forward from the same
// initial state and with the same rng_key, so a training-mode layer sees fixed randomness (a fixed
// dropout mask) and its batch statistics are recomputed under each perturbation.
#include <vector>

#include "ctnn/core/layer.hpp"
#include "ctnn/network/init.hpp"
#include "gradcheck.hpp"

namespace ctnn::testing {

template <class B>
GradcheckReport gradcheck_full_layer(int batch, Mode mode, std::uint64_t rng_key = 7,
                                     const GradcheckOptions& opt = {}) {
  Random rng(opt.seed);
  const std::size_t nx = B::in_size * std::size_t(batch), ny = B::out_size * std::size_t(batch);
  std::vector<double> x = random_distinct(rng, nx);
  std::vector<double> w = random_distinct(rng, B::weight_count), b = random_distinct(rng, B::bias_count);
  std::vector<double> r = random_distinct(rng, ny);
  std::vector<double> state0(state_count_of<B>()), state, saved(saved_size_of<B>() * std::size_t(batch));
  std::vector<double> y(ny), dx(nx), dw(B::weight_count), db(B::bias_count);
  for (double& s : state0) s = rng.uniform(0.5, 1.5);  // e.g. running statistics; positive

  auto forward = [&] {
    state = state0;
    ForwardArgs<double> a;
    a.w = w.data(), a.b = b.data(), a.state = state.data(), a.x = x.data(), a.y = y.data();
    a.saved = saved.data(), a.batch = batch, a.mode = mode, a.rng_key = rng_key;
    layer_forward<B>(a);
    return dot(r, y.data());
  };
  forward();
  BackwardArgs<double> g;
  g.w = w.data(), g.state = state.data(), g.x = x.data(), g.y = y.data(), g.dy = r.data(), g.saved = saved.data();
  g.dx = dx.data(), g.dw = B::weight_count ? dw.data() : nullptr, g.db = B::bias_count ? db.data() : nullptr;
  g.batch = batch;
  layer_backward<B>(g);

  std::vector<Tensor> tensors{{"dx", x.data(), dx.data(), nx}};
  if (B::weight_count) tensors.push_back({"dw", w.data(), dw.data(), w.size()});
  if (B::bias_count) tensors.push_back({"db", b.data(), db.data(), b.size()});
  return finite_difference_check(forward, tensors, opt);
}

}  // namespace ctnn::testing
