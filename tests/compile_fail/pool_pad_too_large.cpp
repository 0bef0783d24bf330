// Pooling padding of more than half the window: some windows would see padding only.
// expect: ctnn: pooling padding must be at most half the window
// expect-layer: 2
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Pooling = ctnn::Pool<2, ctnn::Pad<2>>;
#else
using Pooling = ctnn::Pool<2, ctnn::Pad<1>>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, Pooling, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 4);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<2>, ctnn::Shape<6, 13, 13>>);
#endif
