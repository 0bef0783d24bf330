// A layer defined outside the library, in this file alone, with the full contract of core/layer.hpp:
// a mode (noise in training, identity in evaluation), per-step random numbers (counter-based), data
// saved for backward (the noise factors) and integer state (how many training batches it has seen).
// It goes through the host network, its gradient check, the Trainer, weight files and checkpoints
// with no change anywhere else: the proof that adding a layer is one header (docs/adding_a_layer.md).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "gradcheck.hpp"
#include "stripes.hpp"
#include "temp_dir.hpp"

namespace {

using namespace ctnn;

// y = x · (1 + a·(u − ½)) in training, u uniform per element and step; y = x in evaluation.
struct Jitter : layer_tag, no_params {
  static constexpr const char* name = "Jitter";
  static constexpr double amount = 0.2;
  static std::string label() { return name; }
  template <class In>
  static constexpr bool check() { return true; }

  template <class In>
  struct bind : no_params {
    using input_shape = In;
    using output_shape = In;
    static constexpr std::size_t in_size = In::size, out_size = In::size, flops = 2 * In::size;
    static constexpr std::size_t saved_size = In::size;  // the factors
    static constexpr std::array<StateTensor, 1> state{{{"batches_seen", 1, true}}};

    template <class T>
    static void forward(const ForwardArgs<T>& a) {
      const std::size_t n = std::size_t(a.batch) * in_size;
      if (a.mode == Mode::eval) {
        for (std::size_t i = 0; i < n; ++i) a.y[i] = a.x[i];
        return;
      }
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t element = a.first_sample * in_size + i;  // its number in the step
        a.saved[i] = T(1 + amount * (double(counter_uniform(a.rng_key, element)) - 0.5));
        a.y[i] = a.x[i] * a.saved[i];
      }
      a.state[0] += 1;
    }
    template <class T>
    static void backward(const BackwardArgs<T>& a) {
      if (!a.dx) return;
      for (std::size_t i = 0; i < std::size_t(a.batch) * in_size; ++i) a.dx[i] = a.dy[i] * a.saved[i];
    }
  };
};

using Net = Network<Seq<Dense<6>, Jitter, Tanh, Dense<2>, Softmax>, Input<1, 2, 2>>;
static_assert(BufferPlan<Net>::state_floats == 64 && BufferPlan<Net>::state_count[1] == 1);
static_assert(BufferPlan<Net>::saved_size[1] == 6);

}  // namespace

TEST_CASE("Custom layer: mode, random numbers and saved data in the host network", "[layers][custom]") {
  HostNetwork<Net, double> net(4, 1);
  std::vector<double> x(16);
  Random rng(2);
  for (double& v : x) v = rng.uniform(-1, 1);
  auto run = [&](Mode mode, StepRandom step) {
    const double* y = net.forward(x.data(), 4, mode, step);
    return std::vector<double>(y, y + 8);
  };
  const std::vector<double> eval = run(Mode::eval, {});
  const std::vector<double> a = run(Mode::train, {7, 3}), b = run(Mode::train, {7, 3}), c = run(Mode::train, {7, 4});
  CHECK(a == b);        // the same step draws the same numbers
  CHECK(a != c);        // another step, others
  CHECK(a != eval);     // training adds noise, evaluation does not
  CHECK(net.state()[0] == 3.0);  // three training batches
}

TEST_CASE("Custom layer: gradient check in training mode (fixed noise)", "[layers][custom][gradcheck]") {
  HostNetwork<Net, double> net(3, 5);
  Random rng(6);
  std::vector<double> x(12), r(6);
  for (double& v : x) v = rng.uniform(-1, 1);
  for (double& v : r) v = rng.uniform(-1, 1);
  const StepRandom step{11, 2};
  net.forward(x.data(), 3, Mode::train, step);
  net.backward(r.data(), 3);
  const std::vector<double> grads = net.grads();
  auto loss = [&] {
    const double* y = net.forward(x.data(), 3, Mode::train, step);
    double s = 0;
    for (std::size_t i = 0; i < 6; ++i) s += r[i] * y[i];
    return s;
  };
  const auto report = ctnn::testing::finite_difference_check(loss, ctnn::testing::parameter_tensors(net, grads));
  INFO(report.str());
  CHECK(report.max_error() < 1e-6);
}

TEST_CASE("Custom layer: trains, and its state travels in weight files and checkpoints", "[layers][custom][checkpoint]") {
  ctnn_test::TempDir dir;  // (tests/host/temp_dir.hpp)
  const Dataset data = ctnn::test::stripes(40, 3);
  TrainOptions o;
  o.epochs = 3;
  o.batch = 8;
  o.learning_rate = 0.1f;
  Trainer<Net, host, 8> trainer(2);
  const auto history = trainer.fit(data, o);
  CHECK(history.back().loss < history.front().loss);
  CHECK(trainer.layer_state()[0] == 15.0f);  // 3 epochs of 5 batches

  trainer.save_weights(dir.file("w.safetensors"));
  Trainer<Net, host, 8> loaded;
  loaded.load_weights(dir.file("w.safetensors"));
  CHECK(loaded.layer_state() == trainer.layer_state());
  CHECK(loaded.evaluate(data).loss == trainer.evaluate(data).loss);

  const io::SafetensorsFile file(dir.file("w.safetensors"));
  CHECK(file.int64s("layers.1.batches_seen", {}) == std::vector<std::int64_t>{15});
}
