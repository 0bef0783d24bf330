// An input of rank 2: images are Input<C, H, W>, even with one channel.
// expect: ctnn: the input is Input<C, H, W> or Input<N>
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using In = ctnn::Input<28, 28>;
#else
using In = ctnn::Input<1, 28, 28>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, ctnn::Dense<10>>, In>;
static_assert(Net::layer_count == 3);  // instantiates the network
