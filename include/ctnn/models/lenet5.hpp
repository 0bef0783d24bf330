#pragma once
// LeNet-5 as ctnn declares it (LeCun et al., 1998, with ReLU and max pooling): the network of the lenet5
// example, the benchmarks and many tests. 61,706 parameters; input 1×28×28 (MNIST), output 10
// probabilities.
#include "../layers/activation.hpp"
#include "../layers/conv.hpp"
#include "../layers/dense.hpp"
#include "../layers/pool.hpp"
#include "../layers/softmax.hpp"
#include "../network/network.hpp"

namespace ctnn::models {

using LeNet5Layers = Seq<
    Conv<6, 5, Pad<2>>, ReLU, Pool<2>,
    Conv<16, 5>,        ReLU, Pool<2>,
    Dense<120>, ReLU,
    Dense<84>,  ReLU,
    Dense<10>,  Softmax>;

using LeNet5 = Network<LeNet5Layers, Input<1, 28, 28>>;

}  // namespace ctnn::models
