// A negative pooling padding.
// expect: ctnn: pooling padding must not be negative
// expect-layer: 1
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Pooling = ctnn::AvgPool<3, ctnn::Stride<2>, ctnn::Pad<-1>>;
#else
using Pooling = ctnn::AvgPool<3, ctnn::Stride<2>, ctnn::Pad<1>>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, Pooling, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 3);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<1>, ctnn::Shape<6, 12, 12>>);
#endif
