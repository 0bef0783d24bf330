// Fused groups (network/fusion.hpp) of networks other than LeNet-5 against the host reference
// (fusion_test.hpp): every activation, max and average pooling (with and without an activation before
// it, windows of 2 and 3, an input whose last row and column lie in no window), overlapping pooling
// and BatchNorm that block a fusion, a stride-2 convolution (the gather input-gradient kernel), a
// chain that is not the last (its backward from the layer above), chains with and without Softmax, a
// group fused in evaluation only (an RGB stem whose training takes the patch weight gradient),
// activations in a convolution's epilogue, softmax cross-entropy and Mse (also through a Softmax). The
// network kernel (network_forward.cuh) in each, and alone on a network with the layers the fused
// groups leave out.
#include <cstdio>
#include <exception>

#include "fusion_test.hpp"

namespace {
using namespace ctnn;

// 3x32x32 -> 8x16x16 (stride 2, pad 2), Tanh, avg 2 (keeps the activation) -> 12x8x8 (dilated), ReLU
// (no pooling) -> overlapping max pool (a layer) -> chain with Sigmoid and Softmax.
using Rgb = Network<Seq<Conv<8, 5, Stride<2>, Pad<2>>, Tanh, AvgPool<2>,
                        Conv<12, 3, Pad<2>, Dilation<2>>, ReLU, Pool<3, Stride<2>, Pad<1>>,
                        Dense<32>, Sigmoid, Dense<10>, Softmax>,
                    Input<3, 32, 32>>;
// BatchNorm after the Conv: the Conv alone, BatchNorm, ReLU, a pooling after an activation as layers.
using Bn = Network<Seq<Conv<8, 3, Pad<1>>, BatchNorm, ReLU, Pool<2>, Dense<10>, Softmax>, Input<3, 12, 12>>;
// An RGB stem whose weight gradient is the FP32 staged-patch kernel's (C = 3, 3x3, W = 16): its group
// runs fused in evaluation only; training runs its layers one by one (conv_fused.cuh, min_batch).
using Stem = Network<Seq<Conv<8, 3, Pad<1>>, ReLU, Pool<2>, Dense<10>, Softmax>, Input<3, 16, 16>>;
// A chain from layer 0 without Softmax, Mse.
using Mlp = Network<Seq<Dense<32>, Sigmoid, Dense<16>, LeakyReLU<0.1f>, Dense<4>>, Input<20>>;
// Conv + max pool without an activation on 13x13 (row and column 12 in no window); a stride-2 Conv with
// ReLU; a chain below BatchNorm; a chain with Tanh and Softmax.
using Split = Network<Seq<Conv<4, 3>, Pool<2>, Conv<6, 3, Stride<2>, Pad<1>>, ReLU, Dense<16>, ReLU, BatchNorm,
                          Dense<8>, Tanh, Dense<3>, Softmax>,
                      Input<2, 15, 15>>;
// Sigmoid + max pool of 3x3 windows; average pooling without an activation.
using Pools = Network<Seq<Conv<5, 3, Pad<1>>, Sigmoid, Pool<3>, Conv<4, 2>, AvgPool<2>, Dense<6>, Softmax>,
                      Input<1, 15, 15>>;
// Mse through a final Softmax: the loss reads the chain's last layer (the Softmax's backward runs alone).
using SoftMse = Network<Seq<Dense<24>, ReLU, Dense<6>, Softmax>, Input<2, 4, 4>>;
// 16-channel convolutions whose rule picks the staged-patch kernels: the activation after each runs in
// the convolution's store (cuda_layer<Conv>::forward_act) where the layers run one by one, the Conv's
// own slot unwritten; ReLU and Sigmoid, with and without a pooling after, stride 1 and 2. In the fused
// backward the pooling and the stride-2 Conv take the backward of the activation below them.
using Wide = Network<Seq<Conv<16, 3, Pad<1>>, ReLU, Pool<2>, Conv<16, 3, Pad<1>>, Sigmoid,
                         Conv<16, 3, Stride<2>, Pad<1>>, ReLU, Dense<10>, Softmax>,
                     Input<16, 16, 32>>;
// The tail kernel (CudaNetwork::tail_first) from the pooling after a GEMM-family convolution and its
// ReLU (run layer by layer, the ReLU in the convolution's store): pooling, Dense and Softmax in one launch.
using Tail = Network<Seq<Conv<32, 3, Pad<1>>, ReLU, Conv<32, 3, Stride<2>, Pad<1>>, ReLU, Pool<2>, Dense<10>, Softmax>,
                     Input<3, 16, 16>>;
static_assert(CudaNetwork<Tail, 64>::has_tail_kernel && CudaNetwork<Tail, 64>::tail_first == 4,
              "Tail's tail kernel starts at its pooling");
static_assert(CudaNetwork<Wide, 64>::has_tail_kernel && CudaNetwork<Wide, 64>::tail_first == 7,
              "Wide's tail kernel starts at its Dense layer (a fused group's first layer)");
// A wide Dense (4096 -> 256: 2^20 weights) and its ReLU run as layers, a group of their own (the ReLU in
// the product's epilogue); the chain after them (Dense<10>, Softmax) runs fused with the loss and does the
// ReLU's backward too (CudaNetwork::chain_folds_below).
using Head = Network<Seq<Conv<16, 3, Pad<1>>, ReLU, Pool<2>, Dense<256>, ReLU, Dense<10>, Softmax>, Input<4, 32, 32>>;
static_assert(FusionPlan<Head>::group_count == 3 && FusionPlan<Head>::groups[1].first == 3 &&
                  FusionPlan<Head>::groups[1].last == 4 && FusionPlan<Head>::groups[2].kind == GroupKind::dense_chain,
              "Head: the wide Dense and its ReLU alone, then the chain");
// For the network kernel alone: a dilated and a strided Conv, LeakyReLU, Dropout (evaluation: nothing),
// BatchNorm on planes and on a flat vector (random running statistics), GlobalAvgPool, an overlapping
// average pooling with padding, Softmax.
using Gap = Network<Seq<Conv<6, 3, Pad<2>, Dilation<2>>, LeakyReLU<0.1f>, Dropout<0.3f>, AvgPool<3, Stride<2>, Pad<1>>,
                        Conv<8, 3, Stride<2>>, BatchNorm, ReLU, GlobalAvgPool, Dense<12>, BatchNorm, Sigmoid,
                        Dense<5>, Softmax>,
                    Input<2, 13, 13>>;
// Above batch 128 the tail kernel runs blocks of 256 threads, not 512 (CudaNetwork::forward_tail), so
// its Dense layer splits its inputs fewer ways: forward_fused against the layers one by one at 160
// samples, outputs poisoned before each pass.
void tail_at_large_batch(ctnn_test::Tally& t) {
  constexpr int batch = 160;
  using Gpu = CudaNetwork<Tail, batch>;
  static_assert(Gpu::runs_tail_kernel(batch), "the tail kernel runs at 160");
  Gpu gpu(41);
  std::vector<float> x(std::size_t(batch) * Tail::input_shape::size);
  Random rng(42);
  for (float& v : x) v = float(rng.below(2001)) / 1000.f - 1.f;
  gpu.upload_input(x.data(), batch);
  auto pass = [&](bool fused) {
    ctnn_test::fill_bytes_and_wait(gpu.output(), 0xff, std::size_t(batch) * 10 * sizeof(float));
    if (fused) gpu.forward_fused(batch);
    else gpu.forward_groups(batch);
    gpu.synchronize();
    std::vector<float> y(std::size_t(batch) * 10);
    CTNN_CUDA_CHECK(cudaMemcpy(y.data(), gpu.output(), y.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return y;
  };
  const std::vector<float> groups = pass(false), tail = pass(true);
  t(ctnn_test::close(tail, groups, "Tail at batch 160: forward_fused (tail kernel, 256 threads) = forward_groups", 1e-5, 1e-7));
}
}  // namespace

int main() {
  ctnn_test::require_cuda_device();
  ctnn_test::Tally t;
  try {
    fusion_test::test_network<Rgb, SoftmaxCrossEntropy>(t, "Rgb", 31);
    fusion_test::test_network<Bn, SoftmaxCrossEntropy>(t, "Conv,BatchNorm,ReLU", 32);
    fusion_test::test_network<Stem, SoftmaxCrossEntropy>(t, "RGB stem (fused in evaluation only)", 38);
    fusion_test::test_network<Mlp, Mse>(t, "Mlp (Mse)", 33);
    // BatchNorm1d needs more than one sample, and at a few its backward amplifies rounding (the host's
    // BatchNorm normalises its own, slightly different inputs): batches 37 and 64.
    fusion_test::test_network<Split, SoftmaxCrossEntropy>(t, "Split chains", 34, {37, 64});
    fusion_test::test_network<Pools, SoftmaxCrossEntropy>(t, "Pools", 35);
    fusion_test::test_network<SoftMse, Mse>(t, "Mse through Softmax", 36);
    const int folds =
        fusion_test::test_network<Wide, SoftmaxCrossEntropy>(t, "Wide (activations in the patch kernels' epilogue)", 39);
    // At each of its 3 batches: the pooling folds the ReLU below it, the stride-2 convolution the Sigmoid,
    // the chain the ReLU after the stride-2 convolution (which runs as a layer: 16 channels).
    if (ctnn_test::case_selected("Wide")) {
      std::printf("%s Wide: %d activation backward passes folded into the layer above (expected 9: 3 at each batch)\n",
                  folds == 9 ? "ok  " : "FAIL", folds);
      t(folds == 9);
    }
    fusion_test::test_network<Tail, SoftmaxCrossEntropy>(t, "Tail (pooling, Dense, Softmax in one kernel)", 40);
    tail_at_large_batch(t);
    const int head_folds = fusion_test::test_network<Head, SoftmaxCrossEntropy>(t, "Head (a wide Dense before the chain)", 42);
    // At each of its 3 batches: the pooling folds the ReLU below it (16 channels: the Conv runs as a
    // layer), the chain the wide Dense's ReLU.
    if (ctnn_test::case_selected("Head")) {
      std::printf("%s Head: %d activation backward passes folded into the layer above (expected 6: 2 at each batch)\n",
                  head_folds == 6 ? "ok  " : "FAIL", head_folds);
      t(head_folds == 6);
    }
    fusion_test::test_network_kernel<Gap>(t, "Gap (network kernel)", 37);
  } catch (const std::exception& e) {
    std::printf("FAIL unexpected exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
