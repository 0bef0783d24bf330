// A dropout probability of 1 (everything dropped, and the 1/(1-P) scale infinite).
// expect: ctnn: Dropout's probability must be in [0, 1)
// expect-layer: 1
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Drop = ctnn::Dropout<1.0f>;
#else
using Drop = ctnn::Dropout<0.25f>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<8>, Drop, ctnn::Dense<2>>, ctnn::Input<4>>;
static_assert(Net::layer_count == 3);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<1>, ctnn::Shape<8>>);
#endif
