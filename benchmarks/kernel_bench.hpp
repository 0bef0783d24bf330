#pragma once
// What the per-kernel benchmarks (conv_bench, dense_bench) share: device buffers of fresh random
// numbers, the timing loop and the table row, and the device's peaks.
// Timing: 5 warm-up calls (none for `1 1`, the setting for ncu), then `g_samples` samples of `g_reps`
// back-to-back calls (or one graph of them: g_graph) between two CUDA events on one stream; the median
// sample / reps.
// Peaks: FP32 FMA lanes (128 per SM on Hopper) × 2 × SM count × the peak clock the device reports; the
// dense TF32 tensor peak with 1024 FMA per clock per SM on Hopper (H100 SXM: 495 TFLOP/s at 1.83 GHz).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <ctnn/core/cuda_check.hpp>
#include <ctnn/core/random.hpp>

namespace ctnn_bench {

inline int g_samples = 30, g_reps = 10;
inline double g_peak_tflops = 0, g_tf32_peak_tflops = 0;

// n floats of device memory, uniform in [-1, 1).
struct Buf {
  float* p = nullptr;
  explicit Buf(std::size_t n, std::uint64_t seed) {
    CTNN_CUDA_CHECK(cudaMalloc(&p, (n ? n : 1) * sizeof(float)));
    std::vector<float> h(n);
    ctnn::Random rng(seed);
    for (auto& v : h) v = float(rng.uniform(-1.0, 1.0));
    CTNN_CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

// The median time of one call of launch on stream s, in µs. With g_graph the `reps` calls of a sample
// are captured once into a CUDA graph and each sample launches it: the GPU's time without the host's
// launch overhead (back-to-back launches of kernels of a few µs are bound by the host, ~5 µs each on
// an H200's machine), as in a network's captured training step.
inline bool g_graph = false;
template <class F>
double time_us(cudaStream_t s, F&& launch) {
  const int warmups = g_samples == 1 && g_reps == 1 ? 0 : 5;  // (1 1: one call each, for ncu)
  for (int i = 0; i < warmups; ++i) launch();
  CTNN_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraphExec_t exec = nullptr;
  if (g_graph) {
    cudaGraph_t graph = nullptr;
    CTNN_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int r = 0; r < g_reps; ++r) launch();
    CTNN_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CTNN_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CTNN_CUDA_CHECK(cudaGraphDestroy(graph));
    CTNN_CUDA_CHECK(cudaGraphLaunch(exec, s));  // (its first launch uploads it)
  }
  cudaEvent_t a, b;
  CTNN_CUDA_CHECK(cudaEventCreate(&a));
  CTNN_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < g_samples; ++i) {
    CTNN_CUDA_CHECK(cudaEventRecord(a, s));
    if (exec) CTNN_CUDA_CHECK(cudaGraphLaunch(exec, s));
    else
      for (int r = 0; r < g_reps; ++r) launch();
    CTNN_CUDA_CHECK(cudaEventRecord(b, s));
    CTNN_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CTNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(1e3 * ms / g_reps);
  }
  CTNN_CUDA_CHECK(cudaGetLastError());
  if (exec) cudaGraphExecDestroy(exec);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One table row: layer, batch, direction, kernel, * when the rule picks it, µs, GFLOP, TFLOP/s, % of peak.
inline void row(const char* layer, int batch, const char* dir, const char* kernel, bool chosen, double us,
                double flops, double peak) {
  const double tf = flops / (us * 1e-6) / 1e12;
  std::printf("%-26s %5d  %-8s %-22s %c %9.1f %8.3f %8.2f %6.1f%%\n", layer, batch, dir, kernel,
              chosen ? '*' : ' ', us, flops / 1e9, tf, 100.0 * tf / peak);
}

// Sets the two peaks and prints the device line.
inline void print_device() {
  int dev = 0, sms = 0, khz = 0;
  cudaDeviceProp prop{};
  CTNN_CUDA_CHECK(cudaGetDevice(&dev));
  CTNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  CTNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CTNN_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  g_peak_tflops = 128.0 * 2 * sms * khz * 1e3 / 1e12;
  g_tf32_peak_tflops = 1024.0 * 2 * sms * khz * 1e3 / 1e12;
  std::printf("device: %s, %d SMs, peak clock %.0f MHz: FP32 peak %.1f TFLOP/s (128 FMA/clk/SM), dense TF32 "
              "tensor peak %.1f TFLOP/s (1024 FMA/clk/SM; %% column of the tf32 rows)\n",
              prop.name, sms, khz / 1e3, g_peak_tflops, g_tf32_peak_tflops);
}

}  // namespace ctnn_bench
