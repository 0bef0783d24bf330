// A HostNetwork of a Seq rather than of a Network, then used.
// expect: ctnn: HostNetwork takes a Network<Seq<...>, Input<...>>
#include <ctnn/ctnn.hpp>
#include <ctnn/network/host_network.hpp>

#include <vector>

using Layers = ctnn::Seq<ctnn::Dense<10>>;
#ifdef CTNN_FAIL
using Host = ctnn::HostNetwork<Layers>;
#else
using Host = ctnn::HostNetwork<ctnn::Network<Layers, ctnn::Input<784>>>;
#endif

float run() {
  Host net(8);
  std::vector<float> x(784, 1.0f);
  return net.forward(x.data(), 1)[0];
}
