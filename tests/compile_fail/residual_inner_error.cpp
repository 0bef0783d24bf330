// A rule broken inside a Residual block: the one message is the inner layer's, and the notes name the
// block's position in the outer Seq and the inner layer's position in the block.
// expect: ctnn: pooling needs a C x H x W input, but its input is a flat vector
// expect-layer: 1
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Block = ctnn::Residual<ctnn::Seq<ctnn::Dense<16>, ctnn::Pool<2>>>;
#else
using Block = ctnn::Residual<ctnn::Seq<ctnn::Dense<16>, ctnn::ReLU>>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<16>, Block, ctnn::Dense<10>>, ctnn::Input<1, 12, 12>>;
static_assert(Net::layer_count == 3);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<1>, ctnn::Shape<16>>);
#endif
