// The device data pipeline (kernels/data.cuh; the epoch's order comes from the host, train/loop.hpp).
// Gather + normalise: bitwise equal to core/normalize.hpp on the host, through the vector path
// (S = 784), the scalar path (S = 10) and a misaligned output, by index list and by contiguous range,
// with the samples' float targets; an index past the data set yields NaN pixels and label −1.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <vector>

#include <ctnn/kernels/data.cuh>
#include <ctnn/core/normalize.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

template <int S>
void test_gather(Tally& t, std::size_t count, int batch, bool use_indices, int out_offset, std::uint64_t seed) {
  Stream stream;
  Random rng(seed);
  std::vector<std::uint8_t> images(count * S), labels(count);
  for (auto& v : images) v = std::uint8_t(rng.below(256));
  for (auto& v : labels) v = std::uint8_t(rng.below(10));
  constexpr int width = 3;  // float targets per sample
  std::vector<float> targets(count * width);
  for (auto& v : targets) v = float(rng.uniform(-2, 2));
  std::vector<std::uint32_t> idx(batch);
  const std::size_t first = use_indices ? 0 : count - std::size_t(batch) - 1;
  for (int b = 0; b < batch; ++b) idx[b] = use_indices ? std::uint32_t(rng.below(count)) : std::uint32_t(first + b);
  if (use_indices && batch > 3) idx[3] = std::uint32_t(count);  // out of range

  const float mean = 0.1307f, stddev = 0.3081f;
  std::vector<float> want(std::size_t(batch) * S);
  std::vector<std::int32_t> want_labels(batch);
  std::vector<float> want_targets(std::size_t(batch) * width);
  for (int b = 0; b < batch; ++b) {
    if (idx[b] >= count) continue;
    normalize_pixels(images.data() + std::size_t(idx[b]) * S, S, mean, stddev, want.data() + std::size_t(b) * S);
    want_labels[b] = labels[idx[b]];
    for (int k = 0; k < width; ++k) want_targets[std::size_t(b) * width + k] = targets[std::size_t(idx[b]) * width + k];
  }

  DeviceBuffer<std::uint8_t> d_images(images), d_labels(labels);
  DeviceBuffer<std::uint32_t> d_idx(idx);
  DeviceBuffer<float> d_out(std::size_t(batch) * S + 1);
  DeviceBuffer<std::int32_t> d_out_labels(batch);
  DeviceBuffer<float> d_targets(targets), d_out_targets(want_targets.size());
  d_out.poison(), d_out_labels.poison(), d_out_targets.poison();
  kernels::gather_normalize<S>(stream.s, d_images.ptr, d_labels.ptr, count, use_indices ? d_idx.ptr : nullptr, first,
                               batch, mean, stddev, d_out.ptr + out_offset, d_out_labels.ptr, d_targets.ptr, width,
                               d_out_targets.ptr);
  stream.sync();
  std::vector<float> got(std::size_t(batch) * S);
  CTNN_CUDA_CHECK(cudaMemcpy(got.data(), d_out.ptr + out_offset, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<std::int32_t> got_labels = d_out_labels.download();
  std::vector<float> got_targets = d_out_targets.download();

  bool bad_ok = true;
  if (use_indices && batch > 3) {  // the out-of-range sample: NaN pixels, label -1; then compare the rest
    for (int i = 0; i < S; ++i) bad_ok = bad_ok && std::isnan(got[3 * std::size_t(S) + i]);
    bad_ok = bad_ok && got_labels[3] == -1;
    std::fill_n(got.begin() + 3 * S, S, 0.f), std::fill_n(want.begin() + 3 * S, S, 0.f);
    got_labels[3] = want_labels[3] = 0;
    std::fill_n(got_targets.begin() + 3 * width, width, 0.f);  // not written for a bad index
    std::printf("%s gather: an index past the data set gives NaN and label -1\n", bad_ok ? "ok  " : "FAIL");
    t(bad_ok);
  }
  char what[160];
  std::snprintf(what, sizeof what, "gather S=%d batch %d %s offset %d: pixels", S, batch,
                use_indices ? "by index" : "by range", out_offset);
  t(same_bits(got, want, what));
  std::snprintf(what, sizeof what, "gather S=%d batch %d %s offset %d: labels", S, batch,
                use_indices ? "by index" : "by range", out_offset);
  t(same_bits(got_labels, want_labels, what));
  std::snprintf(what, sizeof what, "gather S=%d batch %d %s offset %d: targets", S, batch,
                use_indices ? "by index" : "by range", out_offset);
  t(same_bits(got_targets, want_targets, what));
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_gather<784>(t, 300, 256, true, 0, 71);
    test_gather<784>(t, 300, 37, false, 0, 72);
    test_gather<784>(t, 300, 1, true, 0, 73);
    test_gather<784>(t, 300, 37, true, 1, 74);  // misaligned output: the scalar kernel
    test_gather<10>(t, 50, 37, true, 0, 75);    // S % 4 != 0: the scalar kernel
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
