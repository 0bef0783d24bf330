// Deploy of a Seq rather than of a Network.
// expect: ctnn: Deploy takes a Network<Seq<...>, Input<...>>
#include <ctnn/ctnn.hpp>

using Layers = ctnn::Seq<ctnn::Dense<16>, ctnn::BatchNorm, ctnn::ReLU, ctnn::Dropout<>, ctnn::Dense<10>, ctnn::Softmax>;
#ifdef CTNN_FAIL
using Trained = Layers;
#else
using Trained = ctnn::Network<Layers, ctnn::Input<784>>;
#endif

using Deployed = ctnn::Deploy<Trained>;
Deployed* deployed = nullptr;
