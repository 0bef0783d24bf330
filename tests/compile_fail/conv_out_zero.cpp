// A Conv with no output channels.
// expect: ctnn: Conv needs at least one output channel (Out > 0)
// expect-layer: 2
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Second = ctnn::Conv<0, 3>;
#else
using Second = ctnn::Conv<8, 3>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<4, 3>, ctnn::ReLU, Second, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 4);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<2>, ctnn::Shape<8, 24, 24>>);
#endif
