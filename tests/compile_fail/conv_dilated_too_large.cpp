// A dilated kernel whose extent, dilation·(K−1)+1 = 2·4+1 = 9, exceeds the padded 7x7 input (5+2·1).
// expect: ctnn: Conv kernel (dilated) is larger than its padded input
// expect-layer: 0
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using First = ctnn::Conv<4, 5, ctnn::Dilation<2>, ctnn::Pad<1>>;
#else
using First = ctnn::Conv<4, 5, ctnn::Dilation<2>, ctnn::Pad<2>>;  // extent 9 = 5 + 2·2
#endif
using Net = ctnn::Network<ctnn::Seq<First, ctnn::Dense<2>>, ctnn::Input<3, 5, 5>>;
static_assert(Net::layer_count == 2);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<0>, ctnn::Shape<4, 1, 1>>);
#endif
