// A flat input of negative length.
// expect: ctnn: every Input dimension must be positive
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using In = ctnn::Input<-784>;
#else
using In = ctnn::Input<784>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, ctnn::Softmax>, In>;
static_assert(Net::layer_count == 2);  // instantiates the network
