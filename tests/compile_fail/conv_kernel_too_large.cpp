// LeNet-5 with a 15x15 kernel as layer 3, where the input is 6x14x14.
// expect: ctnn: Conv kernel (dilated) is larger than its padded input
// expect-layer: 3
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Conv2 = ctnn::Conv<16, 15>;
#else
using Conv2 = ctnn::Conv<16, 5>;
#endif
using LeNet5 = ctnn::Seq<
    ctnn::Conv<6, 5, ctnn::Pad<2>>, ctnn::ReLU, ctnn::Pool<2>,
    Conv2,                          ctnn::ReLU, ctnn::Pool<2>,
    ctnn::Dense<120>, ctnn::ReLU,
    ctnn::Dense<84>,  ctnn::ReLU,
    ctnn::Dense<10>,  ctnn::Softmax>;
using Net = ctnn::Network<LeNet5, ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 12);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(Net::param_count == 61'706);
#endif
