// The optimizer types (train/sgd.hpp, train/adam.hpp) run by the host loop (train/optimizer.hpp),
// against torch.optim's documented algorithms written out here in double: SGD with momentum,
// Nesterov, weight decay and none; Adam with L2 weight decay; AdamW's decoupled decay; several steps
// with a changing learning rate, zero padding that must stay exactly zero, the per-step records and
// the option checks. (test_torch_reference.cpp compares with numbers from PyTorch itself.)
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "ctnn/core/random.hpp"
#include "ctnn/train/adam.hpp"
#include "ctnn/train/sgd.hpp"

using namespace ctnn;
using Catch::Contains;

static_assert(Optimizer<Sgd> && Optimizer<Adam> && Optimizer<AdamW>);
static_assert(Sgd::state_slots == 1 && Adam::state_slots == 2 && AdamW::state_slots == 2);

namespace {

constexpr std::size_t n = 9, pad_at = 4, pad = 2;  // floats 4 and 5 are padding between two tensors
const float lrs[6] = {0.1f, 0.05f, 0.02f, 0.08f, 0.01f, 0.03f};

std::vector<float> values(std::uint64_t seed, double lo = -1, double hi = 1) {
  Random rng(seed);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i >= pad_at && i < pad_at + pad ? 0.f : float(rng.uniform(lo, hi));
  return v;
}

// Runs `steps` steps of Opt through optimizer_step; returns the parameters and the state.
template <class Opt>
std::pair<std::vector<float>, std::vector<float>> run(const typename Opt::Options& o, int steps) {
  Opt::validate(o);
  std::vector<float> p = values(1), state(Opt::state_slots * n, 0.f);
  for (int k = 0; k < steps; ++k) {
    const std::vector<float> g = values(100 + k);
    const auto h = Opt::hyper(o, lrs[k], k + 1);
    optimizer_step<Opt>(p.data(), g.data(), state.data(), n, h.data());
  }
  return {p, state};
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double rel = 2e-6) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(double(got[i]) == Approx(want[i]).epsilon(rel).margin(1e-7));
  }
}

void check_padding_zero(const std::vector<float>& p, const std::vector<float>& state) {
  for (std::size_t i = pad_at; i < pad_at + pad; ++i) {
    CHECK(p[i] == 0.f);
    for (std::size_t k = 0; k < state.size() / n; ++k) CHECK(state[k * n + i] == 0.f);
  }
}

// torch.optim.SGD's algorithm (dampening 0), in double: the buffer starts as a copy of the first
// gradient.
std::pair<std::vector<double>, std::vector<double>> sgd_reference(double mu, bool nesterov, double wd, int steps) {
  const std::vector<float> p0 = values(1);
  std::vector<double> p(p0.begin(), p0.end()), buf(n, 0.0);
  for (int k = 0; k < steps; ++k) {
    const std::vector<float> g0 = values(100 + k);
    for (std::size_t i = 0; i < n; ++i) {
      double g = g0[i];
      if (wd != 0) g += wd * p[i];
      if (mu != 0) {
        buf[i] = k == 0 ? g : mu * buf[i] + g;
        g = nesterov ? g + mu * buf[i] : buf[i];
      }
      p[i] -= double(lrs[k]) * g;
    }
  }
  return {p, buf};
}

// torch.optim.Adam / AdamW's algorithm (amsgrad off), in double.
std::pair<std::vector<double>, std::vector<double>> adam_reference(double b1, double b2, double eps, double wd,
                                                                   bool decoupled, int steps) {
  const std::vector<float> p0 = values(1);
  std::vector<double> p(p0.begin(), p0.end()), m(n, 0.0), v(n, 0.0);
  for (int k = 0; k < steps; ++k) {
    const std::vector<float> g0 = values(100 + k);
    const double lr = lrs[k], t = k + 1;
    for (std::size_t i = 0; i < n; ++i) {
      double g = g0[i];
      if (decoupled) p[i] *= 1 - lr * wd;
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(b1, t)), v_hat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  std::vector<double> state = m;
  state.insert(state.end(), v.begin(), v.end());
  return {p, state};
}

}  // namespace

TEST_CASE("Sgd matches torch.optim.SGD: momentum, Nesterov, weight decay, plain", "[optimizer][sgd]") {
  struct Case {
    Sgd::Options o;
    const char* what;
  };
  for (const Case& c : {Case{{0.9f, false, 0.f}, "momentum 0.9"}, Case{{0.8f, true, 0.f}, "Nesterov 0.8"},
                        Case{{0.9f, false, 1e-2f}, "momentum, weight decay 1e-2"},
                        Case{{0.7f, true, 5e-2f}, "Nesterov, weight decay 5e-2"},
                        Case{{0.f, false, 1e-2f}, "no momentum, weight decay 1e-2"}}) {
    INFO(c.what);
    const auto [p, state] = run<Sgd>(c.o, 6);
    const auto [want_p, want_buf] = sgd_reference(c.o.momentum, c.o.nesterov, c.o.weight_decay, 6);
    check_close(p, want_p);
    if (c.o.momentum != 0) check_close(state, want_buf);
    check_padding_zero(p, state);
  }
}

TEST_CASE("Adam matches torch.optim.Adam: bias correction, L2 weight decay", "[optimizer][adam]") {
  struct Case {
    Adam::Options o;
    const char* what;
  };
  for (const Case& c : {Case{{}, "defaults"}, Case{{0.8f, 0.99f, 1e-6f, 0.f}, "betas (0.8, 0.99), eps 1e-6"},
                        Case{{0.9f, 0.999f, 1e-8f, 0.1f}, "weight decay 0.1"},
                        Case{{0.3f, 0.9f, 1e-8f, 0.f}, "beta1 0.3 (torch's lerp takes its other branch)"}}) {
    INFO(c.what);
    const auto [p, state] = run<Adam>(c.o, 6);
    const auto [want_p, want_state] = adam_reference(c.o.beta1, c.o.beta2, c.o.eps, c.o.weight_decay, false, 6);
    check_close(p, want_p);
    check_close(state, want_state);
    check_padding_zero(p, state);
  }
}

TEST_CASE("AdamW matches torch.optim.AdamW: decoupled weight decay", "[optimizer][adam]") {
  struct Case {
    AdamW::Options o;
    const char* what;
  };
  for (const Case& c : {Case{{}, "torch's defaults, weight decay 1e-2"},
                        Case{{0.9f, 0.98f, 1e-7f, 0.5f}, "weight decay 0.5"}}) {
    INFO(c.what);
    const auto [p, state] = run<AdamW>(c.o, 6);
    const auto [want_p, want_state] = adam_reference(c.o.beta1, c.o.beta2, c.o.eps, c.o.weight_decay, true, 6);
    check_close(p, want_p);
    check_close(state, want_state);
    check_padding_zero(p, state);
  }
  // AdamW with λ differs from Adam with λ (decay outside the adaptive step), and equals it with λ = 0.
  const auto w = run<AdamW>({0.9f, 0.999f, 1e-8f, 0.1f}, 3).first;
  const auto a = run<Adam>({0.9f, 0.999f, 1e-8f, 0.1f}, 3).first;
  CHECK(w[0] != a[0]);
  CHECK(run<AdamW>({0.9f, 0.999f, 1e-8f, 0.f}, 3) == run<Adam>({0.9f, 0.999f, 1e-8f, 0.f}, 3));
}

TEST_CASE("Adam's first step moves each parameter by about lr", "[optimizer][adam]") {
  // m̂ = g and v̂ = g² after one step, so p moves by lr·g/(|g| + ε): the property Adam is known by.
  const auto [p, state] = run<Adam>({}, 1);
  const std::vector<float> p0 = values(1), g = values(100);
  for (std::size_t i = 0; i < n; ++i) {
    if (g[i] == 0.f) continue;
    CHECK(double(p0[i] - p[i]) == Approx(double(lrs[0]) * (g[i] > 0 ? 1 : -1)).epsilon(1e-5));
  }
}

TEST_CASE("Optimizer per-step records", "[optimizer]") {
  const auto s = Sgd::hyper({0.8f, true, 1e-3f}, 0.05f, 7);
  CHECK(s == std::array<float, 4>{0.05f, 0.8f, 1e-3f, 1.f});
  const auto a = Adam::hyper({0.9f, 0.999f, 1e-8f, 0.f}, 1e-3f, 2);
  CHECK(a[0] == float(1 - double(0.9f)));
  CHECK(a[3] == Approx(1e-3 / (1 - std::pow(double(0.9f), 2))));
  CHECK(a[4] == Approx(std::sqrt(1 - std::pow(double(0.999f), 2))));
  CHECK(a[7] == 1.f);
  const auto w = AdamW::hyper({}, 1e-3f, 1);
  CHECK(w[6] == 0.f);
  CHECK(w[7] == float(1 - double(1e-3f) * double(1e-2f)));
}

TEST_CASE("Optimizer options are checked", "[optimizer][errors]") {
  CHECK_THROWS_WITH(Sgd::validate({0.f, true, 0.f}), Contains("ctnn: Sgd with Nesterov momentum needs a momentum > 0"));
  CHECK_THROWS_WITH(Sgd::validate({-0.5f, false, 0.f}), Contains("ctnn: Sgd momentum"));
  CHECK_THROWS_WITH(Sgd::validate({0.9f, false, NAN}), Contains("ctnn: Sgd weight decay"));
  CHECK_THROWS_WITH(Adam::validate({1.f, 0.999f, 1e-8f, 0.f}), Contains("ctnn: Adam beta1 must be in [0, 1)"));
  CHECK_THROWS_WITH(AdamW::validate({0.9f, -0.1f, 1e-8f, 0.f}), Contains("ctnn: AdamW beta2"));
  CHECK_THROWS_WITH(Adam::validate({0.9f, 0.999f, -1.f, 0.f}), Contains("ctnn: Adam eps"));
  CHECK_THROWS_WITH(AdamW::validate({0.9f, 0.999f, 1e-8f, -1.f}), Contains("ctnn: AdamW weight decay"));
  CHECK_THROWS_WITH(Sgd::hyper({}, -0.1f, 1), Contains("ctnn: Sgd: the learning rate must be finite"));
  CHECK_THROWS_WITH(Adam::hyper({}, 0.1f, 0), Contains("ctnn: Adam: the step count t is 1-based"));
  CHECK_NOTHROW(Sgd::validate({}), Adam::validate({}), AdamW::validate({}));
}

TEST_CASE("Each optimizer minimises a quadratic over many steps", "[optimizer]") {
  // f(p) = Σ (p_i − c_i)²/2, gradient p − c: every optimizer must bring p to c (Adam's bias
  // corrections run to t = 2000, where they are 1 to float precision).
  std::vector<float> c = values(7);
  auto minimise = [&]<class Opt>(const typename Opt::Options& o, float lr) {
    std::vector<float> p = values(8), g(n), state(Opt::state_slots * n, 0.f);
    for (int t = 1; t <= 2000; ++t) {
      for (std::size_t i = 0; i < n; ++i) g[i] = p[i] - c[i];
      const auto h = Opt::hyper(o, t > 1500 ? lr / 100 : lr, t);
      optimizer_step<Opt>(p.data(), g.data(), state.data(), n, h.data());
    }
    for (std::size_t i = 0; i < n; ++i) CHECK(p[i] == Approx(c[i]).margin(1e-3));
  };
  minimise.operator()<Sgd>({0.9f, false, 0.f}, 0.05f);
  minimise.operator()<Sgd>({0.9f, true, 0.f}, 0.05f);
  minimise.operator()<Adam>({}, 0.01f);
  minimise.operator()<AdamW>({0.9f, 0.999f, 1e-8f, 0.f}, 0.01f);
}
