// A host program (compiled by the C++ compiler, not nvcc) that uses ctnn with the CUDA runtime and
// cuBLAS, built with nothing but `pkg-config --cflags --libs ctnn-cuda`. It needs no GPU: it prints
// the runtime's and cuBLAS's versions.
#include <ctnn/ctnn.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>

using LeNet5 = ctnn::Seq<
    ctnn::Conv<6, 5, ctnn::Pad<2>>, ctnn::ReLU, ctnn::Pool<2>,
    ctnn::Conv<16, 5>,              ctnn::ReLU, ctnn::Pool<2>,
    ctnn::Dense<120>, ctnn::ReLU,
    ctnn::Dense<84>,  ctnn::ReLU,
    ctnn::Dense<10>,  ctnn::Softmax>;
using Net = ctnn::Network<LeNet5, ctnn::Input<1, 28, 28>>;

int main() {
  int runtime = 0, cublas_major = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess ||
      cublasGetProperty(MAJOR_VERSION, &cublas_major) != CUBLAS_STATUS_SUCCESS) {
    std::puts("cannot query the CUDA runtime or cuBLAS");
    return 1;
  }
  std::printf("cudart %d, cuBLAS %d, LeNet-5 has %zu parameters\n", runtime, cublas_major,
              static_cast<std::size_t>(Net::param_count));
  return 0;
}
