// A host Trainer of a network that is only a Softmax: nothing to train.
// expect: ctnn: SoftmaxCrossEntropy needs at least one layer before the Softmax
#include <ctnn/ctnn.hpp>
#include <ctnn/train/host_trainer.hpp>

#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Seq<ctnn::Softmax>, ctnn::Input<10>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, ctnn::Softmax>, ctnn::Input<10>>;
#endif

double run(const ctnn::Dataset& data) {
  ctnn::Trainer<Net, ctnn::host, 8> trainer(1);
  return trainer.evaluate(data).accuracy;
}
