// A Network given its layers without the Seq around them, then used.
// expect: ctnn: a Network is declared as Network<Seq<Layers...>, Input<C, H, W>> (or Input<N>)
#include <ctnn/ctnn.hpp>
#include <ctnn/network/host_network.hpp>

#include <vector>

#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Dense<10>, ctnn::Input<784>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>>, ctnn::Input<784>>;
#endif

float run() {
  ctnn::HostNetwork<Net> net(2);
  std::vector<float> x(2 * 784, 1.0f);
  return net.forward(x.data(), 2)[0];
}
