// A network without layers.
// expect: ctnn: the Seq is empty; a network needs at least one layer
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Layers = ctnn::Seq<>;
#else
using Layers = ctnn::Seq<ctnn::Dense<10>>;
#endif
using Net = ctnn::Network<Layers, ctnn::Input<784>>;
static_assert(Net::layer_count < 2);  // instantiates the network
