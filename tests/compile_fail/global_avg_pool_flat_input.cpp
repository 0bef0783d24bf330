// GlobalAvgPool after a dense layer: there are no planes to average.
// expect: ctnn: GlobalAvgPool needs a C x H x W input, but its input is a flat vector
// expect-layer: 2
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<4, 3>, ctnn::Dense<16>, ctnn::GlobalAvgPool, ctnn::Dense<2>>,
                          ctnn::Input<1, 8, 8>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<4, 3>, ctnn::ReLU, ctnn::GlobalAvgPool, ctnn::Dense<2>>,
                          ctnn::Input<1, 8, 8>>;
#endif
static_assert(Net::layer_count == 4);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<2>, ctnn::Shape<4>>);
#endif
