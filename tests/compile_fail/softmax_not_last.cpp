// A Softmax in the middle of the network, where a ReLU was meant.
// expect: ctnn: Softmax must be the last layer
// expect-layer: 3
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Hidden = ctnn::Softmax;
#else
using Hidden = ctnn::ReLU;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<128>, ctnn::ReLU, ctnn::Dense<64>, Hidden,
                                    ctnn::Dense<10>, ctnn::Softmax>,
                          ctnn::Input<784>>;
static_assert(Net::layer_count == 6);  // instantiates the network
