#pragma once
// CTNN_HOST_DEVICE marks a function callable from host and device code when compiled by nvcc, and
// expands to nothing for a plain C++ compiler, so one definition serves both backends.
#include <type_traits>

#ifdef __CUDACC__
#define CTNN_HOST_DEVICE __host__ __device__
#else
#define CTNN_HOST_DEVICE
#endif

namespace ctnn {

// a·b rounded on its own: nvcc contracts a·b + c into one FMA by default, the host compiler does not,
// so where host and device must agree to the bit the product is written with this.
template <class T>
CTNN_HOST_DEVICE inline T mul_rn(T a, T b) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return __fmul_rn(a, b);
  else if constexpr (std::is_same_v<T, double>) return __dmul_rn(a, b);
  else return a * b;
#else
  return a * b;
#endif
}

}  // namespace ctnn
