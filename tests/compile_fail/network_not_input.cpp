// A Network given a Shape where its Input belongs.
// expect: ctnn: a Network is declared as Network<Seq<Layers...>, Input<C, H, W>> (or Input<N>)
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using In = ctnn::Shape<1, 28, 28>;
#else
using In = ctnn::Input<1, 28, 28>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, ctnn::Dense<10>>, In>;
static_assert(sizeof(Net) > 0);  // instantiates the network
