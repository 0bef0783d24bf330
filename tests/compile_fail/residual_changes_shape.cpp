// A Residual block whose layers change the shape: input + f(input) is undefined.
// expect: ctnn: a Residual block must keep the shape of its input
// expect-layer: 1
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Block = ctnn::Residual<ctnn::Seq<ctnn::Conv<8, 3>, ctnn::ReLU>>;
#else
using Block = ctnn::Residual<ctnn::Seq<ctnn::Conv<8, 3, ctnn::Pad<1>>, ctnn::ReLU>>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<8, 3>, Block, ctnn::Dense<10>>, ctnn::Input<1, 12, 12>>;
static_assert(Net::layer_count == 3);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<1>, ctnn::Shape<8, 10, 10>>);
#endif
