#pragma once
// The device side of the training data pipeline:
//   (a) a deterministic shuffle per epoch: key i = hash(seed, epoch, i), then the indices sorted by key
//       with cub::DeviceRadixSort (stable, so equal keys keep index order: the permutation depends on
//       seed, epoch and n only). The caller provides every buffer; nothing is allocated here.
//   (b) gather + normalise: the images of a batch of indices, uint8 → (x/255 − mean)/std in float,
//       and their labels as int32.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <cub/device/device_radix_sort.cuh>

#include "../core/cuda_context.hpp"
#include "../train/normalize.hpp"
#include "launch.cuh"

namespace ctnn::kernels {

// SplitMix64's finaliser: a bijection on 64 bits that mixes every input bit into every output bit.
__host__ __device__ constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Sort key of index i in the shuffle of `epoch`: SplitMix64's sequence from a seed mixed with the epoch.
__host__ __device__ constexpr std::uint64_t shuffle_key(std::uint64_t seed, std::uint64_t epoch,
                                                       std::uint64_t i) {
  const std::uint64_t golden = 0x9E3779B97F4A7C15ull;
  const std::uint64_t state = mix64(seed ^ mix64(epoch + golden));
  return mix64(state + (i + 1) * golden);
}

// Device buffers for shuffle_indices, each of n elements, and the sort's temporary storage.
struct ShuffleBuffers {
  std::uint64_t* keys_in = nullptr;
  std::uint64_t* keys_out = nullptr;
  std::uint32_t* indices_in = nullptr;
  void* temp = nullptr;
  std::size_t temp_bytes = 0;  // at least shuffle_temp_bytes(n)
};

inline void check_shuffle_size(std::size_t n) {
  if (n == 0 || n > std::size_t(std::numeric_limits<int>::max()))
    throw std::invalid_argument("ctnn: shuffle of " + std::to_string(n) + " items: need 1.." +
                                std::to_string(std::numeric_limits<int>::max()));
}

// Bytes of temporary storage the sort needs for n items (a host-side query: no launch, no allocation).
inline std::size_t shuffle_temp_bytes(std::size_t n) {
  check_shuffle_size(n);
  std::size_t bytes = 0;
  CTNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const std::uint64_t*>(nullptr), static_cast<std::uint64_t*>(nullptr),
      static_cast<const std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr), int(n)));
  return bytes;
}

inline constexpr int data_threads = 256;

template <int = 0>  // a template, so that this header can be included by several translation units
__global__ void __launch_bounds__(data_threads)
kernel_shuffle_keys(std::uint64_t* __restrict__ keys,     // [n]
                    std::uint32_t* __restrict__ indices,  // [n]
                    std::size_t n, std::uint64_t seed, std::uint64_t epoch)
{
  const std::size_t i = std::size_t(blockIdx.x) * data_threads + threadIdx.x;
  if (i >= n) return;
  keys[i] = shuffle_key(seed, epoch, i);
  indices[i] = std::uint32_t(i);
}

// perm [n] ← a permutation of 0..n−1 that depends only on (seed, epoch, n).
inline void shuffle_indices(cudaStream_t stream, std::uint32_t* perm, std::size_t n, std::uint64_t seed,
                            std::uint64_t epoch, const ShuffleBuffers& buf) {
  check_shuffle_size(n);
  if (!perm || !buf.keys_in || !buf.keys_out || !buf.indices_in || !buf.temp)
    throw std::invalid_argument("ctnn: shuffle_indices: a device buffer is missing");
  const std::size_t need = shuffle_temp_bytes(n);
  if (buf.temp_bytes < need)
    throw std::invalid_argument("ctnn: shuffle_indices: the sort needs " + std::to_string(need) +
                                " bytes of temporary storage for " + std::to_string(n) + " items, got " +
                                std::to_string(buf.temp_bytes));
  kernel_shuffle_keys<0>
      <<<grid_for(n, data_threads), data_threads, 0, stream>>>(buf.keys_in, buf.indices_in, n, seed, epoch);
  CTNN_CHECK_LAUNCH();
  std::size_t bytes = buf.temp_bytes;
  CTNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(buf.temp, bytes, buf.keys_in, buf.keys_out, buf.indices_in,
                                                  perm, int(n), 0, 64, stream));
}

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
                        std::int32_t* __restrict__ out_labels)  // [batch]
{
  // Preconditions
  static_assert(S > 0 && (Vec == 1 || Vec == 4) && S % Vec == 0, "Vec divides the sample size");
  constexpr int per_sample = S / Vec;
  const std::size_t t = std::size_t(blockIdx.x) * data_threads + threadIdx.x;
  if (t >= std::size_t(batch) * per_sample) return;
  const int b = int(t / per_sample), j = int(t % per_sample);
  const std::size_t id = indices ? std::size_t(indices[b]) : first + std::size_t(b);
  float* dst = out + std::size_t(b) * S + std::size_t(j) * Vec;
  if (id >= count) {
#pragma unroll
    for (int v = 0; v < Vec; ++v) dst[v] = NAN;
    if (j == 0) out_labels[b] = -1;
    return;
  }
  const std::uint8_t* src = images + id * S + std::size_t(j) * Vec;
  // The host's function (train/normalize.hpp), so both produce the same bits.
  if constexpr (Vec == 4) {
    const uchar4 px = *reinterpret_cast<const uchar4*>(src);
    *reinterpret_cast<float4*>(dst) =
        make_float4(normalize_pixel(px.x, mean, stddev), normalize_pixel(px.y, mean, stddev),
                    normalize_pixel(px.z, mean, stddev), normalize_pixel(px.w, mean, stddev));
  } else {
    dst[0] = normalize_pixel(src[0], mean, stddev);
  }
  if (j == 0) out_labels[b] = std::int32_t(labels[id]);
}

// out [batch][S], out_labels [batch] ← images and labels of samples indices[0..batch) (or, with
// indices = null, of samples first..first+batch), normalised as (x/255 − mean)/std.
template <int S>
void gather_normalize(cudaStream_t stream, const std::uint8_t* images, const std::uint8_t* labels,
                      std::size_t count, const std::uint32_t* indices, std::size_t first, int batch,
                      float mean, float stddev, float* out, std::int32_t* out_labels) {
  check_batch(batch, "gather_normalize");
  const bool vec4 = S % 4 == 0 && aligned_to(images, 4) && aligned_to(out, 16);
  const std::size_t threads = std::size_t(batch) * (vec4 ? S / 4 : S);
  const unsigned grid = grid_for(threads, data_threads);
  if (vec4)
    kernel_gather_normalize<S, S % 4 == 0 ? 4 : 1><<<grid, data_threads, 0, stream>>>(
        images, labels, count, indices, first, batch, mean, stddev, out, out_labels);
  else
    kernel_gather_normalize<S, 1><<<grid, data_threads, 0, stream>>>(images, labels, count, indices, first,
                                                                     batch, mean, stddev, out, out_labels);
  CTNN_CHECK_LAUNCH();
}

}  // namespace ctnn::kernels
