// A layer with a host reference but no CUDA implementation, used by the CUDA network.
// expect: ctnn: no CUDA implementation for this layer
#include <ctnn/ctnn.hpp>
#include <ctnn/network/cuda_network.hpp>

// Doubles its input: a complete layer for the host, with no cuda_layer specialisation.
struct Double : ctnn::layer_tag, ctnn::no_params {
  static constexpr const char* name = "Double";
  static std::string label() { return name; }
  template <class In> static constexpr bool check() { return true; }
  template <class In>
  struct bind : ctnn::no_params {
    using input_shape = In;
    using output_shape = In;
    static constexpr std::size_t in_size = In::size, out_size = In::size, flops = In::size;
    template <class T> static void forward(const T*, const T*, const T* x, T* y, int batch) {
      for (std::size_t i = 0; i < std::size_t(batch) * in_size; ++i) y[i] = 2 * x[i];
    }
    template <class T> static void backward(const T*, const T*, const T*, const T* dy, T* dx, T*, T*, int batch) {
      if (dx) for (std::size_t i = 0; i < std::size_t(batch) * in_size; ++i) dx[i] = 2 * dy[i];
    }
  };
};
#ifdef CTNN_FAIL
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, Double>, ctnn::Input<16>>;
#else
using Net = ctnn::Network<ctnn::Seq<ctnn::Dense<10>, ctnn::ReLU>, ctnn::Input<16>>;
#endif
void run() {
  ctnn::CudaNetwork<Net, 8> net(1);
  net.forward(8);
}
