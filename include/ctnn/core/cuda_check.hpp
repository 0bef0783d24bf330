#pragma once
// Every CUDA and cuBLAS call is checked; a failure throws ctnn::cuda_error naming the file, line,
// the call and the error string.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace ctnn {

struct cuda_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void throw_cuda_error(const char* file, int line, const char* call, const std::string& what) {
  throw cuda_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + what);
}
inline void check_cuda(cudaError_t status, const char* file, int line, const char* call) {
  if (status != cudaSuccess) throw_cuda_error(file, line, call, cudaGetErrorString(status));
}
inline void check_cublas(cublasStatus_t status, const char* file, int line, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cuda_error(file, line, call, cublasGetStatusString(status));
}
}  // namespace detail

}  // namespace ctnn

#define CTNN_CUDA_CHECK(call) ::ctnn::detail::check_cuda((call), __FILE__, __LINE__, #call)
#define CTNN_CUBLAS_CHECK(call) ::ctnn::detail::check_cublas((call), __FILE__, __LINE__, #call)
// After a kernel launch: catches bad launch configurations (the kernel's own faults surface at the
// next synchronising call).
#define CTNN_CHECK_LAUNCH() ::ctnn::detail::check_cuda(cudaGetLastError(), __FILE__, __LINE__, "kernel launch")
