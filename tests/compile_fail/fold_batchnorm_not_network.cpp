// fold_batchnorm of a Seq rather than of a Network.
// expect: ctnn: fold_batchnorm takes a Network<Seq<...>, Input<...>>
#include <ctnn/ctnn.hpp>

#include <vector>

using Layers = ctnn::Seq<ctnn::Conv<4, 3>, ctnn::BatchNorm, ctnn::ReLU, ctnn::Dense<10>, ctnn::Softmax>;
#ifdef CTNN_FAIL
using Trained = Layers;
#else
using Trained = ctnn::Network<Layers, ctnn::Input<1, 8, 8>>;
#endif

ctnn::DeployedParameters fold(const std::vector<float>& params, const std::vector<float>& state) {
  return ctnn::fold_batchnorm<Trained>(params, state);
}
