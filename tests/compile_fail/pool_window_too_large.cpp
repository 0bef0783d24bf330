// A pooling window larger than its input: after Conv 5, Pool 2, Conv 5, Pool 2 the input is 16x4x4.
// expect: ctnn: pooling window is larger than its padded input
// expect-layer: 4
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Last = ctnn::AvgPool<5>;
#else
using Last = ctnn::AvgPool<4>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::Pool<2>, ctnn::Conv<16, 5>, ctnn::Pool<2>,
                                    Last, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 6);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<4>, ctnn::Shape<16, 1, 1>>);
#endif
