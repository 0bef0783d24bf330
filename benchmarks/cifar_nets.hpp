#pragma once
// The two CIFAR-sized networks of the benchmarks (3×32×32 input, 3×3 convolutions of 32 channels or
// more, one with strided convolutions); benchmarks/pytorch_cifar.py builds the same two in PyTorch.
#include "ctnn/ctnn.hpp"

namespace cifar {
using namespace ctnn;

// VGG-style: two 3×3 convolutions per stage, max pooling between. 1,116,970 parameters.
using Vgg = Network<Seq<Conv<32, 3, Pad<1>>, ReLU, Conv<32, 3, Pad<1>>, ReLU, Pool<2>,
                        Conv<64, 3, Pad<1>>, ReLU, Conv<64, 3, Pad<1>>, ReLU, Pool<2>,
                        Dense<256>, ReLU, Dense<10>, Softmax>,
                    Input<3, 32, 32>>;

// Strided: downsampling by stride-2 convolutions; one max pooling before the classifier. 150,666
// parameters.
using Strided = Network<Seq<Conv<32, 3, Pad<1>>, ReLU, Conv<64, 3, Stride<2>, Pad<1>>, ReLU,
                            Conv<64, 3, Pad<1>>, ReLU, Conv<128, 3, Stride<2>, Pad<1>>, ReLU,
                            Pool<2>, Dense<10>, Softmax>,
                        Input<3, 32, 32>>;
}  // namespace cifar
