// An input with a zero dimension.
// expect: ctnn: every Input dimension must be positive
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using In = ctnn::Input<1, 0, 28>;
#else
using In = ctnn::Input<1, 28, 28>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, ctnn::Dense<10>>, In>;
static_assert(Net::layer_count == 3);  // instantiates the network
