// A negative Conv padding.
// expect: ctnn: Conv padding must not be negative
// expect-layer: 0
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using First = ctnn::Conv<6, 5, ctnn::Pad<-2>>;
#else
using First = ctnn::Conv<6, 5, ctnn::Pad<2>>;
#endif
using Net = ctnn::Network<ctnn::Seq<First, ctnn::ReLU, ctnn::Dense<10>>, ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 3);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<0>, ctnn::Shape<6, 28, 28>>);
#endif
