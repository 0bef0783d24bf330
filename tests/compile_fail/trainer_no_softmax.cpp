// A Trainer for a network that does not end in Softmax (its loss is softmax cross-entropy).
// expect: ctnn: the Trainer's loss is softmax cross-entropy, so the network's last layer must be Softmax
#include <ctnn/ctnn.hpp>
#include <ctnn/train/host_trainer.hpp>

#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, ctnn::ReLU>, ctnn::Input<784>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, ctnn::Softmax>, ctnn::Input<784>>;
#endif

double run(const ctnn::io::Dataset& data) {
  ctnn::Trainer<Net, ctnn::host, 64> trainer(1);
  return trainer.evaluate(data).accuracy;
}
