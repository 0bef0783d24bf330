// A Dense layer with no units.
// expect: ctnn: Dense needs at least one output unit (N > 0)
// expect-layer: 2
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Hidden = ctnn::Dense<0>;
#else
using Hidden = ctnn::Dense<32>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<64>, ctnn::Tanh, Hidden, ctnn::Sigmoid, ctnn::Dense<10>>,
                          ctnn::Input<784>>;
static_assert(Net::layer_count == 5);  // instantiates the network
#ifndef CTNN_FAIL
static_assert(Net::param_count == 784 * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10);
#endif
