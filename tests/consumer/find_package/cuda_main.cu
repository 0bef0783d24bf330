// The CUDA side of the find_package consumer: a .cu file that includes ctnn's CUDA network and cuBLAS
// through ctnn::ctnn (flags, include directories, cudart and cuBLAS all come with the target) and
// calls a constexpr host function of ctnn in a kernel (which needs ctnn's --expt-relaxed-constexpr).
// It needs no GPU: it prints the runtime's and cuBLAS's versions and launches nothing.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/cuda_network.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>

using Net = ctnn::Network<ctnn::Seq<ctnn::Conv<6, 5>, ctnn::ReLU, ctnn::Pool<2>, ctnn::Dense<10>,
                                    ctnn::Softmax>, ctnn::Input<1, 28, 28>>;

__global__ void kernel_first_dim(int* out) { *out = Net::input_shape::dim(1); }

int main() {
  int runtime = 0, cublas_major = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess ||
      cublasGetProperty(MAJOR_VERSION, &cublas_major) != CUBLAS_STATUS_SUCCESS) {
    std::puts("cannot query the CUDA runtime or cuBLAS");
    return 1;
  }
  std::printf("CUDA consumer: runtime %d, cuBLAS %d, %zu parameters\n", runtime, cublas_major,
              static_cast<std::size_t>(Net::param_count));
  return 0;
}
