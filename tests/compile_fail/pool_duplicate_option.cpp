// The same pooling option given twice.
// expect: ctnn: a pooling option is given twice
// expect-layer: 2
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Pooling = ctnn::AvgPool<3, ctnn::Stride<2>, ctnn::Stride<1>>;
#else
using Pooling = ctnn::AvgPool<3, ctnn::Stride<2>>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, Pooling, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 4);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<2>, ctnn::Shape<6, 11, 11>>);
#endif
