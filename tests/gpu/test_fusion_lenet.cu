// LeNet-5 through the fused plan (network/fusion.hpp) against the host reference (fusion_test.hpp),
// and its launches: the fused training pass is 7 kernels (two conv-group forwards, the dense chain with
// the loss and its backward data, the chain's weight gradients, conv2's weight and input gradients,
// conv1's weight gradients), the trainer's captured step 9 (gather, the pass, the optimizer), where
// the chain runs fused at that batch (cuda_dense_chain::min_batch); inference at batch 1 is one (the
// network kernel).
#include <cstdio>
#include <exception>

#include <ctnn/ctnn.hpp>
#include <ctnn/train/cuda_trainer.hpp>

#include "fusion_test.hpp"

int main() {
  ctnn_test::require_cuda_device();
  ctnn_test::Tally t;
  using namespace ctnn;
  try {
    fusion_test::test_network<models::LeNet5, SoftmaxCrossEntropy>(t, "LeNet-5", 21);

    // The dense chain runs fused from its measured min_batch on (below it, layer by layer).
    using Gpu = CudaNetwork<models::LeNet5, fusion_test::max_batch>;
    constexpr std::size_t chain = FusionPlan<models::LeNet5>::group_count - 1;
    static_assert(FusionPlan<models::LeNet5>::groups[chain].kind == GroupKind::dense_chain);
    const std::size_t pass = fusion_test::fused_pass_kernels<models::LeNet5, SoftmaxCrossEntropy>(64);
    if (Gpu::runs_fused<chain>(64)) {
      std::printf("%s LeNet-5: a fused training pass is %zu kernel launches (expected 7)\n",
                  pass == 7 ? "ok  " : "FAIL", pass);
      t(pass == 7);
    } else {
      std::printf("note LeNet-5: at batch 64 the dense chain runs layer by layer; a training pass is %zu "
                  "kernel launches\n", pass);
    }

    // Inference at batch 1 is one launch: the network kernel (kernels/network_forward.cuh).
    static_assert(Gpu::has_network_kernel, "LeNet-5 runs its small-batch inference as one kernel");
    if (Gpu::runs_network_kernel(1)) {
      const std::size_t one = fusion_test::forward_kernels<models::LeNet5>(1);
      std::printf("%s LeNet-5: forward_fused at batch 1 is %zu kernel launches (expected 1)\n",
                  one == 1 ? "ok  " : "FAIL", one);
      t(one == 1);
    }
    // Its steps: each Conv takes in its ReLU and pooling, each Dense its ReLU (12 layers, 6 steps that
    // run), and a launch that stages takes both convolutions', Dense 120->84's and 84->10's weights whole
    // and the last rows (whole unit groups) of Dense 400->120's into 227 KB of shared memory.
    {
      using K = Gpu::network_kernel;
      using P = K::plan;
      int running = 0;
      kernels::static_for<int(P::count)>([&](auto i) {
        using Op = typename std::tuple_element_t<decltype(i)::value, typename K::steps>::op;
        if constexpr (!kernels::is_absorbed<Op>()) ++running;
      });
      const bool whole = P::staging.first[0] == 0 && P::staging.first[3] == 0 && P::staging.first[8] == 0 &&
                         P::staging.first[10] == 0;
      const int d1 = P::staging.first[6];
      const bool ok = running == 6 && K::can_stage && whole && d1 > 0 && d1 < 120 && d1 % 4 == 0 &&
                      K::staged_bytes <= 227 * 1024;
      std::printf("%s LeNet-5: the network kernel runs %d steps (expected 6); it stages %zu bytes, Dense "
                  "400->120 from row %d\n", ok ? "ok  " : "FAIL", running, K::staged_bytes, d1);
      t(ok);
    }

    Random rng(5);
    Dataset d;
    d.count = 100, d.rows = 28, d.cols = 28;
    d.pixels.resize(d.count * 28 * 28);
    for (auto& p : d.pixels) p = std::uint8_t(rng.below(256));
    d.labels.resize(d.count);
    for (auto& l : d.labels) l = std::uint8_t(rng.below(10));
    Trainer<models::LeNet5, ctnn::cuda, 64> trainer(1);
    TrainOptions o;
    o.epochs = 1, o.batch = 50;
    trainer.fit(d, o);
    const CudaGraph::NodeCounts n = trainer.step_graph_nodes();
    if (Gpu::runs_fused<chain>(o.batch)) {
      std::printf("%s LeNet-5: the trainer's captured step holds %zu kernels, %zu copies, %zu other nodes "
                  "(expected 9 kernels)\n",
                  n.kernels == 9 && n.copies == 0 ? "ok  " : "FAIL", n.kernels, n.copies, n.other);
      t(n.kernels == 9 && n.copies == 0);
    } else {
      std::printf("%s LeNet-5: the trainer's captured step holds %zu kernels, %zu copies (expected no copies)\n",
                  n.copies == 0 ? "ok  " : "FAIL", n.kernels, n.copies);
      t(n.copies == 0);
    }
  } catch (const std::exception& e) {
    std::printf("FAIL unexpected exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
