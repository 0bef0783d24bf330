// A Conv stride of zero.
// expect: ctnn: Conv stride must be positive
// expect-layer: 3
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Third = ctnn::Conv<16, 3, ctnn::Stride<0>>;
#else
using Third = ctnn::Conv<16, 3, ctnn::Stride<1>>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<8, 3, ctnn::Pad<1>>, ctnn::ReLU, ctnn::Pool<2>, Third,
                                    ctnn::ReLU, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 6);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<3>, ctnn::Shape<16, 12, 12>>);
#endif
