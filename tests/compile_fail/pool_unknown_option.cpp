// A pooling option that is not Stride or Pad (pooling has no dilation).
// expect: ctnn: unknown pooling option; pooling accepts Stride<S> and Pad<P>
// expect-layer: 2
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Pooling = ctnn::Pool<2, ctnn::Dilation<2>>;
#else
using Pooling = ctnn::Pool<2>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, Pooling, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count == 4);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<2>, ctnn::Shape<6, 12, 12>>);
#endif
