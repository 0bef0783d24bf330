// The device data pipeline (kernels/data.cuh). Shuffle: the permutation equals the host's stable sort
// of the same keys, is a permutation (every index once), is the same for the same seed and epoch and
// differs across epochs and seeds. Gather + normalise: bitwise equal to train/normalize.hpp on the
// host, through the vector path (S = 784), the scalar path (S = 10) and a misaligned output, by index
// list and by contiguous range; an index past the data set yields NaN pixels and label −1.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <vector>

#include <ctnn/kernels/data.cuh>
#include <ctnn/train/normalize.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

std::vector<std::uint32_t> device_shuffle(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  Stream stream;
  DeviceBuffer<std::uint64_t> keys_in(n), keys_out(n);
  DeviceBuffer<std::uint32_t> indices_in(n), perm(n);
  const std::size_t bytes = kernels::shuffle_temp_bytes(n);
  DeviceBuffer<unsigned char> temp(bytes);
  const kernels::ShuffleBuffers buf{keys_in.ptr, keys_out.ptr, indices_in.ptr, temp.ptr, bytes};
  perm.poison();
  kernels::shuffle_indices(stream.s, perm.ptr, n, seed, epoch, buf);
  stream.sync();
  return perm.download();
}

void test_shuffle(Tally& t, std::size_t n) {
  char what[128];
  const std::vector<std::uint32_t> a = device_shuffle(n, 7, 0), b = device_shuffle(n, 7, 0);
  const std::vector<std::uint32_t> c = device_shuffle(n, 7, 1), d = device_shuffle(n, 8, 0);

  std::vector<std::uint32_t> want(n);
  std::iota(want.begin(), want.end(), 0u);
  std::stable_sort(want.begin(), want.end(), [](std::uint32_t i, std::uint32_t j) {
    return kernels::shuffle_key(7, 0, i) < kernels::shuffle_key(7, 0, j);
  });
  std::snprintf(what, sizeof what, "shuffle n=%zu equals the host's sort of the keys", n);
  t(same_bits(a, want, what));

  std::vector<int> seen(n, 0);
  bool valid = true;
  for (std::uint32_t i : a) valid = valid && i < n && seen[i]++ == 0;
  std::printf("%s shuffle n=%zu is a permutation\n", valid ? "ok  " : "FAIL", n);
  t(valid);
  std::snprintf(what, sizeof what, "shuffle n=%zu same seed and epoch", n);
  t(same_bits(b, a, what));
  if (n >= 8) {
    const bool differ = c != a && d != a;
    std::printf("%s shuffle n=%zu differs across epochs and seeds\n", differ ? "ok  " : "FAIL", n);
    t(differ);
  }
}

template <int S>
void test_gather(Tally& t, std::size_t count, int batch, bool use_indices, int out_offset, std::uint64_t seed) {
  Stream stream;
  Random rng(seed);
  std::vector<std::uint8_t> images(count * S), labels(count);
  for (auto& v : images) v = std::uint8_t(rng.below(256));
  for (auto& v : labels) v = std::uint8_t(rng.below(10));
  std::vector<std::uint32_t> idx(batch);
  const std::size_t first = use_indices ? 0 : count - std::size_t(batch) - 1;
  for (int b = 0; b < batch; ++b) idx[b] = use_indices ? std::uint32_t(rng.below(count)) : std::uint32_t(first + b);
  if (use_indices && batch > 3) idx[3] = std::uint32_t(count);  // out of range

  const float mean = 0.1307f, stddev = 0.3081f;
  std::vector<float> want(std::size_t(batch) * S);
  std::vector<std::int32_t> want_labels(batch);
  for (int b = 0; b < batch; ++b) {
    if (idx[b] >= count) continue;
    normalize_pixels(images.data() + std::size_t(idx[b]) * S, S, mean, stddev, want.data() + std::size_t(b) * S);
    want_labels[b] = labels[idx[b]];
  }

  DeviceBuffer<std::uint8_t> d_images(images), d_labels(labels);
  DeviceBuffer<std::uint32_t> d_idx(idx);
  DeviceBuffer<float> d_out(std::size_t(batch) * S + 1);
  DeviceBuffer<std::int32_t> d_out_labels(batch);
  d_out.poison(), d_out_labels.poison();
  kernels::gather_normalize<S>(stream.s, d_images.ptr, d_labels.ptr, count, use_indices ? d_idx.ptr : nullptr, first,
                               batch, mean, stddev, d_out.ptr + out_offset, d_out_labels.ptr);
  stream.sync();
  std::vector<float> got(std::size_t(batch) * S);
  CTNN_CUDA_CHECK(cudaMemcpy(got.data(), d_out.ptr + out_offset, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<std::int32_t> got_labels = d_out_labels.download();

  bool bad_ok = true;
  if (use_indices && batch > 3) {  // the out-of-range sample: NaN pixels, label -1; then compare the rest
    for (int i = 0; i < S; ++i) bad_ok = bad_ok && std::isnan(got[3 * std::size_t(S) + i]);
    bad_ok = bad_ok && got_labels[3] == -1;
    std::fill_n(got.begin() + 3 * S, S, 0.f), std::fill_n(want.begin() + 3 * S, S, 0.f);
    got_labels[3] = want_labels[3] = 0;
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
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_shuffle(t, 1);
    test_shuffle(t, 37);
    test_shuffle(t, 60'000);  // MNIST's training set
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
