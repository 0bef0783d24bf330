// A model card of a Seq rather than of a Network.
// expect: ctnn: print_model_card takes a Network<Seq<...>, Input<...>>
#include <ctnn/ctnn.hpp>
#include <ctnn/network/model_card.hpp>

#include <iostream>

using Layers = ctnn::Seq<ctnn::Dense<10>, ctnn::Softmax>;
#ifdef CTNN_FAIL
using Described = Layers;
#else
using Described = ctnn::Network<Layers, ctnn::Input<784>>;
#endif

void describe() { ctnn::print_model_card<Described>(std::cout, 64); }
