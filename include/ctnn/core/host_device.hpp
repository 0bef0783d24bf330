#pragma once
// CTNN_HOST_DEVICE marks a function callable from host and device code when compiled by nvcc, and
// expands to nothing for a plain C++ compiler, so one definition serves both backends.
#include <cmath>
#include <type_traits>

#ifdef __CUDACC__
#define CTNN_HOST_DEVICE __host__ __device__
#else
#define CTNN_HOST_DEVICE
#endif

namespace ctnn {

// Float arithmetic rounded after every operation on both sides: nvcc contracts a·b + c into one FMA
// unless told otherwise, the host compiler (no -mfma) does not, so an update written with these gives
// the same bits on the host and the device.
namespace rn {
CTNN_HOST_DEVICE inline float add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
CTNN_HOST_DEVICE inline float sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
CTNN_HOST_DEVICE inline float mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
CTNN_HOST_DEVICE inline double mul(double a, double b) {  // (the host reference in double)
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
CTNN_HOST_DEVICE inline float div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
CTNN_HOST_DEVICE inline float sqrt(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
}  // namespace rn

}  // namespace ctnn
