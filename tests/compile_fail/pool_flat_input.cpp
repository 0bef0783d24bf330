// Pooling after a Dense layer: its input is a flat vector.
// expect: ctnn: pooling needs a C x H x W input, but its input is a flat vector
// expect-layer: 2
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<64>, ctnn::ReLU, ctnn::Pool<2>, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Pool<2>, ctnn::Dense<64>, ctnn::ReLU, ctnn::Dense<10>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(std::is_same_v<Net::shape_at<0>, ctnn::Shape<1, 14, 14>>);
#endif
static_assert(Net::layer_count == 4);  // instantiates the network
