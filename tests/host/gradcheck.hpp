#pragma once
// One generic finite-difference gradient check, in double precision, and its two front ends:
//   gradcheck_layer<B>(batch)        B = Layer::bind<In> or Net::bound_at<I>: checks dx, dw, db
//   gradcheck_network<Net>(batch)    a whole HostNetwork<Net, double>: checks every parameter tensor
// Both use the scalar loss ⟨r, y⟩ with a fixed random r, so the analytic gradient is backward(dy = r).
// gradcheck_cross_entropy<Net>(batch) checks the training path instead: the fused ŷ − y gradient
// back-propagated from below the Softmax against finite differences of the real cross-entropy.
//
// Inputs and weights are random and never zero; every input value is distinct (gaps far above h),
// so max pooling's argmax does not move under a perturbation of size h.
//
// Error of one value: |analytic − numeric| / max(1, |analytic|, |numeric|): relative for gradients
// above 1, absolute below, where the central difference's rounding noise (≈ eps·|loss|/h) would
// otherwise dominate the relative error of tiny gradients.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "ctnn/core/random.hpp"
#include "ctnn/network/host_network.hpp"

namespace ctnn::testing {

struct GradcheckOptions {
  double h = 1e-6;
  std::size_t max_per_tensor = 0;  // 0: check every value; else this many, spread at random
  std::uint64_t seed = 42;
};

struct TensorError {
  std::string name;
  std::size_t checked = 0, worst_index = 0;
  double worst = 0, analytic = 0, numeric = 0;  // the worst value and its two gradients
};

struct GradcheckReport {
  std::vector<TensorError> tensors;

  double max_error() const {
    double m = 0;
    for (const auto& t : tensors) m = std::max(m, t.worst);
    return m;
  }
  std::string str() const {
    std::ostringstream s;
    s.precision(3);
    for (const auto& t : tensors)
      s << t.name << ": " << t.checked << " values, max error " << t.worst << " at [" << t.worst_index
        << "] (analytic " << t.analytic << ", numeric " << t.numeric << ")\n";
    return s.str();
  }
};

// A tensor to perturb in place, and its analytic gradient.
struct Tensor {
  std::string name;
  double* values;
  const double* analytic;
  std::size_t count;
};

// THE check: for each chosen value v of each tensor, numeric = (loss(v+h) − loss(v−h)) / 2h, with
// loss() recomputing the scalar loss from the current values.
template <class Loss>
GradcheckReport finite_difference_check(Loss&& loss, const std::vector<Tensor>& tensors,
                                        const GradcheckOptions& opt = {}) {
  GradcheckReport report;
  Random pick(opt.seed ^ 0x5EEDull);
  for (const Tensor& t : tensors) {
    TensorError e;
    e.name = t.name;
    std::vector<std::size_t> indices;
    if (opt.max_per_tensor == 0 || t.count <= opt.max_per_tensor) {
      for (std::size_t i = 0; i < t.count; ++i) indices.push_back(i);
    } else {  // first, last, and the rest at random
      indices = {0, t.count - 1};
      while (indices.size() < opt.max_per_tensor) indices.push_back(pick.below(t.count));
    }
    for (std::size_t i : indices) {
      const double saved = t.values[i];
      t.values[i] = saved + opt.h;
      const double up = loss();
      t.values[i] = saved - opt.h;
      const double down = loss();
      t.values[i] = saved;
      const double numeric = (up - down) / (2 * opt.h), analytic = t.analytic[i];
      const double err =
          std::abs(analytic - numeric) / std::max({1.0, std::abs(analytic), std::abs(numeric)});
      if (e.checked == 0 || err > e.worst) e.worst = err, e.worst_index = i, e.analytic = analytic, e.numeric = numeric;
      ++e.checked;
    }
    report.tensors.push_back(e);
  }
  return report;
}

// Values with magnitudes spread evenly over [lo, hi] (jittered strata, so all distinct with gaps of
// at least (hi − lo)/(2n)), random signs, in random order.
inline std::vector<double> random_distinct(Random& rng, std::size_t n, double lo = 0.1, double hi = 1.0) {
  std::vector<double> v(n);
  for (std::size_t k = 0; k < n; ++k)
    v[k] = lo + (hi - lo) * (double(k) + rng.uniform(0.25, 0.75)) / double(n);
  for (std::size_t i = n; i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
  for (double& x : v) x = rng.uniform() < 0.5 ? -x : x;
  return v;
}

inline double dot(const std::vector<double>& a, const double* b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// A single bound layer: dx always, dw and db when the layer has parameters.
template <class B>
GradcheckReport gradcheck_layer(int batch, const GradcheckOptions& opt = {}) {
  Random rng(opt.seed);
  const std::size_t nx = B::in_size * std::size_t(batch), ny = B::out_size * std::size_t(batch);
  std::vector<double> x = random_distinct(rng, nx);
  std::vector<double> w = random_distinct(rng, B::weight_count), b = random_distinct(rng, B::bias_count);
  std::vector<double> r = random_distinct(rng, ny);
  std::vector<double> y(ny), dx(nx), dw(B::weight_count), db(B::bias_count);

  B::forward(w.data(), b.data(), x.data(), y.data(), batch);
  B::backward(w.data(), x.data(), y.data(), r.data(), dx.data(), B::weight_count ? dw.data() : nullptr,
              B::bias_count ? db.data() : nullptr, batch);

  auto loss = [&] {
    B::forward(w.data(), b.data(), x.data(), y.data(), batch);
    return dot(r, y.data());
  };
  std::vector<Tensor> tensors{{"dx", x.data(), dx.data(), nx}};
  if (B::weight_count) tensors.push_back({"dw", w.data(), dw.data(), w.size()});
  if (B::bias_count) tensors.push_back({"db", b.data(), db.data(), b.size()});
  return finite_difference_check(loss, tensors, opt);
}

// Random input (distinct values in ±[0.1, 1]) and the network's seeded initial parameters, except
// that the biases (zero at initialisation) are made random too so that they are never zero.
template <class Net>
std::vector<double> prepare_network(HostNetwork<Net, double>& net, Random& rng, int batch) {
  using plan = BufferPlan<Net>;
  for (std::size_t i = 0; i < Net::layer_count; ++i)
    for (std::size_t k = 0; k < plan::bias_count[i]; ++k) net.bias(i)[k] = rng.uniform(-0.1, 0.1);
  return random_distinct(rng, plan::act_size[0] * std::size_t(batch));
}

template <class Net>
std::vector<Tensor> parameter_tensors(HostNetwork<Net, double>& net, const std::vector<double>& grads) {
  using plan = BufferPlan<Net>;
  std::vector<Tensor> tensors;
  for (std::size_t i = 0; i < Net::layer_count; ++i) {
    const std::string layer = "layers." + std::to_string(i);
    if (plan::weight_count[i])
      tensors.push_back({layer + ".weight", net.weight(i), grads.data() + plan::weight_offset[i],
                         plan::weight_count[i]});
    if (plan::bias_count[i])
      tensors.push_back({layer + ".bias", net.bias(i), grads.data() + plan::bias_offset[i], plan::bias_count[i]});
  }
  return tensors;
}

// A whole network, loss ⟨r, output⟩: every parameter tensor of every layer.
template <class Net>
GradcheckReport gradcheck_network(int batch, const GradcheckOptions& opt = {}) {
  using plan = BufferPlan<Net>;
  Random rng(opt.seed);
  HostNetwork<Net, double> net(batch, opt.seed);
  const std::vector<double> x = prepare_network(net, rng, batch);
  const std::vector<double> r = random_distinct(rng, plan::act_size[Net::layer_count] * std::size_t(batch));

  net.forward(x.data(), batch);
  net.backward(r.data(), batch);
  const std::vector<double> grads = net.grads();

  auto loss = [&] { return dot(r, net.forward(x.data(), batch)); };
  return finite_difference_check(loss, parameter_tensors(net, grads), opt);
}

// The training path: analytic gradient from the fused (softmax(z) − onehot)/batch on the logits,
// back-propagated from layer L-2; numeric gradient from the real mean cross-entropy −log p_label of
// the network's Softmax output.
template <class Net>
GradcheckReport gradcheck_cross_entropy(int batch, const GradcheckOptions& opt = {}) {
  constexpr std::size_t L = Net::layer_count;
  constexpr int classes = int(Net::output_shape::size);
  Random rng(opt.seed);
  HostNetwork<Net, double> net(batch, opt.seed);
  const std::vector<double> x = prepare_network(net, rng, batch);
  std::vector<int> labels(static_cast<std::size_t>(batch));
  for (int& l : labels) l = int(rng.below(classes));

  // The fused gradient of the mean cross-entropy with respect to the logits: (p − onehot(label)) / batch.
  const double* p = net.forward(x.data(), batch);
  std::vector<double> dlogits(p, p + std::size_t(batch) * classes);
  for (int n = 0; n < batch; ++n) dlogits[std::size_t(n) * classes + std::size_t(labels[std::size_t(n)])] -= 1;
  for (double& d : dlogits) d /= batch;
  net.backward(dlogits.data(), batch, L - 2);
  const std::vector<double> grads = net.grads();

  auto loss = [&] {
    const double* p = net.forward(x.data(), batch);
    double sum = 0;
    for (int n = 0; n < batch; ++n) sum -= std::log(p[std::size_t(n) * classes + labels[std::size_t(n)]]);
    return sum / batch;
  };
  return finite_difference_check(loss, parameter_tensors(net, grads), opt);
}

}  // namespace ctnn::testing
