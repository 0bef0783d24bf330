#pragma once
// DeviceDataset: a data set uploaded once to device memory, as it is on the host (uint8 pixels,
// uint8 labels), together with the per-sample buffers that training and evaluation fill on the
// device, all in ONE allocation made at upload. Nothing is allocated per epoch or per step.
//
// Layout (each region starting on a 256-byte boundary; n = count):
//   pixels     n · sample_size uint8
//   labels     n uint8
//   order      n uint32     the epoch's permutation (kernels::shuffle_indices)
//   keys_in    n uint64  ┐
//   keys_out   n uint64  │  the shuffle's sort buffers
//   iota       n uint32  │
//   sort_temp  cub bytes ┘
//   loss       n float      per-sample cross-entropy, indexed by position in the epoch (training) or
//                           by sample (evaluation)
//   correct    n int32      per-sample 1/0: argmax equals the label
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/cuda_check.hpp"
#include "../io/idx.hpp"
#include "../kernels/data.cuh"

namespace ctnn {

// What a network expects of a data set: values per image, the image's H×W when its input is
// C×H×W (0 for a flat input), and the number of classes.
struct SampleSpec {
  std::size_t size = 0;
  std::size_t rows = 0, cols = 0;
  int classes = 0;

  template <class Net>
  static SampleSpec of() {
    using In = typename Net::input_shape;
    SampleSpec s;
    s.size = In::size;
    if constexpr (In::rank == 3) s.rows = std::size_t(In::dims[1]), s.cols = std::size_t(In::dims[2]);
    s.classes = int(Net::output_shape::size);
    return s;
  }
  std::string str() const {
    return rows ? std::to_string(size / (rows * cols)) + "x" + std::to_string(rows) + "x" + std::to_string(cols)
                : std::to_string(size);
  }
};

// Throws std::invalid_argument, naming `what` (e.g. "training set"), unless `d` fits `spec`: images of
// rows × cols pixels with C channels each (C·rows·cols = spec.size, and rows × cols = H × W for a
// C×H×W input), as many pixels and labels as images, every label below spec.classes.
inline void check_dataset(const io::Dataset& d, const SampleSpec& spec, const std::string& what) {
  if (d.count == 0) throw std::invalid_argument("ctnn: the " + what + " is empty");
  const std::size_t plane = d.rows * d.cols;
  bool fits = plane > 0 && spec.size % plane == 0;
  if (spec.rows) fits = fits && d.rows == spec.rows && d.cols == spec.cols;
  if (!fits)
    throw std::invalid_argument("ctnn: the " + what + " has images of " + std::to_string(d.rows) + "x" +
                                std::to_string(d.cols) + " pixels, but the network expects " + spec.str() +
                                " = " + std::to_string(spec.size) + " values per image");
  if (d.pixels.size() != d.count * spec.size)
    throw std::invalid_argument("ctnn: the " + what + " holds " + std::to_string(d.pixels.size()) +
                                " pixel values, expected " + std::to_string(d.count) + " images x " +
                                std::to_string(spec.size) + " = " + std::to_string(d.count * spec.size));
  if (d.labels.size() != d.count)
    throw std::invalid_argument("ctnn: the " + what + " holds " + std::to_string(d.labels.size()) +
                                " labels, expected " + std::to_string(d.count) + " (one per image)");
  for (std::size_t i = 0; i < d.count; ++i)
    if (d.labels[i] >= spec.classes)
      throw std::invalid_argument("ctnn: label " + std::to_string(d.labels[i]) + " of image " + std::to_string(i) +
                                  " in the " + what + " is outside 0.." + std::to_string(spec.classes - 1) +
                                  " (the network has " + std::to_string(spec.classes) + " outputs)");
}

class DeviceDataset {
 public:
  // Checks `d` against `spec` (see check_dataset) and uploads it on `stream`, the stream of all work
  // that uses it; returns once the copy is done, so `d` may change afterwards.
  DeviceDataset(const io::Dataset& d, const SampleSpec& spec, const std::string& what, cudaStream_t stream)
      : count_(d.count), sample_size_(spec.size), stream_(stream) {
    check_dataset(d, spec, what);
    const std::size_t n = count_;
    std::size_t at = 0;
    auto take = [&](std::size_t bytes) {
      const std::size_t here = at;
      at += (bytes + 255) / 256 * 256;
      return here;
    };
    pixels_at_ = take(n * sample_size_);
    labels_at_ = take(n);
    order_at_ = take(n * sizeof(std::uint32_t));
    keys_in_at_ = take(n * sizeof(std::uint64_t));
    keys_out_at_ = take(n * sizeof(std::uint64_t));
    iota_at_ = take(n * sizeof(std::uint32_t));
    sort_temp_bytes_ = kernels::shuffle_temp_bytes(n);
    sort_temp_at_ = take(sort_temp_bytes_);
    loss_at_ = take(n * sizeof(float));
    correct_at_ = take(n * sizeof(std::int32_t));
    bytes_ = at;
    CTNN_CUDA_CHECK(cudaMalloc(&base_, bytes_));
    try {
      // The order starts as all zeros (a valid index), so a step run before the first shuffle reads
      // sample 0 rather than garbage.
      CTNN_CUDA_CHECK(cudaMemsetAsync(base_ + order_at_, 0, n * sizeof(std::uint32_t), stream));
      CTNN_CUDA_CHECK(cudaMemcpyAsync(base_ + pixels_at_, d.pixels.data(), n * sample_size_,
                                      cudaMemcpyHostToDevice, stream));
      CTNN_CUDA_CHECK(cudaMemcpyAsync(base_ + labels_at_, d.labels.data(), n, cudaMemcpyHostToDevice, stream));
      CTNN_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors are pageable
    } catch (...) {
      cudaFree(base_);
      throw;
    }
  }
  // Waits for the stream first: queued work may still read the data set.
  ~DeviceDataset() {
    cudaStreamSynchronize(stream_);
    cudaFree(base_);
  }
  DeviceDataset(const DeviceDataset&) = delete;
  DeviceDataset& operator=(const DeviceDataset&) = delete;

  std::size_t count() const { return count_; }
  std::size_t sample_size() const { return sample_size_; }
  std::size_t bytes() const { return bytes_; }

  const std::uint8_t* pixels() const { return reinterpret_cast<const std::uint8_t*>(base_ + pixels_at_); }
  const std::uint8_t* labels() const { return reinterpret_cast<const std::uint8_t*>(base_ + labels_at_); }
  std::uint32_t* order() { return at<std::uint32_t>(order_at_); }
  float* loss() { return at<float>(loss_at_); }
  std::int32_t* correct() { return at<std::int32_t>(correct_at_); }
  kernels::ShuffleBuffers shuffle_buffers() {
    kernels::ShuffleBuffers b;
    b.keys_in = at<std::uint64_t>(keys_in_at_);
    b.keys_out = at<std::uint64_t>(keys_out_at_);
    b.indices_in = at<std::uint32_t>(iota_at_);
    b.temp = base_ + sort_temp_at_;
    b.temp_bytes = sort_temp_bytes_;
    return b;
  }

  // Sum of loss()[0..count) in double, in index order, and of correct()[0..count): one
  // device-to-host copy, then a host loop, so the totals are reproducible to the bit.
  struct Totals {
    double loss = 0;
    std::size_t correct = 0;
  };
  Totals totals() {
    const cudaStream_t stream = stream_;
    loss_host_.resize(count_);
    correct_host_.resize(count_);
    CTNN_CUDA_CHECK(cudaMemcpyAsync(loss_host_.data(), loss(), count_ * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CTNN_CUDA_CHECK(cudaMemcpyAsync(correct_host_.data(), correct(), count_ * sizeof(std::int32_t),
                                    cudaMemcpyDeviceToHost, stream));
    CTNN_CUDA_CHECK(cudaStreamSynchronize(stream));
    Totals t;
    for (std::size_t i = 0; i < count_; ++i) t.loss += double(loss_host_[i]);
    for (std::size_t i = 0; i < count_; ++i) t.correct += correct_host_[i] ? 1 : 0;
    return t;
  }

 private:
  template <class T>
  T* at(std::size_t offset) { return reinterpret_cast<T*>(base_ + offset); }

  std::size_t count_, sample_size_;
  cudaStream_t stream_;
  std::size_t pixels_at_ = 0, labels_at_ = 0, order_at_ = 0, keys_in_at_ = 0, keys_out_at_ = 0, iota_at_ = 0,
              sort_temp_at_ = 0, loss_at_ = 0, correct_at_ = 0, sort_temp_bytes_ = 0, bytes_ = 0;
  std::byte* base_ = nullptr;
  std::vector<float> loss_host_;
  std::vector<std::int32_t> correct_host_;
};

}  // namespace ctnn
