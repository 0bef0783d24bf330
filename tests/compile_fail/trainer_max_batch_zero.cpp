// A host Trainer whose compile-time maximum batch is zero.
// expect: ctnn: a Trainer's MaxBatch must be at least 1
#include <ctnn/ctnn.hpp>
#include <ctnn/train/host_trainer.hpp>

using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, ctnn::Softmax>, ctnn::Input<784>>;
#ifdef CTNN_FAIL
constexpr int max_batch = 0;
#else
constexpr int max_batch = 64;
#endif

double run(const ctnn::Dataset& data) {
  ctnn::Trainer<Net, ctnn::host, max_batch> trainer(1);
  return trainer.evaluate(data).accuracy;
}
