// A broken rule in a network that the program trains with the host Trainer and describes with the
// model card: the rule's message must be the only error.
// expect: ctnn: pooling window is larger than its padded input
// expect-layer: 5
#include <ctnn/ctnn.hpp>
#include <ctnn/network/model_card.hpp>
#include <ctnn/train/host_trainer.hpp>

#include <iostream>

#ifdef CTNN_FAIL
using Pool2 = ctnn::Pool<11>;  // the input is 16x10x10
#else
using Pool2 = ctnn::Pool<2>;
#endif
using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5, ctnn::Pad<2>>, ctnn::ReLU, ctnn::Pool<2>,
                                    ctnn::Conv<16, 5>, ctnn::ReLU, Pool2, ctnn::Dense<10>, ctnn::Softmax>,
                          ctnn::Input<1, 28, 28>>;

double run(const ctnn::Dataset& train, const ctnn::Dataset& test) {
  ctnn::print_model_card<Net>(std::cout, 32);
  ctnn::Trainer<Net, ctnn::host, 32> trainer(7);
  ctnn::TrainOptions options;
  options.batch = 32;
  trainer.fit(train, options, &test);
  return trainer.evaluate(test).accuracy;
}
