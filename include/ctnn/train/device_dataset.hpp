#pragma once
// DeviceDataset: a data set uploaded once to device memory, as it is on the host (uint8 pixels,
// uint8 labels, float targets if any), together with the per-sample buffers that training and
// evaluation fill on the device, all in ONE allocation made at upload. Nothing is allocated per epoch
// or per step.
//
// Layout (each region starting on a 256-byte boundary; n = count):
//   pixels     n · sample_size uint8
//   labels     n uint8
//   targets    n · target_width float (none without targets)
//   order      n uint32     the epoch's permutation (uploaded by the trainer each epoch)
//   loss       n float      per-sample loss, indexed by position in the epoch (training) or by
//                           sample (evaluation)
//   correct    n int32      per-sample 1/0: argmax equals the label
//   extra      the caller's bytes (the trainer's per-step records)
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/cuda_check.hpp"
#include "../core/dataset.hpp"

namespace ctnn {

class DeviceDataset {
 public:
  // Checks `d` against `spec` (see check_dataset) and uploads it on `stream`, the stream of all work
  // that uses it; returns once the copy is done, so `d` may change afterwards.
  DeviceDataset(const Dataset& d, const SampleSpec& spec, const std::string& what, cudaStream_t stream,
                std::size_t extra_bytes = 0)
      : count_(d.count), sample_size_(spec.size), target_width_(d.target_width()), stream_(stream) {
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
    targets_at_ = take(n * target_width_ * sizeof(float));
    order_at_ = take(n * sizeof(std::uint32_t));
    loss_at_ = take(n * sizeof(float));
    correct_at_ = take(n * sizeof(std::int32_t));
    extra_at_ = take(extra_bytes);
    bytes_ = at;
    CTNN_CUDA_CHECK(cudaMalloc(&base_, bytes_));
    try {
      // The order starts as all zeros (a valid index), so a step run before the first epoch's order
      // arrives reads sample 0 rather than garbage.
      CTNN_CUDA_CHECK(cudaMemsetAsync(base_ + order_at_, 0, n * sizeof(std::uint32_t), stream));
      // The caller's bytes start defined too: the trainer's warm-up step before capture reads the first
      // per-step record before the first epoch has uploaded the records.
      if (extra_bytes) CTNN_CUDA_CHECK(cudaMemsetAsync(base_ + extra_at_, 0, extra_bytes, stream));
      CTNN_CUDA_CHECK(cudaMemcpyAsync(base_ + pixels_at_, d.pixels.data(), n * sample_size_,
                                      cudaMemcpyHostToDevice, stream));
      CTNN_CUDA_CHECK(cudaMemcpyAsync(base_ + labels_at_, d.labels.data(), n, cudaMemcpyHostToDevice, stream));
      if (target_width_)
        CTNN_CUDA_CHECK(cudaMemcpyAsync(base_ + targets_at_, d.targets.data(), d.targets.size() * sizeof(float),
                                        cudaMemcpyHostToDevice, stream));
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
  std::size_t bytes() const { return bytes_; }
  int target_width() const { return int(target_width_); }

  const std::uint8_t* pixels() const { return reinterpret_cast<const std::uint8_t*>(base_ + pixels_at_); }
  const std::uint8_t* labels() const { return reinterpret_cast<const std::uint8_t*>(base_ + labels_at_); }
  const float* targets() const { return target_width_ ? reinterpret_cast<const float*>(base_ + targets_at_) : nullptr; }
  std::uint32_t* order() { return at<std::uint32_t>(order_at_); }
  float* loss() { return at<float>(loss_at_); }
  std::int32_t* correct() { return at<std::int32_t>(correct_at_); }
  std::byte* extra() { return base_ + extra_at_; }

  // Enqueues the upload of an epoch's order (count indices).
  void upload_order(const std::vector<std::uint32_t>& epoch_order) {
    if (epoch_order.size() != count_)
      throw std::invalid_argument("ctnn: an epoch order of " + std::to_string(epoch_order.size()) + " indices for " +
                                  std::to_string(count_) + " samples");
    CTNN_CUDA_CHECK(cudaMemcpyAsync(order(), epoch_order.data(), count_ * sizeof(std::uint32_t),
                                    cudaMemcpyHostToDevice, stream_));
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

  std::size_t count_, sample_size_, target_width_;
  cudaStream_t stream_;
  std::size_t pixels_at_ = 0, labels_at_ = 0, targets_at_ = 0, order_at_ = 0, loss_at_ = 0, correct_at_ = 0,
              extra_at_ = 0, bytes_ = 0;
  std::byte* base_ = nullptr;
  std::vector<float> loss_host_;
  std::vector<std::int32_t> correct_host_;
};

}  // namespace ctnn
