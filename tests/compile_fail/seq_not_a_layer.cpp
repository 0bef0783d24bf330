// An option misplaced as a layer: Seq<Conv<6, 5>, Pad<2>, ...> instead of Conv<6, 5, Pad<2>>.
// expect: ctnn: an element of the Seq is not a layer
// expect-layer: 1
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Layers = ctnn::Seq<ctnn::Conv<6, 5>, ctnn::Pad<2>, ctnn::ReLU, ctnn::Pool<2>, ctnn::Dense<10>>;
#else
using Layers = ctnn::Seq<ctnn::Conv<6, 5, ctnn::Pad<2>>, ctnn::ReLU, ctnn::Pool<2>, ctnn::Dense<10>>;
#endif
using Net = ctnn::Network<Layers, ctnn::Input<1, 28, 28>>;
static_assert(Net::layer_count > 0);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<2>, ctnn::Shape<6, 14, 14>>);
#endif
