// A broken rule in a network that the program goes on to use (host forward, backward, parameters):
// the rule's message must be the only error, whatever uses the network afterwards.
// expect: ctnn: Conv stride must be positive
// expect-layer: 0
#include <ctnn/ctnn.hpp>
#include <ctnn/network/host_network.hpp>

#include <vector>

#ifdef CTNN_FAIL
using First = ctnn::Conv<6, 5, ctnn::Stride<0>>;
#else
using First = ctnn::Conv<6, 5, ctnn::Stride<1>>;
#endif
using Net = ctnn::Network<ctnn::Seq<First, ctnn::ReLU, ctnn::Pool<2>, ctnn::Dense<10>, ctnn::Softmax>,
                          ctnn::Input<1, 28, 28>>;

float run() {
  ctnn::HostNetwork<Net> net(4);
  std::vector<float> x(4 * 784, 0.5f), dy(4 * 10, 0.1f);
  const float* y = net.forward(x.data(), 4);
  net.backward(dy.data(), 4);
  return y[0] + net.params()[0] + float(ctnn::BufferPlan<Net>::activation_floats(4));
}
