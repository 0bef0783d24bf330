// A Residual block without layers.
// expect: ctnn: a Residual block needs at least one layer
// expect-layer: 1
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Block = ctnn::Residual<ctnn::Seq<>>;
#else
using Block = ctnn::Residual<ctnn::Seq<ctnn::ReLU>>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<16>, Block, ctnn::Dense<10>>, ctnn::Input<8>>;
static_assert(Net::layer_count == 3);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<1>, ctnn::Shape<16>>);
#endif
