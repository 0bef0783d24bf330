// A pooling stride of zero.
// expect: ctnn: pooling stride must be positive
// expect-layer: 1
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Pooling = ctnn::Pool<3, ctnn::Stride<0>>;
#else
using Pooling = ctnn::Pool<3, ctnn::Stride<1>>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, Pooling, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 3);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<1>, ctnn::Shape<6, 22, 22>>);
#endif
