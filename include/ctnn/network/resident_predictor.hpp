#pragma once
// ResidentPredictor: the lowest-latency inference ctnn has, for a program that classifies one image (or
// a few) at a time and waits for the answer (a control loop, say). It keeps the network kernel resident
// on the GPU (kernels/network_resident.cuh): launched once, each block stages the weights in shared
// memory once and then serves requests through a mailbox in pinned host memory. A predict writes the
// images there and waits for the probabilities to appear; no launch, no copy, no stream synchronisation.
//
//   ctnn::ResidentPredictor resident(trainer.network());   // parameters as of now
//   resident.predict(image, 1, probs);                     // LeNet-5: about 12 µs on an H100 (docs/fusion.md)
//
// What it costs, while it lives:
// - one multiprocessor per sample of max_batch, each holding its block (the weights staged in its
//   shared memory), unavailable to other kernels; one thread polls the mailbox, one 8-byte read over
//   the bus at a time;
// - the device is never idle, so the runtime calls that wait for an idle device block until the
//   predictor is destroyed: cudaDeviceSynchronize, cudaFree, cudaFreeHost and cudaHostUnregister (so
//   destroying a CudaNetwork or a Trainer does). cudaMalloc, cudaHostAlloc, copies and launches on
//   other streams go on (measured on an H100, CUDA 13; docs/fusion.md). Declare the predictor after
//   the network and whatever else you free, so that it goes first. One per device at a time (a second
//   throws): destroying one would wait for the other.
// Trainer::evaluate of a host data set frees its upload, so it waits too. The predictor answers with a
// copy of the parameters and layer state taken at construction (make a new one to follow later
// training). One caller at a time: predict is not thread-safe. The network needs the network kernel
// (CudaNetwork::has_network_kernel).
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../core/cuda_check.hpp"
#include "../kernels/network_resident.cuh"

namespace ctnn {
namespace detail {
// Bit d: a ResidentPredictor runs on device d (d < 64) in this process.
inline std::atomic<unsigned long long>& resident_devices() {
  static std::atomic<unsigned long long> bits{0};
  return bits;
}
}  // namespace detail

template <class CudaNet>
class ResidentPredictor {
  static_assert(CudaNet::has_network_kernel,
                "ctnn: ResidentPredictor needs a network with the network kernel (CudaNetwork::has_network_kernel)");
  using resident = kernels::network_resident<typename CudaNet::network_kernel>;
  using Mailbox = kernels::ResidentMailbox;

 public:
  static constexpr std::size_t input_size = resident::plan::in_size;
  static constexpr std::size_t outputs = resident::plan::out_size;

  // Starts the resident kernel on the current device with a copy of net's parameters and state (taken
  // after the work already enqueued on net's stream). max_batch: the most images one predict takes,
  // one block (and multiprocessor) each; at most as many as can be resident at once.
  explicit ResidentPredictor(CudaNet& net, int max_batch = 1) : max_batch_(max_batch) {
    const int most = resident::max_blocks();
    if (max_batch < 1 || max_batch > most)
      throw std::invalid_argument("ctnn: ResidentPredictor's max_batch must be 1.." + std::to_string(most) +
                                  " on this device (blocks resident at once), got " + std::to_string(max_batch));
    CTNN_CUDA_CHECK(cudaGetDevice(&device_));
    if (detail::resident_devices().fetch_or(device_bit()) & device_bit())
      throw std::logic_error("ctnn: a ResidentPredictor already runs on device " + std::to_string(device_) +
                             "; one at a time per device (freeing this one's memory would wait for the other)");
    try {
      CTNN_CUDA_CHECK(cudaMalloc(&weights_, (relay_at + 2) * sizeof(float)));
      std::uint64_t* const relay = reinterpret_cast<std::uint64_t*>(weights_ + relay_at);
      CTNN_CUDA_CHECK(cudaMemsetAsync(relay, 0, sizeof(std::uint64_t), net.stream()));
      CTNN_CUDA_CHECK(cudaMemcpyAsync(weights_, net.params(), CudaNet::plan::param_floats * sizeof(float),
                                      cudaMemcpyDeviceToDevice, net.stream()));
      if constexpr (CudaNet::plan::state_floats > 0)
        CTNN_CUDA_CHECK(cudaMemcpyAsync(weights_ + CudaNet::plan::param_floats, net.state(),
                                        CudaNet::plan::state_floats * sizeof(float), cudaMemcpyDeviceToDevice,
                                        net.stream()));
      CTNN_CUDA_CHECK(cudaStreamSynchronize(net.stream()));
      const std::size_t bytes = resident::mailbox_words(max_batch) * sizeof(std::uint64_t);
      CTNN_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&mailbox_), bytes, cudaHostAllocMapped));
      std::memset(mailbox_, 0, bytes);
      std::uint64_t* device_mailbox = nullptr;
      CTNN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_mailbox), mailbox_, 0));
      // Its own stream, which waits for no other (work on the legacy default stream must not queue
      // behind a kernel that does not end).
      CTNN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      resident::launch(stream_, weights_, weights_ + CudaNet::plan::param_floats, device_mailbox, relay, max_batch);
      running_ = true;
    } catch (...) {
      release();
      throw;
    }
  }
  ~ResidentPredictor() {
    if (running_) stop();
    release();
  }
  ResidentPredictor(const ResidentPredictor&) = delete;
  ResidentPredictor& operator=(const ResidentPredictor&) = delete;

  int max_batch() const { return max_batch_; }

  // The outputs (probabilities after a Softmax) of `count` normalised images (input_size floats each,
  // batch-major) into probs (count × outputs floats). Throws, rather than wait for ever, if the
  // resident kernel has stopped (a device error) or gives no answer within answer_timeout.
  void predict(const float* normalised_images, int count, float* probs) {
    if (count < 0 || count > max_batch_)
      throw std::invalid_argument("ctnn: ResidentPredictor::predict takes 0.." + std::to_string(max_batch_) +
                                  " images (its max_batch), got " + std::to_string(count));
    if (count > 0 && (!normalised_images || !probs))
      throw std::invalid_argument(std::string("ctnn: ResidentPredictor::predict got a null ") +
                                  (!normalised_images ? "image" : "output") + " pointer");
    if (!failure_.empty()) throw std::runtime_error("ctnn: ResidentPredictor: " + failure_);
    if (count == 0) return;
    std::uint64_t* const in = mailbox_ + Mailbox::input_at(0, input_size);
    const std::uint32_t sequence = next_sequence();
    const std::size_t n_in = std::size_t(count) * input_size;
    for (std::size_t i = 0; i < n_in; ++i)
      std::atomic_ref<std::uint64_t>(in[i]).store(
          Mailbox::word(sequence, std::bit_cast<std::uint32_t>(normalised_images[i])), std::memory_order_relaxed);
    command(sequence, std::uint32_t(count));  // (a release store: the inputs are visible before it)
    std::uint64_t* const out = mailbox_ + Mailbox::output_at(0, std::size_t(max_batch_), input_size, outputs);
    const std::size_t n_out = std::size_t(count) * outputs;
    const auto deadline = std::chrono::steady_clock::now() + answer_timeout;
    for (std::size_t i = 0; i < n_out; ++i) {
      std::atomic_ref<std::uint64_t> word(out[i]);
      std::uint64_t w = word.load(std::memory_order_acquire);
      for (unsigned spins = 1; std::uint32_t(w >> 32) != sequence; ++spins) {
        if (spins % 4096 == 0) check_running(deadline);
        w = word.load(std::memory_order_acquire);
      }
      probs[i] = std::bit_cast<float>(std::uint32_t(w));
    }
  }
  std::vector<float> predict(const float* normalised_images, int count) {
    std::vector<float> p(std::size_t(count > 0 ? count : 0) * outputs);
    predict(normalised_images, count, p.data());
    return p;
  }

 private:
  // How long a predict waits for its answer before it gives up (the first one includes the kernel's
  // start, behind whatever else occupies the multiprocessors).
  static constexpr std::chrono::seconds answer_timeout{10};
  // Floats of weights_ before the relay word (kernels/network_resident.cuh), 8-byte aligned.
  static constexpr std::size_t relay_at = (CudaNet::plan::param_floats + CudaNet::plan::state_floats + 1) / 2 * 2;

  std::uint32_t next_sequence() {
    if (++sequence_ == 0) sequence_ = 1;  // (0 is the mailbox's initial state)
    return sequence_;
  }
  void command(std::uint32_t sequence, std::uint32_t count) {
    std::atomic_ref<std::uint64_t>(mailbox_[0]).store(Mailbox::word(sequence, count), std::memory_order_release);
  }
  // The kernel is still running and within the deadline, or this throws (and later predicts too): a
  // device error ended it (the stream reports it), or no answer came in time.
  void check_running(std::chrono::steady_clock::time_point deadline) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e != cudaErrorNotReady)
      failure_ = "the resident kernel has stopped (" +
                 std::string(e == cudaSuccess ? "it returned" : cudaGetErrorString(e)) + ")";
    else if (std::chrono::steady_clock::now() > deadline)
      failure_ = "no answer within " + std::to_string(answer_timeout.count()) + " s";
    if (!failure_.empty()) throw std::runtime_error("ctnn: ResidentPredictor: " + failure_);
  }
  // Sends the stop command and waits for the kernel to end, at most answer_timeout; a kernel that does
  // not end keeps its memory (freeing memory a kernel still reads would be worse than the leak).
  void stop() {
    command(next_sequence(), Mailbox::stop);
    const auto deadline = std::chrono::steady_clock::now() + answer_timeout;
    while (cudaStreamQuery(stream_) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        stream_ = nullptr, mailbox_ = nullptr, weights_ = nullptr;
        return;
      }
      std::this_thread::yield();
    }
    running_ = false;
  }
  void release() {
    if (stream_) cudaStreamDestroy(stream_);
    if (mailbox_) cudaFreeHost(mailbox_);
    if (weights_) cudaFree(weights_);
    stream_ = nullptr, mailbox_ = nullptr, weights_ = nullptr;
    detail::resident_devices().fetch_and(~device_bit());
  }
  unsigned long long device_bit() const { return 1ull << (device_ % 64); }

  int max_batch_ = 1;
  int device_ = 0;
  float* weights_ = nullptr;           // device: the parameters, the layer state, the relay word
  std::uint64_t* mailbox_ = nullptr;   // pinned host memory, mapped (kernels::ResidentMailbox)
  cudaStream_t stream_ = nullptr;
  std::uint32_t sequence_ = 0;         // of the last request
  bool running_ = false;
  std::string failure_;                // why predict no longer answers (empty while it does)
};

}  // namespace ctnn
