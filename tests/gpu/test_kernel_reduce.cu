// The second stage of the split reductions (kernels/reduce.cuh, sum_partials) on fresh random
// partials, outputs poisoned first: against the host adding in the kernel's documented order (warp w
// of Warps sums rows w, w + Warps, ... in increasing order; the warps' sums added in warp order), to
// the bit, for both widths (a column a lane, and 4 a lane from sum_partials4_min_columns columns on)
// and every warp count; and the two widths against each other.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <vector>

#include <ctnn/kernels/reduce.cuh>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

std::vector<float> host_sums(const std::vector<float>& partials, int count, int E) {
  const int warps = kernels::sum_partials_warps(count);  // the launcher's, which fixes the order
  std::vector<float> out(E);
  for (int e = 0; e < E; ++e) {
    std::vector<float> part(warps, 0.f);
    for (int w = 0; w < warps; ++w)
      for (int r = w; r < count; r += warps) part[w] += partials[std::size_t(r) * E + e];
    float total = part[0];
    for (int w = 1; w < warps; ++w) total += part[w];
    out[e] = total;
  }
  return out;
}

// E columns, the first `split` to a, the rest to b.
void test_sums(Tally& t, int count, int E, int split, std::uint64_t seed) {
  Stream stream;
  const std::vector<float> partials = random_vector(std::size_t(count) * E, seed);
  const std::vector<float> want = host_sums(partials, count, E);
  DeviceBuffer<float> d_p(partials), d_a(split), d_b(E - split);
  auto run = [&](auto&& launch) {
    d_a.poison(), d_b.poison();
    launch();
    stream.sync();
    std::vector<float> got = d_a.download(), b = d_b.download();
    got.insert(got.end(), b.begin(), b.end());
    return got;
  };
  char what[160];
  const std::vector<float> got =
      run([&] { kernels::sum_partials(stream.s, d_p.ptr, count, E, split, d_a.ptr, d_b.ptr, kernels::Launch::dependent); });
  std::snprintf(what, sizeof what, "sum_partials, %d rows of %d columns (split at %d) = the host's order", count, E, split);
  t(same_bits(got, want, what));
  // Both widths, launched directly (sum_partials takes one of them by E).
  const std::vector<float> one = run([&] {
    kernels::launch_sum_partials<1>(stream.s, d_p.ptr, count, E, split, d_a.ptr, d_b.ptr);
  });
  std::snprintf(what, sizeof what, "%d rows of %d columns, a column a lane = the host's order", count, E);
  t(same_bits(one, want, what));
  if (E % 4 == 0) {
    const std::vector<float> four = run([&] {
      kernels::launch_sum_partials<4>(stream.s, d_p.ptr, count, E, split, d_a.ptr, d_b.ptr);
    });
    std::snprintf(what, sizeof what, "%d rows of %d columns, 4 columns a lane = a column a lane", count, E);
    t(same_bits(four, one, what));
  }
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    std::uint64_t seed = 71;
    for (const int count : {1, 3, 8, 9, 32, 64, 65, 130})
      for (const int E : {36, 1001, 8192, 18496, 12345}) {
        test_sums(t, count, E, E - 37 > 0 ? E - 37 : E / 2, seed++);  // the split inside a 4-column group
      }
    // 4 a lane refuses columns that are not whole 16-byte groups.
    DeviceBuffer<float> d_p(std::size_t(2) * 1001), d_out(1001);
    bool refused = false;
    try {
      kernels::launch_sum_partials<4>(nullptr, d_p.ptr, 2, 1001, 1001, d_out.ptr, d_out.ptr);
    } catch (const std::invalid_argument&) {
      refused = true;
    }
    std::printf("%s launch_sum_partials<4> with 1001 columns refused\n", refused ? "ok  " : "FAIL");
    t(refused);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
