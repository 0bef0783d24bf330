// A Conv whose kernel size is not positive.
// expect: ctnn: Conv kernel size must be positive
// expect-layer: 0
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using First = ctnn::Conv<6, 0>;
#else
using First = ctnn::Conv<6, 1>;
#endif
using Net = ctnn::Network<ctnn::Seq<First, ctnn::ReLU, ctnn::Dense<10>>, ctnn::Input<3, 8, 8>>;
static_assert(Net::layer_count == 3);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<0>, ctnn::Shape<6, 8, 8>>);
#endif
