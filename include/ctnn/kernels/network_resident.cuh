#pragma once
// The network kernel kept resident (a persistent kernel), for the lowest latency from a host image to a
// host answer: launched once, each block stages the weights once and then waits for requests in a
// mailbox of pinned host memory mapped into the device, runs its sample through the network kernel's
// steps (network_forward.cuh) and writes the outputs back into the mailbox. A request costs no launch,
// no copy and no synchronisation on a stream; the host writes the images and one word, then waits for
// the answers in its own memory (network/resident_predictor.hpp is the host side).
//
// The mailbox is 8-byte words. Every value travels with its request's sequence number in one word
// (the value's bits low, the sequence high), as NCCL's LL protocol does: an 8-byte store is seen whole
// or not at all, so a reader that sees the sequence it waits for has the value, and neither side needs
// a fence. Layout (ResidentMailbox): the command word, then max_batch inputs, then max_batch outputs.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "network_forward.cuh"

namespace ctnn::kernels {

struct ResidentMailbox {
  // Words: the command (sequence << 32 | sample count, count = stop: the kernel returns), padding to
  // 128 bytes, then [max_batch][in_size] input words and [max_batch][out_size] output words.
  static constexpr std::uint32_t stop = 0xffffffffu;
  static constexpr std::size_t inputs_at = 16;
  static constexpr std::size_t words(std::size_t max_batch, std::size_t in_size, std::size_t out_size) {
    return inputs_at + max_batch * (in_size + out_size);
  }
  // Where sample b's input and output words start.
  static constexpr std::size_t input_at(std::size_t b, std::size_t in_size) { return inputs_at + b * in_size; }
  static constexpr std::size_t output_at(std::size_t b, std::size_t max_batch, std::size_t in_size,
                                         std::size_t out_size) {
    return inputs_at + max_batch * in_size + b * out_size;
  }
  static constexpr std::uint64_t word(std::uint32_t sequence, std::uint32_t bits) {
    return std::uint64_t(sequence) << 32 | bits;
  }
};

// Loads and stores of system memory (the mapped mailbox) that neither cache nor reorder away another
// agent's writes: relaxed at system scope.
__device__ __forceinline__ std::uint64_t load_system(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_system(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// The same for device memory shared by the blocks of a grid (the relayed command).
__device__ __forceinline__ std::uint64_t load_device(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_device(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Block b serves sample b of every request with more than b samples, until the stop command. Launched
// with gridDim.x = max_batch blocks, each with the shared memory of SamplePlan (staged or not).
template <int NT, bool Staged, class... Steps>
__global__ void __launch_bounds__(NT)
kernel_network_resident(const float* __restrict__ params,  // the network's parameters (BufferPlan)
                        const float* __restrict__ state,   // its layer state
                        std::uint64_t* mailbox,            // ResidentMailbox, mapped host memory
                        std::uint64_t* relay)              // device memory, 0 at launch
{
  using P = SamplePlan<Steps...>;
  constexpr bool bulk_staged = network_bulk_staged<Staged, Steps...>;
  const NetworkBlock<bulk_staged, Steps...> block(params);
  float* const buf = block.buf;
  // The command, read by every thread before the first step writes (buffer 1 is a step's output).
  std::uint64_t* const command = reinterpret_cast<std::uint64_t*>(buf + P::buffer_floats);
  const std::uint32_t b = blockIdx.x, max_batch = gridDim.x;
  const std::uint64_t* const in = mailbox + ResidentMailbox::input_at(b, P::in_size);
  std::uint64_t* const out = mailbox + ResidentMailbox::output_at(b, max_batch, P::in_size, P::out_size);
  std::uint32_t seen = 0;  // the host's first request is sequence 1
  for (;;) {
    // One thread of block 0 polls the mailbox (one 8-byte read over the bus at a time) and relays the
    // command to the other blocks through device memory: blocks polling the mailbox themselves made
    // each other's reads slower (a single image took 22 µs with 8 blocks against 12 with one, H100).
    if (threadIdx.x == 0) {
      std::uint64_t c;
      if (b == 0) {
        do c = load_system(mailbox);
        while (std::uint32_t(c >> 32) == seen);
        if (max_batch > 1) store_device(relay, c);
      } else {
        do c = load_device(relay);
        while (std::uint32_t(c >> 32) == seen);
      }
      *command = c;
    }
    __syncthreads();
    const std::uint64_t c = *command;
    const std::uint32_t sequence = std::uint32_t(c >> 32), count = std::uint32_t(c);
    seen = sequence;
    if (count == ResidentMailbox::stop) return;
    if (b < count) {
      // Every read in flight at once (one bus round trip); written before the command, each word
      // has its sequence at the first read.
      constexpr int per_thread = int((P::in_size + NT - 1) / NT);
      std::uint64_t w[per_thread];
#pragma unroll
      for (int j = 0; j < per_thread; ++j)
        if (threadIdx.x + j * NT < P::in_size) w[j] = load_system(in + threadIdx.x + j * NT);
#pragma unroll
      for (int j = 0; j < per_thread; ++j) {
        const int i = int(threadIdx.x) + j * NT;
        if (i >= int(P::in_size)) continue;
        while (std::uint32_t(w[j] >> 32) != sequence) w[j] = load_system(in + i);
        buf[i] = __uint_as_float(std::uint32_t(w[j]));
      }
      __syncthreads();
      const float* y = network_run_steps<NT, bulk_staged, Steps...>(params, state, buf, block.staged, block.barriers);
      for (int i = threadIdx.x; i < int(P::out_size); i += NT)
        store_system(out + i, ResidentMailbox::word(sequence, __float_as_uint(y[i])));
    }
    __syncthreads();  // (the command and the buffers are rewritten by the next request)
  }
}

// The resident kernel of a network kernel's steps: launch(...) starts `blocks` blocks on `stream`, which
// then serve requests until the stop command. Staged as the network kernel stages (every block has a
// multiprocessor to itself: blocks <= the SM count, sm_90).
template <class NetworkKernel>
struct network_resident;
template <class... Steps>
struct network_resident<cuda_network_kernel<Steps...>> {
  using base = cuda_network_kernel<Steps...>;
  using plan = typename base::plan;
  static constexpr int threads = base::threads;
  static constexpr std::size_t mailbox_words(int max_batch) {
    return ResidentMailbox::words(std::size_t(max_batch), plan::in_size, plan::out_size);
  }
  static void launch(cudaStream_t stream, const float* params, const float* state, std::uint64_t* mailbox,
                     std::uint64_t* relay, int blocks) {
    if constexpr (base::can_stage)
      if (base::stages(blocks)) return launch_as<true>(stream, params, state, mailbox, relay, blocks);
    launch_as<false>(stream, params, state, mailbox, relay, blocks);
  }
  // How many blocks can be resident at once on the current device (so many may serve together).
  static int max_blocks() {
    if constexpr (base::can_stage)
      if (base::stages(1)) return std::min(blocks_per_sm<true>(), 1) * int(sm_count());  // (stages up to the SM count)
    return blocks_per_sm<false>() * int(sm_count());
  }

 private:
  template <bool Staged>
  static constexpr auto kernel = kernel_network_resident<threads, Staged, Steps...>;
  template <bool Staged>
  static constexpr std::size_t smem = Staged ? base::staged_bytes : plan::smem_bytes;
  template <bool Staged>
  static void launch_as(cudaStream_t stream, const float* params, const float* state, std::uint64_t* mailbox,
                        std::uint64_t* relay, int blocks) {
    request_dynamic_smem<kernel<Staged>, int(smem<Staged>)>();
    kernel<Staged><<<unsigned(blocks), threads, smem<Staged>, stream>>>(params, state, mailbox, relay);
    CTNN_CHECK_LAUNCH();
  }
  template <bool Staged>
  static int blocks_per_sm() {
    request_dynamic_smem<kernel<Staged>, int(smem<Staged>)>();
    int n = 0;
    CTNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel<Staged>, threads, smem<Staged>));
    return n;
  }
};

}  // namespace ctnn::kernels
