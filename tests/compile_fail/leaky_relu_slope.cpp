// A LeakyReLU slope outside (0, 1).
// expect: ctnn: LeakyReLU's slope must be in (0, 1)
// expect-layer: 1
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Act = ctnn::LeakyReLU<-0.1f>;
#else
using Act = ctnn::LeakyReLU<0.1f>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<8>, Act, ctnn::Dense<2>>, ctnn::Input<4>>;
static_assert(Net::layer_count == 3);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(std::is_same_v<Net::shape_at<1>, ctnn::Shape<8>>);
#endif
