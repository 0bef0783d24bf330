// A timeline of the kernels a CUDA program runs, from CUPTI's activity records: when each kernel
// started and ended on the GPU, on which stream, kernels of different streams side by side. Nsight
// Systems shows the same; this is for machines without it. Preload it into any program:
//
//   export CTNN_TIMELINE_FROM=0.4 CTNN_TIMELINE_COUNT=48
//   LD_PRELOAD=build/benchmarks/libkernel_timeline.so build/benchmarks/lenet5_bench --batches 64 --epochs 2
//
// At exit it prints CTNN_TIMELINE_COUNT kernels (default 40) in order of their start, from the record
// at fraction CTNN_TIMELINE_FROM of all (default: the last ones), one line each to stderr:
//   TIMELINE <start µs> <end µs> <duration µs> s<stream> <kernel name>
// times relative to the first line's start. Kernels inside CUDA graphs are recorded too, on the streams
// the graph runs them on. docs/fusion.md has LeNet-5's training step through it.
#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Kernel {
  unsigned long long start, end;
  unsigned stream;
  std::string name;
};
std::mutex kernels_mutex;
std::vector<Kernel> kernels;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // One buffer holds ~250,000 records: with 8 MB buffers, runs that needed a second one aborted in
  // free() at exit (CUDA 13's CUPTI on an H200, 2026-11-28; cause not found).
  *size = std::size_t{64} << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(kernels_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel9*>(record);
      kernels.push_back({k->start, k->end, k->streamId, k->name ? k->name : "?"});
    }
  std::free(buffer);
}

// "_ZN4ctnn7kernels17kernel_dense_chainINS0_..." → "kernel_dense_chainINS0_..." (60 characters at most).
std::string short_name(const std::string& mangled) {
  const std::size_t at = mangled.find("kernel_");
  return mangled.substr(at == std::string::npos ? 0 : at, 60);
}

void print_timeline() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(kernels_mutex);
  std::sort(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) { return a.start < b.start; });
  const char* count_env = std::getenv("CTNN_TIMELINE_COUNT");
  const char* from_env = std::getenv("CTNN_TIMELINE_FROM");
  const std::size_t count = count_env ? std::size_t(std::strtoul(count_env, nullptr, 10)) : 40;
  std::size_t first = kernels.size() > count ? kernels.size() - count : 0;
  if (from_env) first = std::min(kernels.size(), std::size_t(std::strtod(from_env, nullptr) * double(kernels.size())));
  std::fprintf(stderr, "TIMELINE %zu kernels recorded; from kernel %zu\n", kernels.size(), first);
  if (first >= kernels.size()) return;
  const unsigned long long t0 = kernels[first].start;
  for (std::size_t i = first; i < kernels.size() && i < first + count; ++i) {
    const Kernel& k = kernels[i];
    std::fprintf(stderr, "TIMELINE %9.2f %9.2f %7.2f s%u %s\n", double(k.start - t0) / 1e3, double(k.end - t0) / 1e3,
                 double(k.end - k.start) / 1e3, k.stream, short_name(k.name).c_str());
  }
}

__attribute__((constructor)) void start_recording() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "TIMELINE: CUPTI did not start; no timeline\n");
    return;
  }
  std::atexit(print_timeline);
}

}  // namespace
