// Softmax straight after a Conv: its input is 6x24x24, not a flat vector.
// expect: ctnn: Softmax needs a flat input vector; put a Dense layer before it
// expect-layer: 2
#include <ctnn/ctnn.hpp>

#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, ctnn::Softmax>,
                          ctnn::Input<1, 28, 28>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, ctnn::Dense<10>, ctnn::Softmax>,
                          ctnn::Input<1, 28, 28>>;
static_assert(std::is_same_v<Net::output_shape, ctnn::Shape<10>>);
#endif
static_assert(Net::layer_count > 0);  // instantiates the network
