#pragma once
// The device side of the training data pipeline: gather + normalise, the images of a batch of
// indices (the epoch's order, made on the host by train/loop.hpp) as uint8 → (x/255 − mean)/std in
// float, their labels as int32 and, where the data set has them, their float targets.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "../core/cuda_context.hpp"
#include "../core/normalize.hpp"
#include "launch.cuh"

namespace ctnn::kernels {

inline constexpr int data_threads = 256;

// How one captured training step, replayed for every step of an epoch, finds its own place
// (train/cuda_trainer.hpp): step k = *index (device memory, advanced by the step's last kernel) takes
// its sample indices from indices + k·stride and copies record k of `records` ([steps][record_bytes])
// to `record`, which the kernels after it read. index null: no cursor.
struct StepCursor {
  const std::uint32_t* index = nullptr;
  std::size_t stride = 0;
  const std::byte* records = nullptr;
  std::byte* record = nullptr;
  int record_bytes = 0;
};

// What one gather + normalise writes: out [batch][S], out_labels [batch] ← images and labels of samples
// indices[0..batch) (or, with indices = null, of samples first..first+batch), normalised as
// (x/255 − mean)/std; with targets, out_targets [batch][target_width] ← their targets; with a cursor,
// the indices from the cursor's step on, and the step's record copied.
struct GatherArgs {
  const std::uint8_t* images = nullptr;  // [count][S]
  const std::uint8_t* labels = nullptr;  // [count]
  std::size_t count = 0;
  const std::uint32_t* indices = nullptr;  // sample ids, or null: first + b
  std::size_t first = 0;
  int batch = 0;
  float mean = 0.f, stddev = 1.f;
  float* out = nullptr;                // [batch][S]
  std::int32_t* out_labels = nullptr;  // [batch]
  const float* targets = nullptr;      // [count][target_width], or null
  int target_width = 0;
  float* out_targets = nullptr;  // [batch][target_width]
  StepCursor cursor{};
  bool vec4 = false;  // 4 pixels a thread (S % 4 == 0, images 4-byte and out 16-byte aligned)
};

// The blocks a gather of S-pixel samples takes at `threads` threads a block.
template <int S>
unsigned gather_blocks(const GatherArgs& a, int threads) {
  return grid_for(std::size_t(a.batch) * (a.vec4 ? S / 4 : S), std::size_t(threads));
}

// Block `block` of a gather (of gather_blocks), by the calling block's threads. Thread t handles Vec
// consecutive pixels of one sample: with Vec = 4 a warp loads 128 contiguous bytes (one uchar4 each)
// and stores 512 contiguous bytes (one float4 each), both fully coalesced. An index past `count` (a
// caller's bug) yields NaN pixels and label −1 rather than a fault.
template <int S, int Vec>
__device__ void gather_normalize_block(const GatherArgs& a, unsigned block) {
  // Preconditions
  static_assert(S > 0 && (Vec == 1 || Vec == 4) && S % Vec == 0, "Vec divides the sample size");
  constexpr int per_sample = S / Vec;
  const StepCursor& cursor = a.cursor;
  std::size_t at = 0;  // of this step's indices
  if (cursor.index) {
    const std::size_t k = *cursor.index;
    at = k * cursor.stride;
    if (block == 0)
      for (int i = int(threadIdx.x); i < cursor.record_bytes; i += int(blockDim.x))
        cursor.record[i] = cursor.records[k * std::size_t(cursor.record_bytes) + std::size_t(i)];
  }
  const std::size_t t = std::size_t(block) * blockDim.x + threadIdx.x;
  if (t >= std::size_t(a.batch) * per_sample) return;
  const int b = int(t / per_sample), j = int(t % per_sample);
  const std::size_t id = a.indices ? std::size_t(a.indices[at + std::size_t(b)]) : a.first + std::size_t(b);
  float* dst = a.out + std::size_t(b) * S + std::size_t(j) * Vec;
  if (id >= a.count) {
#pragma unroll
    for (int v = 0; v < Vec; ++v) dst[v] = NAN;
    if (j == 0) a.out_labels[b] = -1;
    return;
  }
  const std::uint8_t* src = a.images + id * S + std::size_t(j) * Vec;
  // The host's function (core/normalize.hpp), so both produce the same bits.
  if constexpr (Vec == 4) {
    const uchar4 px = *reinterpret_cast<const uchar4*>(src);
    *reinterpret_cast<float4*>(dst) =
        make_float4(normalize_pixel(px.x, a.mean, a.stddev), normalize_pixel(px.y, a.mean, a.stddev),
                    normalize_pixel(px.z, a.mean, a.stddev), normalize_pixel(px.w, a.mean, a.stddev));
  } else {
    dst[0] = normalize_pixel(src[0], a.mean, a.stddev);
  }
  if (j == 0) a.out_labels[b] = std::int32_t(a.labels[id]);
  if (a.targets && j == 0)
    for (int k = 0; k < a.target_width; ++k)
      a.out_targets[std::size_t(b) * a.target_width + k] = a.targets[id * a.target_width + k];
}

template <int S, int Vec>
__global__ void __launch_bounds__(data_threads) kernel_gather_normalize(GatherArgs a) {
  wait_for_prior_grids();  // (launched dependent: see launch.cuh)
  gather_normalize_block<S, Vec>(a, blockIdx.x);
}

// A gather's arguments (vec4 from the alignment of images and out).
template <int S>
GatherArgs gather_args(const std::uint8_t* images, const std::uint8_t* labels, std::size_t count,
                       const std::uint32_t* indices, std::size_t first, int batch, float mean, float stddev,
                       float* out, std::int32_t* out_labels, const float* targets = nullptr, int target_width = 0,
                       float* out_targets = nullptr, StepCursor cursor = {}) {
  check_batch(batch, "gather_normalize");
  const bool vec4 = S % 4 == 0 && aligned_to(images, 4) && aligned_to(out, 16);
  return {images, labels, count, indices, first, batch, mean, stddev, out, out_labels, targets, target_width,
          out_targets, cursor, vec4};
}

// A gather as a kernel of its own.
template <int S>
void gather_normalize(cudaStream_t stream, const GatherArgs& a) {
  const unsigned grid = gather_blocks<S>(a, data_threads);
  if (a.vec4) launch_dependent(kernel_gather_normalize<S, S % 4 == 0 ? 4 : 1>, grid, data_threads, 0, stream, a);
  else launch_dependent(kernel_gather_normalize<S, 1>, grid, data_threads, 0, stream, a);
}
template <int S>
void gather_normalize(cudaStream_t stream, const std::uint8_t* images, const std::uint8_t* labels,
                      std::size_t count, const std::uint32_t* indices, std::size_t first, int batch,
                      float mean, float stddev, float* out, std::int32_t* out_labels,
                      const float* targets = nullptr, int target_width = 0, float* out_targets = nullptr,
                      StepCursor cursor = {}) {
  gather_normalize<S>(stream, gather_args<S>(images, labels, count, indices, first, batch, mean, stddev, out,
                                             out_labels, targets, target_width, out_targets, cursor));
}

// A first layer's input read where the dataset holds it (Load(n, c, y, x) of the direct convolution
// kernels, as conv_direct.cuh's PlainLoad): the same samples and normalised values that the step's
// gather writes, so that the layer need not wait for the gather. The kernel that reads it runs the
// gather too, in blocks beside its own (extra_blocks, extra): one launch for both.
template <int C, int H, int W>
struct GatherLoad {
  GatherArgs step;
  const std::uint32_t* ids = nullptr;  // this step's sample indices (bind)
  // Bound to its step at the kernel's start, after the kernel has waited for the grids before it.
  __device__ GatherLoad bind() const {
    GatherLoad b = *this;
    if (step.indices) b.ids = step.indices + (step.cursor.index ? std::size_t(*step.cursor.index) * step.cursor.stride : 0);
    return b;
  }
  __device__ float operator()(std::size_t n, int c, int y, int x) const {
    const std::size_t id = ids ? std::size_t(ids[n]) : step.first + n;
    if (id >= step.count) return NAN;  // (as the gather)
    return normalize_pixel(step.images[id * std::size_t(C * H * W) + std::size_t((c * H + y) * W + x)], step.mean,
                           step.stddev);
  }
  unsigned extra_blocks(int threads) const { return gather_blocks<C * H * W>(step, threads); }
  __device__ void extra(unsigned block) const {
    constexpr int S = C * H * W;
    if (step.vec4) gather_normalize_block<S, S % 4 == 0 ? 4 : 1>(step, block);
    else gather_normalize_block<S, 1>(step, block);
  }
};

}  // namespace ctnn::kernels
