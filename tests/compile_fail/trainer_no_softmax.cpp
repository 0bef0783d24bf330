// A Trainer with softmax cross-entropy for a network that does not end in Softmax.
// expect: ctnn: SoftmaxCrossEntropy needs a network whose last layer is ctnn::Softmax
#include <ctnn/ctnn.hpp>
#include <ctnn/train/host_trainer.hpp>

#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, ctnn::ReLU>, ctnn::Input<784>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, ctnn::Softmax>, ctnn::Input<784>>;
#endif

double run(const ctnn::Dataset& data) {
  ctnn::Trainer<Net, ctnn::host, 64, ctnn::Sgd, ctnn::SoftmaxCrossEntropy> trainer(1);
  return trainer.evaluate(data).accuracy;
}
