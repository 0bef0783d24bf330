// LeNet-5 through the fused plan (network/fusion.hpp) against the host reference (fusion_test.hpp),
// at batches 1, 37 and 64, and 300 and 600 (blocks of the pooled weight gradients with several samples,
// the wide forward); and its launches: the fused training pass is 9 kernels (two conv-group forwards,
// the dense chain with the loss and its backward data, the chain's weight gradients, conv2's weight
// gradient and its sum, conv2's input gradient, conv1's weight gradient and its sum), the trainer's
// captured step 10 (the pass, whose first kernel also gathers the step's samples, and the optimizer),
// where the chain runs fused at that batch
// (cuda_dense_chain::min_batch); inference at batch 1 is one (the network kernel). A pass that gathers
// its samples in its first kernel gives the same input, labels, losses and gradients, bit for bit, as a
// gather kernel before the pass.
#include <cstdio>
#include <cstdlib>
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
    // Large batches: blocks of the pooled weight gradients that take several samples (conv2: 256
    // partials), the forward's wide kernel (the narrow one runs only where its grid fits the SMs).
    if (!std::getenv("CTNN_QUICK"))
      fusion_test::test_network<models::LeNet5, SoftmaxCrossEntropy, 600>(t, "LeNet-5", 22, {300, 600});

    // The dense chain runs fused from its measured min_batch on (below it, layer by layer).
    using Gpu = CudaNetwork<models::LeNet5, fusion_test::max_batch>;
    constexpr std::size_t chain = FusionPlan<models::LeNet5>::group_count - 1;
    static_assert(FusionPlan<models::LeNet5>::groups[chain].kind == GroupKind::dense_chain);
    const std::size_t pass = fusion_test::fused_pass_kernels<models::LeNet5, SoftmaxCrossEntropy>(64);
    if (Gpu::runs_fused<chain>(64)) {
      std::printf("%s LeNet-5: a fused training pass is %zu kernel launches (expected 9)\n",
                  pass == 9 ? "ok  " : "FAIL", pass);
      t(pass == 9);
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
    const auto random_images = [&](std::size_t count) {  // random 28×28 images with random labels
      Dataset r;
      r.count = count, r.rows = 28, r.cols = 28;
      r.pixels.resize(r.count * 28 * 28);
      for (auto& p : r.pixels) p = std::uint8_t(rng.below(256));
      r.labels.resize(r.count);
      for (auto& l : r.labels) l = std::uint8_t(rng.below(10));
      return r;
    };
    const Dataset d = random_images(100);
    Trainer<models::LeNet5, ctnn::cuda, 64> trainer(1);
    TrainOptions o;
    o.epochs = 1, o.batch = 50;
    trainer.fit(d, o);
    const CudaGraph::NodeCounts n = trainer.step_graph_nodes();
    if (Gpu::runs_fused<chain>(o.batch)) {
      std::printf("%s LeNet-5: the trainer's captured step holds %zu kernels, %zu copies, %zu other nodes "
                  "(expected 10 kernels)\n",
                  n.kernels == 10 && n.copies == 0 ? "ok  " : "FAIL", n.kernels, n.copies, n.other);
      t(n.kernels == 10 && n.copies == 0);
    } else {
      std::printf("%s LeNet-5: the trainer's captured step holds %zu kernels, %zu copies (expected no copies)\n",
                  n.copies == 0 ? "ok  " : "FAIL", n.kernels, n.copies);
      t(n.copies == 0);
    }

    // Several full steps per graph launch (Trainer::set_steps_per_launch) run the same steps in the same
    // order as one a launch: the same parameters, bit for bit. 300 images in steps of 24: 12 full steps
    // and a tail; 5 a launch leaves two single full steps, the default (8 below batch 256) four.
    {
      const Dataset e = random_images(300);
      TrainOptions f;
      f.epochs = 1, f.batch = 24;
      std::vector<std::vector<float>> params;
      std::vector<float> initial;  // (the same seed: every trainer starts from these)
      for (int steps : {1, 5, 0}) {
        Trainer<models::LeNet5, ctnn::cuda, 64> tr(3);
        if (initial.empty()) initial = tr.parameters();
        tr.set_steps_per_launch(steps);
        tr.fit(e, f);
        params.push_back(tr.parameters());
      }
      const bool same = params[0] != initial && params[1] == params[0] && params[2] == params[0];
      std::printf("%s LeNet-5: fits with 5 and 8 steps a graph launch give the parameters of one a launch, bit "
                  "for bit (and they trained)\n", same ? "ok  " : "FAIL");
      t(same);
    }

    // The pass gathering its samples in its first kernel (GatherLoad, and the gather in blocks of that
    // launch) against a gather kernel before the pass, from the same parameters: step 1 of a cursor
    // over a random order of random images, a batch that is not a multiple of anything.
    {
      constexpr int batch = 37, count = 101, S = 784;
      Random rng(8);
      std::vector<std::uint8_t> images(std::size_t(count) * S), labels(count);
      for (auto& v : images) v = std::uint8_t(rng.below(256));
      for (auto& v : labels) v = std::uint8_t(rng.below(10));
      std::vector<std::uint32_t> order(2 * batch);
      for (auto& v : order) v = std::uint32_t(rng.below(count));
      const ctnn_test::DeviceBuffer<std::uint8_t> d_images(images), d_labels(labels);
      const ctnn_test::DeviceBuffer<std::uint32_t> d_order(order), d_cursor(std::vector<std::uint32_t>{1});
      Gpu fused(5), apart(5);
      std::vector<std::vector<float>> grads, inputs, losses;
      std::vector<std::vector<std::int32_t>> label_rows;
      for (Gpu* g : {&fused, &apart}) {
        ctnn_test::DeviceBuffer<std::int32_t> d_step_labels(batch), d_correct(batch);
        ctnn_test::DeviceBuffer<float> d_loss(batch);
        d_step_labels.poison(), d_correct.poison(), d_loss.poison();
        ctnn_test::fill_bytes_and_wait(g->input(), 0xFF, sizeof(float) * S * batch);
        const kernels::GatherArgs a = kernels::gather_args<S>(
            d_images.ptr, d_labels.ptr, count, d_order.ptr, 0, batch, 0.1307f, 0.3081f, g->input(),
            d_step_labels.ptr, nullptr, 0, nullptr, kernels::StepCursor{d_cursor.ptr, std::size_t(batch)});
        kernels::LossRun<SoftmaxCrossEntropy> run;
        run.labels = d_step_labels.ptr, run.loss = d_loss.ptr, run.correct = d_correct.ptr;
        if (g == &fused) {
          g->loss_pass_fused(batch, Mode::train, run, true, &a);
        } else {
          kernels::gather_normalize<S>(g->stream(), a);
          g->loss_pass_fused(batch, Mode::train, run, true);
        }
        g->synchronize();
        grads.push_back(g->gradients());
        std::vector<float> in(std::size_t(S) * batch);
        CTNN_CUDA_CHECK(cudaMemcpy(in.data(), g->input(), in.size() * sizeof(float), cudaMemcpyDeviceToHost));
        inputs.push_back(in);
        losses.push_back(d_loss.download());
        label_rows.push_back(d_step_labels.download());
      }
      // The gathered input and labels against the host.
      std::vector<float> want_in(std::size_t(S) * batch);
      std::vector<std::int32_t> want_labels(batch);
      for (int b = 0; b < batch; ++b) {
        const std::uint32_t id = order[std::size_t(batch + b)];
        want_labels[std::size_t(b)] = labels[id];
        for (int j = 0; j < S; ++j)
          want_in[std::size_t(b) * S + std::size_t(j)] = normalize_pixel(images[std::size_t(id) * S + std::size_t(j)],
                                                                          0.1307f, 0.3081f);
      }
      t(ctnn_test::same_bits(inputs[0], want_in, "LeNet-5: the first kernel's gather writes the host's input"));
      t(ctnn_test::same_bits(label_rows[0], want_labels, "LeNet-5: ... and the step's labels"));
      t(ctnn_test::same_bits(losses[0], losses[1], "LeNet-5: a pass gathering in its first kernel: the same losses"));
      t(ctnn_test::same_bits(grads[0], grads[1], "LeNet-5: ... and the same gradients as after a gather kernel"));
      t(ctnn_test::same_bits(inputs[0], inputs[1], "LeNet-5: ... and the same input"));
    }
  } catch (const std::exception& e) {
    std::printf("FAIL unexpected exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
