// A Conv after a Dense layer: its input is a flat vector.
// expect: ctnn: Conv needs a C x H x W input, but its input is a flat vector
// expect-layer: 2
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<100>, ctnn::ReLU, ctnn::Conv<6, 3>>,
                          ctnn::Input<1, 28, 28>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 3>, ctnn::ReLU, ctnn::Dense<100>>,
                          ctnn::Input<1, 28, 28>>;
static_assert(std::is_same_v<Net::output_shape, ctnn::Shape<100>>);
#endif
static_assert(Net::layer_count == 3);  // instantiates the network
