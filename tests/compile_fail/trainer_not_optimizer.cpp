// A Trainer given something that is not an optimizer type as its optimizer.
// expect: ctnn: the Trainer's optimizer is not an optimizer type
#include <ctnn/ctnn.hpp>
#include <ctnn/train/host_trainer.hpp>
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, ctnn::Softmax>, ctnn::Input<784>>;
#ifdef CTNN_FAIL
struct NotAnOptimizer {};
using Opt = NotAnOptimizer;
#else
using Opt = ctnn::Adam;
#endif
double run(const ctnn::Dataset& data) {
  ctnn::Trainer<Net, ctnn::host, 64, Opt> trainer(1);
  ctnn::TrainOptions options;
  trainer.fit(data, options);
  return trainer.evaluate(data).accuracy;
}
