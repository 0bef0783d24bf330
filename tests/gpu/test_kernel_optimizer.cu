// The generic fused optimizer kernel (kernels/optimizer.cuh) against the host loop
// (train/optimizer.hpp) for Sgd (momentum, Nesterov, weight decay), Adam (L2) and AdamW: several steps
// with a changing learning rate and step count on fresh random parameters, gradients and state, over
// a block the size of LeNet-5's (vector path), odd lengths and a misaligned block (scalar path), with
// a run of zero padding that must stay zero. Both run Opt::update with every operation rounded on its
// own, so parameters and state must be bitwise equal. Last, the kernel captured once in a CUDA graph
// follows records changed between replays.
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ctnn/kernels/optimizer.cuh>
#include <ctnn/train/adam.hpp>
#include <ctnn/train/sgd.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

// Random parameters and gradients; state from slot-appropriate ranges (Adam's exp_avg_sq >= 0);
// floats [pad_at, pad_at + pad) all zero, as the padding between tensors is.
template <class Opt>
std::vector<float> fresh_state(std::size_t n, std::uint64_t seed, std::size_t pad_at, std::size_t pad) {
  std::vector<float> s;
  for (std::size_t k = 0; k < Opt::state_slots; ++k) {
    const bool squares = std::string(Opt::state_names[k]) == "exp_avg_sq";
    std::vector<float> slot = random_vector(n, seed + k, squares ? 0.f : -0.1f, squares ? 0.01f : 0.1f);
    for (std::size_t i = pad_at; i < pad_at + pad && i < n; ++i) slot[i] = 0.f;
    s.insert(s.end(), slot.begin(), slot.end());
  }
  return s;
}

template <class Opt>
void test_steps(Tally& t, const char* label, const typename Opt::Options& o, std::size_t n, int offset,
                std::uint64_t seed, bool ranges = false, std::size_t hole = 0) {
  Opt::validate(o);
  Stream stream;
  const std::size_t S = Opt::state_slots, pad_at = n / 3, pad = n >= 24 ? 13 : 0;
  std::vector<float> p = random_vector(n, seed), state = fresh_state<Opt>(n, seed + 100, pad_at, pad);
  for (std::size_t i = pad_at; i < pad_at + pad; ++i) p[i] = 0.f;
  DeviceBuffer<float> d_p(n + 1), d_g(n + 1), d_s(S * n + 1), d_h(Opt::hyper_count);
  CTNN_CUDA_CHECK(cudaMemcpy(d_p.ptr + offset, p.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CTNN_CUDA_CHECK(cudaMemcpy(d_s.ptr + offset, state.data(), S * n * sizeof(float), cudaMemcpyHostToDevice));
  const float lrs[4] = {0.01f, 0.05f, 0.003f, 0.02f};
  for (int step = 0; step < 4; ++step) {
    std::vector<float> g = random_vector(n, seed + 10 + step);
    for (std::size_t i = pad_at; i < pad_at + pad; ++i) g[i] = 0.f;
    const auto h = Opt::hyper(o, lrs[step], step + 1);
    d_h.upload(std::vector<float>(h.begin(), h.end()));
    CTNN_CUDA_CHECK(cudaMemcpy(d_g.ptr + offset, g.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    if (hole > 0) {  // [a, a + hole) on its own, then the rest in one launch around it
      const std::size_t a = std::min<std::size_t>(n - hole, 4 * (n / 12));
      kernels::optimizer_step_range<Opt>(stream.s, d_p.ptr + offset, d_g.ptr + offset, d_s.ptr + offset, n, a, hole,
                                         d_h.ptr);
      kernels::optimizer_step_range<Opt>(stream.s, d_p.ptr + offset, d_g.ptr + offset, d_s.ptr + offset, n, 0, n,
                                         d_h.ptr, nullptr, a, hole);
    } else if (ranges) {  // three ranges, each its own launch (optimizer_step_range): [0, a), [a, a + 3), [a + 3, n)
      const std::size_t a = std::min<std::size_t>(n, 4 * (n / 12)), b = std::min(n, a + 3);
      for (const auto& [first, end] : {std::pair{std::size_t{0}, a}, std::pair{a, b}, std::pair{b, n}})
        kernels::optimizer_step_range<Opt>(stream.s, d_p.ptr + offset, d_g.ptr + offset, d_s.ptr + offset, n, first,
                                           end - first, d_h.ptr);
    } else {
      kernels::optimizer_step<Opt>(stream.s, d_p.ptr + offset, d_g.ptr + offset, d_s.ptr + offset, n, d_h.ptr);
    }
    optimizer_step<Opt>(p.data(), g.data(), state.data(), n, h.data());
    stream.sync();
  }
  std::vector<float> gp(n), gs(S * n);
  CTNN_CUDA_CHECK(cudaMemcpy(gp.data(), d_p.ptr + offset, n * sizeof(float), cudaMemcpyDeviceToHost));
  CTNN_CUDA_CHECK(cudaMemcpy(gs.data(), d_s.ptr + offset, S * n * sizeof(float), cudaMemcpyDeviceToHost));
  const std::string what = std::string(label) + " n=" + std::to_string(n) + " offset " + std::to_string(offset) +
                           (hole > 0 ? " around a hole of " + std::to_string(hole)
                                     : std::string(ranges ? " in three ranges" : ""));
  t(same_bits(gp, p, (what + ": params").c_str()));
  t(same_bits(gs, state, (what + ": state").c_str()));
  bool zero = true;
  for (std::size_t i = pad_at; i < pad_at + pad; ++i) {
    zero = zero && gp[i] == 0.f;
    for (std::size_t k = 0; k < S; ++k) zero = zero && gs[k * n + i] == 0.f;
  }
  std::printf("%s %s: padding stays zero\n", zero ? "ok  " : "FAIL", what.c_str());
  t(zero);
}

template <class Opt>
void test_sizes(Tally& t, const char* label, const typename Opt::Options& o, std::uint64_t seed) {
  test_steps<Opt>(t, label, o, 61'760, 0, seed);      // about LeNet-5's padded block: the vector path
  test_steps<Opt>(t, label, o, 1'001, 0, seed + 1);   // n % 4 != 0: the scalar path
  test_steps<Opt>(t, label, o, 1'024, 1, seed + 2);   // misaligned: the scalar path
  test_steps<Opt>(t, label, o, 3, 0, seed + 3);       // shorter than one vector
  test_steps<Opt>(t, label, o, 61'760, 0, seed + 4, true);  // ranges: vector, scalar (3 floats), scalar (misaligned)
  test_steps<Opt>(t, label, o, 1'001, 0, seed + 5, true);
  test_steps<Opt>(t, label, o, 61'760, 0, seed + 6, false, 4'096);  // one launch around a hole: vector
  test_steps<Opt>(t, label, o, 61'760, 0, seed + 7, false, 3);      // a hole of 3 floats: scalar
  test_steps<Opt>(t, label, o, 1'024, 0, seed + 8, false, 1'024 - 4 * (1'024 / 12));  // a hole to the end
  // A range past the block is refused before anything is launched.
  DeviceBuffer<float> d(8), d_h(Opt::hyper_count);
  bool threw = false;
  try {
    kernels::optimizer_step_range<Opt>(nullptr, d.ptr, d.ptr, d.ptr, 4, 2, 3, d_h.ptr);
  } catch (const std::invalid_argument& e) {
    threw = true;
    std::printf("ok   %s: a range past the block refused: %s\n", label, e.what());
  }
  if (!threw) std::printf("FAIL %s: a range past the block was accepted\n", label);
  t(threw);
  threw = false;  // and a hole outside the range
  try {
    kernels::optimizer_step_range<Opt>(nullptr, d.ptr, d.ptr, d.ptr, 8, 0, 4, d_h.ptr, nullptr, 2, 3);
  } catch (const std::invalid_argument& e) {
    threw = true;
    std::printf("ok   %s: a hole past the range refused: %s\n", label, e.what());
  }
  if (!threw) std::printf("FAIL %s: a hole past the range was accepted\n", label);
  t(threw);
}

// One launch captured in a graph; the record in device memory changes between replays.
template <class Opt>
void test_graph(Tally& t, const char* label, const typename Opt::Options& o, std::uint64_t seed) {
  const std::size_t n = 4'096, S = Opt::state_slots;
  Stream stream;
  std::vector<float> p = random_vector(n, seed), g = random_vector(n, seed + 1),
                     state = fresh_state<Opt>(n, seed + 2, 0, 0);
  DeviceBuffer<float> d_p(p), d_g(g), d_s(state), d_h(Opt::hyper_count);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CTNN_CUDA_CHECK(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeThreadLocal));
  kernels::optimizer_step<Opt>(stream.s, d_p.ptr, d_g.ptr, d_s.ptr, n, d_h.ptr);
  CTNN_CUDA_CHECK(cudaStreamEndCapture(stream.s, &graph));
  CTNN_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int step = 1; step <= 3; ++step) {
    const auto h = Opt::hyper(o, 0.01f * float(step), step);
    CTNN_CUDA_CHECK(cudaMemcpyAsync(d_h.ptr, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice, stream.s));
    CTNN_CUDA_CHECK(cudaGraphLaunch(exec, stream.s));
    optimizer_step<Opt>(p.data(), g.data(), state.data(), n, h.data());
    stream.sync();  // h lives on the host stack until the copy is done
  }
  CTNN_CUDA_CHECK(cudaGraphExecDestroy(exec));
  CTNN_CUDA_CHECK(cudaGraphDestroy(graph));
  t(same_bits(d_p.download(), p, (std::string(label) + " in a CUDA graph: params").c_str()));
  t(same_bits(d_s.download(), state, (std::string(label) + " in a CUDA graph: state").c_str()));
  (void)S;
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_sizes<Sgd>(t, "Sgd momentum 0.9", Sgd::Options{}, 11);
    test_sizes<Sgd>(t, "Sgd Nesterov 0.8 wd 1e-3", Sgd::Options{0.8f, true, 1e-3f}, 21);
    test_sizes<Sgd>(t, "Sgd plain wd 5e-4", Sgd::Options{0.f, false, 5e-4f}, 31);
    test_sizes<Adam>(t, "Adam", Adam::Options{}, 41);
    test_sizes<Adam>(t, "Adam betas (0.8, 0.99) wd 1e-2", Adam::Options{0.8f, 0.99f, 1e-6f, 1e-2f}, 51);
    test_sizes<AdamW>(t, "AdamW", AdamW::Options{}, 61);
    test_sizes<AdamW>(t, "AdamW beta1 0.3 (lerp's other branch) wd 0.1", AdamW::Options{0.3f, 0.95f, 1e-8f, 0.1f}, 71);
    test_graph<Sgd>(t, "Sgd", Sgd::Options{0.9f, true, 1e-4f}, 81);
    test_graph<Adam>(t, "Adam", Adam::Options{}, 91);
    test_graph<AdamW>(t, "AdamW", AdamW::Options{}, 101);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
