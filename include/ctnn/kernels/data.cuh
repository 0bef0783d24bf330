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

// Gather + normalise. Thread t handles Vec consecutive pixels of one sample: with Vec = 4 a warp loads
// 128 contiguous bytes (one uchar4 each) and stores 512 contiguous bytes (one float4 each), both fully
// coalesced. An index past `count` (a caller's bug) yields NaN pixels and label −1 rather than a fault.
template <int S, int Vec>
__global__ void __launch_bounds__(data_threads)
kernel_gather_normalize(const std::uint8_t* __restrict__ images,  // [count][S]
                        const std::uint8_t* __restrict__ labels,  // [count]
                        std::size_t count,
                        const std::uint32_t* __restrict__ indices,  // [batch] sample ids, or null: first + b
                        std::size_t first, int batch, float mean, float stddev,
                        float* __restrict__ out,                 // [batch][S]
                        std::int32_t* __restrict__ out_labels,   // [batch]
                        const float* __restrict__ targets,       // [count][target_width], or null
                        int target_width,
                        float* __restrict__ out_targets,         // [batch][target_width]
                        StepCursor cursor)
{
  // Preconditions
  static_assert(S > 0 && (Vec == 1 || Vec == 4) && S % Vec == 0, "Vec divides the sample size");
  constexpr int per_sample = S / Vec;
  wait_for_prior_grids();  // (launched dependent: see launch.cuh)
  std::size_t at = 0;  // of this step's indices
  if (cursor.index) {
    const std::size_t k = *cursor.index;
    at = k * cursor.stride;
    if (blockIdx.x == 0)
      for (int i = threadIdx.x; i < cursor.record_bytes; i += data_threads)
        cursor.record[i] = cursor.records[k * std::size_t(cursor.record_bytes) + std::size_t(i)];
  }
  const std::size_t t = std::size_t(blockIdx.x) * data_threads + threadIdx.x;
  if (t >= std::size_t(batch) * per_sample) return;
  const int b = int(t / per_sample), j = int(t % per_sample);
  const std::size_t id = indices ? std::size_t(indices[at + std::size_t(b)]) : first + std::size_t(b);
  float* dst = out + std::size_t(b) * S + std::size_t(j) * Vec;
  if (id >= count) {
#pragma unroll
    for (int v = 0; v < Vec; ++v) dst[v] = NAN;
    if (j == 0) out_labels[b] = -1;
    return;
  }
  const std::uint8_t* src = images + id * S + std::size_t(j) * Vec;
  // The host's function (core/normalize.hpp), so both produce the same bits.
  if constexpr (Vec == 4) {
    const uchar4 px = *reinterpret_cast<const uchar4*>(src);
    *reinterpret_cast<float4*>(dst) =
        make_float4(normalize_pixel(px.x, mean, stddev), normalize_pixel(px.y, mean, stddev),
                    normalize_pixel(px.z, mean, stddev), normalize_pixel(px.w, mean, stddev));
  } else {
    dst[0] = normalize_pixel(src[0], mean, stddev);
  }
  if (j == 0) out_labels[b] = std::int32_t(labels[id]);
  if (targets && j == 0)
    for (int k = 0; k < target_width; ++k)
      out_targets[std::size_t(b) * target_width + k] = targets[id * target_width + k];
}

// out [batch][S], out_labels [batch] ← images and labels of samples indices[0..batch) (or, with
// indices = null, of samples first..first+batch), normalised as (x/255 − mean)/std; with targets,
// out_targets [batch][target_width] ← their targets. With a cursor, indices from the cursor's step on.
template <int S>
void gather_normalize(cudaStream_t stream, const std::uint8_t* images, const std::uint8_t* labels,
                      std::size_t count, const std::uint32_t* indices, std::size_t first, int batch,
                      float mean, float stddev, float* out, std::int32_t* out_labels,
                      const float* targets = nullptr, int target_width = 0, float* out_targets = nullptr,
                      StepCursor cursor = {}) {
  check_batch(batch, "gather_normalize");
  const bool vec4 = S % 4 == 0 && aligned_to(images, 4) && aligned_to(out, 16);
  const std::size_t threads = std::size_t(batch) * (vec4 ? S / 4 : S);
  const unsigned grid = grid_for(threads, data_threads);
  if (vec4)
    launch_dependent(kernel_gather_normalize<S, S % 4 == 0 ? 4 : 1>, grid, data_threads, 0, stream, images, labels,
                     count, indices, first, batch, mean, stddev, out, out_labels, targets, target_width, out_targets,
                     cursor);
  else
    launch_dependent(kernel_gather_normalize<S, 1>, grid, data_threads, 0, stream, images, labels, count, indices,
                     first, batch, mean, stddev, out, out_labels, targets, target_width, out_targets, cursor);
}

}  // namespace ctnn::kernels
