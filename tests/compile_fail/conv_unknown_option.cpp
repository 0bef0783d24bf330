// A Conv option that is not Stride, Pad or Dilation (here an activation, as if it could be fused).
// expect: ctnn: unknown Conv option; Conv accepts Stride<S>, Pad<P> and Dilation<D>
// expect-layer: 0
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5, ctnn::ReLU>, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(std::is_same_v<Net::shape_at<0>, ctnn::Shape<6, 24, 24>>);
#endif
static_assert(Net::layer_count > 0);  // instantiates the network
