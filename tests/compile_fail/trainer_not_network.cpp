// A Trainer given the layer list instead of the Network.
// expect: ctnn: Trainer<Net, Backend, MaxBatch> takes a Network<Seq<...>, Input<...>> as Net
#include <ctnn/ctnn.hpp>
#include <ctnn/train/host_trainer.hpp>

using Layers = ctnn::Seq<ctnn::Dense<10>, ctnn::Softmax>;
#ifdef CTNN_FAIL
using Net = Layers;
#else
using Net = ctnn::Network<Layers, ctnn::Input<784>>;
#endif

double run(const ctnn::Dataset& data) {
  ctnn::Trainer<Net, ctnn::host, 64> trainer(1);
  return trainer.evaluate(data).accuracy;
}
