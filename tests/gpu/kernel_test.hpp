#pragma once
// Shared by the per-kernel GPU tests (test_kernel_*.cu), on top of gpu_test.hpp: a pass/fail tally
// with the summary line, a tolerance for sums of many products, bitwise comparison, a stream.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpu_test.hpp"

namespace ctnn_test {

// CTNN_ONLY=<text> (for a sanitizer run, where every launch is slow) runs only the cases whose name
// contains the text; unset, every case runs.
inline bool case_selected(const char* name) {
  const char* only = std::getenv("CTNN_ONLY");
  return only == nullptr || std::strstr(name, only) != nullptr;
}

struct Tally {
  int passed = 0, failed = 0;
  bool operator()(bool ok) {
    (ok ? passed : failed) += 1;
    return ok;
  }
  // Prints "N passed, M failed"; the process's exit status.
  int summary() const {
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
  }
};

inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::fabs(double(x)) > m ? std::fabs(double(x)) : m;
  return m;
}

// For results that are float sums of many products, compared with the host's double sums. An
// element's rounding error scales with the magnitude of the partial sums, not with the (possibly
// cancelled) result, so besides rtol every element gets an absolute allowance of 1e-5 of the
// largest magnitude in the tensor. A float sum of n terms in chains of length m, combined in a fixed
// tree, has an error around ε·√m·|partial sum| with ε = 6e-8: below 1e-6 of the largest result for
// every size tested here, so the bound has a 10× margin and still catches any indexing error, which
// moves results by O(1).
inline bool close_sum(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                      double rtol = 1e-4) {
  const double floor = 1e-5 * max_abs(want);
  return close(got, want, what, rtol, floor > 1e-30 ? floor : 1e-30);
}

template <class T>
bool same_bits(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  const bool ok = same_bits(got, want);
  std::size_t at = 0;
  while (!ok && at < got.size() && at < want.size() && std::memcmp(&got[at], &want[at], sizeof(T)) == 0) ++at;
  std::printf("%s %s: %s", ok ? "ok  " : "FAIL", what, ok ? "bitwise equal\n" : "");
  if (!ok) std::printf("first difference at %zu of %zu\n", at, want.size());
  return ok;
}

// A check's name, "<name> batch <batch> <what>", in a buffer the labeler owns (valid until its next call).
struct Labeler {
  const char* name;
  char text[200] = {};
  explicit Labeler(const char* name_) : name(name_) {}
  const char* operator()(int batch, const char* what) {
    std::snprintf(text, sizeof text, "%s batch %d %s", name, batch, what);
    return text;
  }
};

// The stream the kernels under test run on (ctx.stream). A blocking stream: DeviceBuffer's uploads,
// poison and downloads run on the legacy default stream, which orders itself with it.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CTNN_CUDA_CHECK(cudaStreamCreate(&s)); }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void sync() const {
    CTNN_CUDA_CHECK(cudaStreamSynchronize(s));
    CTNN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace ctnn_test
