#pragma once
// Shared by the GPU tests: exit 77 (CTest: skipped) when there is no CUDA device, fresh random
// inputs, poisoned outputs, and comparison against the host reference.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctnn/core/cuda_check.hpp>
#include <ctnn/core/random.hpp>

namespace ctnn_test {

// Call first in main(): without a usable device the test is skipped, not failed.
inline void require_cuda_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA device: skipping\n");
    std::exit(77);
  }
}

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float lo = -1.f, float hi = 1.f) {
  ctnn::Random rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(rng.uniform(lo, hi));
  return v;
}

// cudaMemset, then a wait for the device: a memset (or a pageable copy) on the legacy default stream may
// still be landing when it returns, and CudaNetwork's streams are non-blocking (not ordered after the
// legacy stream), so a kernel there could run before it lands. (On an H200, test_fusion_lenet failed
// three checks as that race would: the input it poisons read back as poison after the first kernel's
// gather, its gradients then differing; 2026-11-28.)
inline void fill_bytes_and_wait(void* ptr, int value, std::size_t bytes) {
  CTNN_CUDA_CHECK(cudaMemset(ptr, value, bytes));
  CTNN_CUDA_CHECK(cudaDeviceSynchronize());
}

// A device buffer that frees itself.
template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit DeviceBuffer(std::size_t count) : n(count) { CTNN_CUDA_CHECK(cudaMalloc(&ptr, (n ? n : 1) * sizeof(T))); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // upload and poison wait for the device (see fill_bytes_and_wait).
  void upload(const std::vector<T>& host) {
    CTNN_CUDA_CHECK(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    CTNN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    std::vector<T> host(n);
    CTNN_CUDA_CHECK(cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Fills with NaN bit patterns (0xFF bytes) so unwritten elements cannot pass a comparison.
  void poison() { fill_bytes_and_wait(ptr, 0xFF, n * sizeof(T)); }
};

// max |got - want| / (atol + rtol·|want|) must be <= 1; NaN never passes. Prints the worst element.
inline bool close(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                  double rtol = 1e-4, double atol = 1e-5) {
  if (got.size() != want.size()) {
    std::printf("FAIL %s: size %zu, expected %zu\n", what, got.size(), want.size());
    return false;
  }
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i])) / (atol + rtol * std::fabs(double(want[i])));
    if (!(err <= worst)) { worst = std::isnan(err) ? INFINITY : err; at = i; }
  }
  const bool ok = worst <= 1.0;
  std::printf("%s %s: worst at %zu: got %.7g want %.7g (%.3g of tolerance)\n", ok ? "ok  " : "FAIL", what, at,
              got.empty() ? 0.0 : double(got[at]), want.empty() ? 0.0 : double(want[at]), worst);
  return ok;
}

// Whether got and want hold the same floats, bit for bit.
template <class T>
bool same_bits(const std::vector<T>& got, const std::vector<T>& want) {
  return got.size() == want.size() && (got.empty() || std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0);
}

// Runs f: true when it throws std::invalid_argument with `needle` in its message. `message` gets
// what it threw, or why it did not count.
template <class F>
bool throws_invalid_argument(const std::string& needle, std::string& message, F&& f) {
  message = "(no exception)";
  try {
    f();
  } catch (const std::invalid_argument& e) {
    message = e.what();
    return message.find(needle) != std::string::npos;
  } catch (const std::exception& e) {
    message = std::string("wrong exception type: ") + e.what();
  }
  return false;
}

}  // namespace ctnn_test
