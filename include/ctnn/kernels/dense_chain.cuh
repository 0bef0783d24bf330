#pragma once
// A dense chain on the device (network/fusion.hpp): Dense layers, each followed by an optional
// element-wise activation, and the network's final Softmax when the chain reaches it. After
// tiny-cuda-nn's fully fused MLP (src/fully_fused_mlp.cu: a block owns a tile of the batch and keeps
// its activations in shared memory from the first layer to the last and back; the weight gradients
// are products of their own), in FP32 and with weights too large to keep in shared memory, so they
// are streamed through the cache, each read once per tile and used for all its samples:
//
//   kernel_dense_chain          per tile of BT samples: the forward of every stage (each output also
//                               written to its activation slot), then, with a loss, each sample's loss
//                               and gradient (one warp per sample, the loss kernel's own function),
//                               or the Softmax's probabilities; then, for training, backward: the
//                               gradient at each Dense output (the activation's derivative applied as
//                               it is computed; written out for the weight gradients) and at the
//                               chain's input.
//   kernel_dense_chain_weights  every stage's dW and db in one launch: blocks over (stage, column
//                               tile, row tile, batch chunk); the chunks' partial sums are finished in
//                               the same kernel in a fixed order (finish_splits, reduce.cuh).
//
// Forward: a warp computes U = 32/BT units for the BT samples, lanes striding over the inputs
// (coalesced weight rows, conflict-free reads of the tile), then one reduce-scatter over the warp
// leaves lane u·BT + s with unit u of sample s. Backward: G lanes of a warp per input column, each
// looping over every G-th unit (coalesced weight columns, the tile's gradients as broadcasts), a
// shuffle butterfly adding the G sums. Fixed orders throughout: the results do not depend on the run.
// The time is latency (a few blocks, each stage a few rounds of weight loads from L2), so a cluster's
// blocks share only the forward stages one block would need more than one round for, and the
// gradient at the chain's input; the other stages and the loss run whole in every block, which spares
// them the exchange through distributed shared memory and the cluster barrier (both slow:
// docs/fusion.md).
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/cuda_context.hpp"
#include "../layers/activation.hpp"
#include "cluster.cuh"
#include "dense.cuh"
#include "launch.cuh"
#include "loss.cuh"
#include "reduce.cuh"
#include "softmax.cuh"

namespace ctnn {
namespace kernels {

// Floats per vector access along rows of I floats: 4 when every row starts 16-byte aligned.
constexpr int vec_width(int I) { return I % 4 == 0 ? 4 : 1; }

// Dense<N> on I inputs followed by the element-wise Fn (identity_fn when none).
template <int I_, int N_, class Fn_>
struct DenseStage {
  static constexpr int I = I_, N = N_;
  using fn = Fn_;
};

template <bool Softmax, class... Stages>
struct DenseChainDims {
  static constexpr int S = int(sizeof...(Stages));
  static constexpr bool softmax = Softmax;
  template <int L>
  using stage = std::tuple_element_t<std::size_t(L), std::tuple<Stages...>>;
  static constexpr int I0 = stage<0>::I, NL = stage<S - 1>::N;
  // Threads of the kernel with and without backward. Its time is latency (a block per tile, each
  // layer a few rounds of loads), so more warps help backward; the forward's 32 accumulators a lane
  // need more than the 128 registers a thread of 512 may have (they would go to local memory).
#ifdef CTNN_DENSE_CHAIN_TRAIN_THREADS
  static constexpr int train_threads = CTNN_DENSE_CHAIN_TRAIN_THREADS;
#else
  static constexpr int train_threads = 256;
#endif
  static constexpr int threads(bool backward) { return backward ? train_threads : 256; }
  // Blocks per tile when the tiles leave most SMs idle: a thread-block cluster of at most this many
  // shares each tile (TileCluster) where the device has clusters (sm_90), halved until tiles × its size
  // fit in half the SMs; a block per tile below 2 (cuda_dense_chain::run). LeNet-5 epochs on an H100
  // (2026-11-26, s; clusters of 1 / 2 / 4 / 8 forced): batch 64 (8 tiles) 0.0874 / 0.0782 / 0.0733 /
  // 0.0730, batch 256 (32 tiles) 0.0309 / 0.0288 / 0.0292 / (8 did not fit: 1), batch 1,024 within
  // 0.4% of each other. CTNN_DENSE_CHAIN_CLUSTER overrides it (for measuring; 1 to 8).
#ifdef CTNN_DENSE_CHAIN_CLUSTER
  static constexpr int cluster = CTNN_DENSE_CHAIN_CLUSTER;
#else
  static constexpr int cluster = 4;
#endif
  static_assert(cluster >= 1 && cluster <= 8, "a portable cluster has 1 to 8 blocks");
  static constexpr int sum_n = (Stages::N + ...);
  static constexpr int max_n = [] {
    int m = 0;
    ((m = max_of(m, Stages::N)), ...);
    return m;
  }();
  // Shared floats per sample of the tile: the input, every stage's output, two gradient buffers.
  static constexpr int per_sample = I0 + sum_n + 2 * max_n;
  // Samples per tile: 8 or 4, the most that fit in 48 KB; 0 when not even 4 do. 16 (where they fit)
  // gives half the tiles, and the time is latency: vgg's Dense<10> chain at batch 64 (4 tiles of 16
  // against 8 of 8; NVIDIA H200, 2026-11-28) made the FP32 epoch 0.2067 s against 0.2051, TF32 0.1306
  // against 0.1288 (4 samples: 0.2049 / 0.1285). CTNN_DENSE_CHAIN_BT_MAX caps it (for measuring; 16 allowed).
#ifdef CTNN_DENSE_CHAIN_BT_MAX
  static constexpr int bt_max = CTNN_DENSE_CHAIN_BT_MAX;
#else
  static constexpr int bt_max = 8;
#endif
  static constexpr int red_floats = max_of(threads(true), threads(false));  // (red_at below)
  static constexpr int bt = 16 <= bt_max && 16 * per_sample + red_floats <= smem_limit_floats ? 16
                            : 8 <= bt_max && 8 * per_sample + red_floats <= smem_limit_floats ? 8
                            : 4 * per_sample + red_floats <= smem_limit_floats                ? 4
                                                                                               : 0;
  static constexpr int BT = bt > 0 ? bt : 4;  // (for the declarations of an unsupported chain)
  static constexpr bool supported = bt > 0 && S <= 8 && ((Stages::I > 0 && Stages::N > 0) && ...);
  // Shared-memory offsets (floats): x [BT][I0], h_l [BT][N_l], two gradient buffers [BT][≤ max_n].
  static constexpr int h_at(int l) {
    int at = BT * I0;
    int n[] = {Stages::N...};
    for (int j = 0; j < l; ++j) at += BT * n[j];
    return at;
  }
  // Then the forward's partial sums of warps that split a stage's inputs (chain_forward_stage_split): 32 a
  // warp.
  static constexpr int g_at = BT * (I0 + sum_n), red_at = BT * per_sample;
  static constexpr int smem_floats = red_at + red_floats;
  // The tail (chain_tail): the last stage, the loss and the gradient into the stage before, one warp
  // per sample, where the last stage is small: at most 32 units on at most 32 vectors of inputs, so
  // that a lane keeps its weights in registers from the forward to the backward.
  // CTNN_DENSE_CHAIN_TAIL=0 turns it off (for measuring).
#ifdef CTNN_DENSE_CHAIN_TAIL
  static constexpr bool tail_enabled = CTNN_DENSE_CHAIN_TAIL;
#else
  static constexpr bool tail_enabled = true;
#endif
  static constexpr int last_i = stage<S - 1>::I;
  static constexpr bool tail = tail_enabled && S >= 2 && NL <= 32 && last_i / vec_width(last_i) <= 32;
};

// Pointers of one launch (S stages).
template <int S>
struct DenseChainArgs {
  const float* x = nullptr;   // [batch][I0]: the chain's input
  const float* w[S] = {};     // [N_l][I_l]
  const float* b[S] = {};     // [N_l]
  float* pre[S] = {};         // [batch][N_l]: Dense output
  float* out[S] = {};         // [batch][N_l]: the stage's output (the activation's; pre when none)
  float* probs = nullptr;     // [batch][NL]: the Softmax's output (a chain ending in Softmax), or null
  float* dpre[S] = {};        // [batch][N_l]: gradient at each Dense output (backward)
  const float* dtop = nullptr;  // [batch][NL]: gradient at the last stage's output, when no loss is fused
  float* dx = nullptr;        // [batch][I0]: gradient at the chain's input, or null
  int batch = 0;
};

template <int S>
struct DenseChainGrads {
  const float* x[S] = {};     // [batch][I_l]: each stage's input
  const float* dpre[S] = {};  // [batch][N_l]
  float* dw[S] = {};          // [N_l][I_l]
  float* db[S] = {};          // [N_l]
  float* partials[S] = {};    // [chunks][N_l·(I_l + 1)]
  float* sums[S] = {};        // [groups][N_l·(I_l + 1)]
  int batch = 0;
};

// V consecutive floats from global memory (16-byte aligned when V = 4), or zeros when !valid.
template <int V>
__device__ __forceinline__ void load_global(const float* p, bool valid, float (&r)[V]) {
  if constexpr (V == 4) {
    const float4 v = valid ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.f, 0.f, 0.f, 0.f);
    r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) r[j] = valid ? __ldg(p + j) : 0.f;
  }
}

// V consecutive floats to shared or global memory (16-byte aligned when V = 4).
template <int V>
__device__ __forceinline__ void store_floats(float* p, const float (&r)[V]) {
  if constexpr (V == 4) *reinterpret_cast<float4*>(p) = make_float4(r[0], r[1], r[2], r[3]);
  else
#pragma unroll
    for (int j = 0; j < V; ++j) p[j] = r[j];
}

// Lane l of the warp returns the sum over the warp's lanes of v[l]: a reduce-scatter of 32 values in
// 31 shuffles (each step a lane keeps half of its values and adds its partner's copies of them). Each
// step's `Half` is a template argument: with a loop over it (`half /= 2`) nvcc left v in local memory,
// and the steps went through it (loads, shuffle, store; Nsight Compute, 2026-11-27).
template <int Half>
__device__ __forceinline__ void reduce_scatter_step(float (&v)[32], int lane) {
  const bool upper = (lane & Half) != 0;
#pragma unroll
  for (int i = 0; i < Half; ++i) {
    const float send = upper ? v[i] : v[i + Half];
    const float keep = upper ? v[i + Half] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, Half);
  }
}
__device__ __forceinline__ float warp_reduce_scatter(float (&v)[32], int lane) {
  reduce_scatter_step<16>(v, lane);
  reduce_scatter_step<8>(v, lane);
  reduce_scatter_step<4>(v, lane);
  reduce_scatter_step<2>(v, lane);
  reduce_scatter_step<1>(v, lane);
  return v[0];
}

// The blocks of a thread-block cluster that share one tile (rank of size; size 1: a plain block):
// each computes its share of every stage (units in the forward, input columns in the backward, samples
// in the loss) and stores the results into every block's shared memory (distributed shared memory),
// so that each block holds the whole tile's activations and gradients. A tile's latency, not the
// batch, bounds the chain (a few blocks at small batches): the cluster divides each stage's rounds
// of weight loads among its blocks.
struct TileCluster {
  int rank = 0, size = 1;
  __device__ TileCluster() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    rank = cluster::block_rank(), size = cluster::size();
#endif
  }
  // A block on its own (the stages it computes whole).
  __device__ static TileCluster alone() {
    TileCluster t;
    t.rank = 0, t.size = 1;
    return t;
  }
  // V floats at p, an address in this block's shared memory, into the same place in every block.
  template <int V>
  __device__ void store(float* p, const float (&r)[V]) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (size > 1) {
      for (int q = 0; q < size; ++q) store_floats(cluster::map_shared_rank(p, q), r);
      return;
    }
#endif
    store_floats(p, r);
  }
  __device__ void store(float* p, float v) const {
    const float r[1] = {v};
    store(p, r);
  }
  // Every block's stores visible to every block (and, the first time, every block started).
  __device__ void sync() const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (size > 1) {
      cluster::sync();
      return;
    }
#endif
    __syncthreads();
  }
};

// acc[u·BT + s] += W[n0 + u] · in[s] over this lane's input vectors kv = first, first + stride, .. < I/V
// (V floats each; units past N and vectors past the end read as zeros), the next vector's weights loaded
// while the current ones are used. chain_forward_stage's and chain_forward_stage_split's loop.
template <int BT, int V>
__device__ __forceinline__ void chain_dot(const float* in, const float* __restrict__ w, int I, int N, int n0,
                                          int first, int stride, float (&acc)[32]) {
  constexpr int U = 32 / BT;
  const int KV = I / V;
  float wv[U][V], wn[U][V];  // (U units, V inputs): this step's weights, the next step's
#pragma unroll
  for (int u = 0; u < U; ++u) load_global(w + std::size_t(n0 + u) * I + first * V, first < KV && n0 + u < N, wv[u]);
#pragma unroll 1
  for (int kv = first; kv < KV; kv += stride) {
    const int next = kv + stride;
#pragma unroll
    for (int u = 0; u < U; ++u) load_global(w + std::size_t(n0 + u) * I + next * V, next < KV && n0 + u < N, wn[u]);
#pragma unroll
    for (int s = 0; s < BT; ++s) {
      float xv[V];
      load_floats(in + s * I + kv * V, xv);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < V; ++j) acc[u * BT + s] = fmaf(wv[u][j], xv[j], acc[u * BT + s]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < V; ++j) wv[u][j] = wn[u][j];
  }
}

// One Dense stage's forward for the tile (BT samples): h [BT][N] = Fn(W·in + b), each output also
// written to pre and out (out == pre: once; pre null: neither) for the tile's `count` samples. A warp
// computes U = 32/BT units for the BT samples, lanes striding over the inputs, then one reduce-scatter
// over the warp leaves lane u·BT + s with unit u of sample s. The stage's sizes are run-time values so
// that stages with the same activation share their code: the kernel runs its code once per block,
// every instruction fetched cold, so code size costs time. For the same reason the loops stay rolled,
// the next weights loaded while the current ones are used (loading four steps' weights at once
// measured no faster).
template <int BT, int V, class Fn>
__device__ __noinline__ void chain_forward_stage(const float* in,  // [BT][I] shared
                                                 float* h,         // [BT][N] shared
                                                 const float* __restrict__ w, const float* __restrict__ b,
                                                 float* pre, float* out, int I, int N, int s0, int count, int warps,
                                                 TileCluster tc) {
  constexpr int U = 32 / BT;
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
#pragma unroll 1
  for (int n0 = (tc.rank * warps + warp) * U; n0 < N; n0 += tc.size * warps * U) {
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.f;
    chain_dot<BT, V>(in, w, I, N, n0, lane, 32, acc);
    const float sum = warp_reduce_scatter(acc, lane);
    const int u = lane / BT, s = lane % BT, n = n0 + u;
    if (n < N) {
      const float p = sum + b[n];
      const float y = Fn::apply(p);
      tc.store(h + s * N + n, y);
      if (pre && s < count) {
        const std::size_t at = std::size_t(s0 + s) * N + n;
        pre[at] = p;
        if (out != pre) out[at] = y;
      }
    }
  }
}

// Warps a unit group of a whole stage can have (chain_forward_stage_split): a power of two, the groups
// times it at most the block's warps, at least 32 input vectors a warp; 1: no split.
constexpr int chain_split_ways(int N, int I, int V, int BT, int warps) {
  const int groups = ceil_div(N, 32 / BT), KV = I / V;
  int ks = 1;
  while (2 * ks * groups <= warps && 2 * ks * 32 <= KV) ks *= 2;
  return ks;
}

// chain_forward_stage for a stage the block computes whole whose unit groups would leave warps idle (a
// classifier: 10 units on 2,048 inputs are two groups for 8 warps): KS warps share each group's inputs
// (warp w: group w % UG, every KS-th 32 vectors from w / UG), their reduce-scattered partial sums added
// through red [warps][32] in warp order by the group's first warp. Every thread of the block calls it
// (a barrier inside). Its own function, so that the stages without a split keep their code (LeNet-5's
// epochs were 1% longer with the split inside chain_forward_stage). strided's Dense<10> head at batch 256
// on an H200: docs/fusion.md, twenty-ninth stop.
template <int BT, int V, class Fn>
__device__ __noinline__ void chain_forward_stage_split(const float* in, float* h, const float* __restrict__ w,
                                                       const float* __restrict__ b, float* pre, float* out, int I,
                                                       int N, int s0, int count, int KS, float* red) {
  constexpr int U = 32 / BT;
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int UG = (N + U - 1) / U;  // unit groups
  const int ks = warp / UG, n0 = warp % UG * U;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  if (ks < KS) {
    chain_dot<BT, V>(in, w, I, N, n0, ks * 32 + lane, 32 * KS, acc);
    red[warp * 32 + lane] = warp_reduce_scatter(acc, lane);
  }
  __syncthreads();
  if (ks != 0) return;
  float sum = red[warp * 32 + lane];
  for (int k = 1; k < KS; ++k) sum += red[(k * UG + warp) * 32 + lane];
  const int u = lane / BT, s = lane % BT, n = n0 + u;
  if (n < N) {
    const float p = sum + b[n];
    const float y = Fn::apply(p);
    h[s * N + n] = y;
    if (pre && s < count) {
      const std::size_t at = std::size_t(s0 + s) * N + n;
      pre[at] = p;
      if (out != pre) out[at] = y;
    }
  }
}

// Lanes per column of chain_backward_stage for Q vector columns and T threads (a power of two, at
// most 32, the most that keep every column in one round).
constexpr int chain_column_lanes(int Q, int T) {
  int G = 1;
  while (G < 32 && Q * G * 2 <= T) G *= 2;
  return G;
}

// The loss of sample s0 + s of the tile (one warp: cuda_loss's function) from its logits z [NL] in
// shared memory: the gradient at the logits into grad (or not, when null); the probabilities, the loss
// and whether it was right written out by the writer block only.
template <int NL, class Loss>
__device__ void chain_sample_loss(const LossRun<Loss>& loss, const float* z, int s0, int s, int batch, float* grad,
                                  float* probs, bool writer, int lane) {
  const std::size_t at = std::size_t(s0 + s);
  const std::size_t out0 = loss.first ? std::size_t(*loss.first) * loss.first_stride : 0;  // of loss, correct
  cuda_loss<Loss>::template sample<NL>(loss.options, z, loss.labels ? loss.labels + at : nullptr,
                                       loss.labels ? nullptr : loss.targets + at * NL, batch, grad, 1,
                                       probs && writer ? probs + at * NL : nullptr,
                                       writer ? loss.loss + out0 + at : nullptr,
                                       writer ? loss.correct + out0 + at : nullptr, lane);
}

// One Dense stage's backward data for the tile: from gp [BT][N] (the gradient at its Dense output),
// gq [BT][I] = (gp·W) · Fp'(hp) (the previous stage's activation; hp [BT][I] its output), also written
// to `to` (when not null) for the tile's samples; without gq (the chain's first stage) it goes to `to`
// alone (Fp there: the activation below the chain, whose backward the chain then does; hp the chain's
// input tile, that activation's output). G lanes of a warp share V consecutive columns k, lane g taking
// the units n ≡ g (mod G) in increasing order, CU at a time (their weight loads in flight together); a
// butterfly of shuffles then adds the G lanes' sums. No barrier inside, and a fixed order: the results do not depend on the run.
// Rows are sample-major, so a lane's V columns of a sample are one vector access. Sizes at run time, as
// chain_forward_stage's.
template <int BT, int V, class Fp>
__device__ __noinline__ void chain_backward_stage(const float* gp, float* gq, const float* hp,
                                                  const float* __restrict__ w, float* to, int I, int N, int s0,
                                                  int count, int T, TileCluster tc) {
  constexpr int CU = 8;  // units whose loads are in flight together (16 measured slower; 4 and 6 the same)
  // This block's columns: Qb vector columns from q0 (the cluster's blocks take consecutive slices).
  const int Qc = ceil_div(I / V, tc.size), q0 = tc.rank * Qc, Qb = clamp_to(I / V - q0, 0, Qc);
  const int G = chain_column_lanes(Qb, T);  // lanes per column
  const int per_warp = 32 / G, lane = int(threadIdx.x) % 32, g = lane % G, slots = ceil_div(Qb, per_warp);
#pragma unroll 1
  for (int slot = int(threadIdx.x) / 32; slot < slots; slot += T / 32) {  // (uniform over the warp)
    const int qi = slot * per_warp + lane / G, k = (q0 + qi) * V;
    const bool active = qi < Qb;
    float acc[BT][V];
#pragma unroll
    for (int s = 0; s < BT; ++s)
#pragma unroll
      for (int j = 0; j < V; ++j) acc[s][j] = 0.f;
    if (active)
#pragma unroll 1
      for (int n0 = g; n0 < N; n0 += CU * G) {
        float wv[CU][V];
#pragma unroll
        for (int u = 0; u < CU; ++u) load_global(w + std::size_t(n0 + u * G) * I + k, n0 + u * G < N, wv[u]);
#pragma unroll
        for (int u = 0; u < CU; ++u) {
          const int n = n0 + u * G;
          if (n >= N) break;
#pragma unroll
          for (int s = 0; s < BT; ++s) {
            const float d = gp[s * N + n];  // (a broadcast to the warp's columns)
#pragma unroll
            for (int j = 0; j < V; ++j) acc[s][j] = fmaf(wv[u][j], d, acc[s][j]);
          }
        }
      }
#pragma unroll 1
    for (int half = G / 2; half >= 1; half /= 2)  // every lane of the G ends with the same sums
#pragma unroll
      for (int s = 0; s < BT; ++s)
#pragma unroll
        for (int j = 0; j < V; ++j) acc[s][j] += __shfl_xor_sync(0xffffffffu, acc[s][j], half);
    if (!active) continue;
#pragma unroll
    for (int s = 0; s < BT; ++s) {
      if (s % G != g) continue;  // the G lanes share the stores
      if constexpr (!std::is_same_v<Fp, identity_fn>) {
        float hv[V];
        load_floats(hp + s * I + k, hv);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[s][j] *= Fp::derivative(hv[j]);
      }
      if (gq) store_floats(gq + s * I + k, acc[s]);  // (gq: this block's own, as only split stages lack one)
      if (to && s < count) store_floats(to + std::size_t(s0 + s) * I + k, acc[s]);
    }
  }
}

// The chain's tail (DenseChainDims::tail): its last stage, N units on I inputs followed by Fn, with the
// loss fused, one warp per sample and no block barrier between the forward, the loss and the backward
// (which were three phases of the tile with barriers between them). Per sample s of the tile: the
// stage's forward (lane n of the warp ends with unit n: the same lanes' partial sums added by the same
// reduce-scatter as chain_forward_stage, so the same bits), the loss and its gradient at the logits
// (cuda_loss's function), Fn's derivative, and with Backward the gradient into the previous stage's
// output through its activation Fp: per column, the G partial sums of chain_backward_stage (lane g its
// units n ≡ g mod G in increasing order) added in its butterfly's tree, so again the same bits. A lane
// keeps its V columns' weights of all N units in registers from the forward to the backward.
template <int BT, int N, int I, int T, class Fn, class Fp, class Loss, bool Backward>
__device__ __noinline__ void chain_tail(const float* hin,  // [BT][I] shared: the previous stage's output
                                        float* top,        // [BT][N] shared: this stage's output
                                        float* gn,         // [BT][N] shared: the gradient at its Dense output
                                        float* gq,         // [BT][I] shared: the gradient into the previous stage
                                        const float* __restrict__ w, const float* __restrict__ b, float* pre,
                                        float* out, float* probs, float* dpre_last, float* dpre_prev,
                                        const LossRun<Loss>& loss, int s0, int count, int batch, bool writer) {
  constexpr int V = vec_width(I), KV = I / V, G = chain_column_lanes(KV, T);
  static_assert(N <= 32 && KV <= 32, "a lane's columns of every unit in registers");
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const bool has = lane < KV;
  float wv[N][V];
#pragma unroll
  for (int n = 0; n < N; ++n) load_global(w + std::size_t(n) * I + lane * V, has, wv[n]);
  for (int s = warp; s < count; s += T / 32) {  // (uniform over the warp)
    const std::size_t at = std::size_t(s0 + s);
    float xv[V] = {};
    if (has) load_floats(hin + s * I + lane * V, xv);
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.f;
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int j = 0; j < V; ++j) acc[n] = fmaf(wv[n][j], xv[j], acc[n]);
    const float sum = warp_reduce_scatter(acc, lane);
    if (lane < N) {
      const float p = sum + b[lane], y = Fn::apply(p);
      top[s * N + lane] = y;
      if (pre && writer) {
        pre[at * N + lane] = p;
        if (out != pre) out[at * N + lane] = y;
      }
    }
    __syncwarp();
    chain_sample_loss<N>(loss, top + s * N, s0, s, batch, Backward ? gn + s * N : nullptr, probs, writer, lane);
    if constexpr (Backward) {
      __syncwarp();
      if (lane < N) {
        float g = gn[s * N + lane];
        if constexpr (!std::is_same_v<Fn, identity_fn>) g *= Fn::derivative(top[s * N + lane]);
        gn[s * N + lane] = g;
        if (writer && dpre_last) dpre_last[at * N + lane] = g;
      }
      __syncwarp();
      if (!has) continue;
      float part[G][V];
#pragma unroll
      for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int j = 0; j < V; ++j) part[g][j] = 0.f;
#pragma unroll
        for (int n = g; n < N; n += G) {
          const float d = gn[s * N + n];
#pragma unroll
          for (int j = 0; j < V; ++j) part[g][j] = fmaf(wv[n][j], d, part[g][j]);
        }
      }
#pragma unroll
      for (int half = G / 2; half >= 1; half /= 2)
#pragma unroll
        for (int g = 0; g < half; ++g)
#pragma unroll
          for (int j = 0; j < V; ++j) part[g][j] += part[g + half][j];
      const int k = lane * V;
      if constexpr (!std::is_same_v<Fp, identity_fn>) {
        float hv[V];
        load_floats(hin + s * I + k, hv);
#pragma unroll
        for (int j = 0; j < V; ++j) part[0][j] *= Fp::derivative(hv[j]);
      }
      store_floats(gq + s * I + k, part[0]);
      if (writer && dpre_prev) store_floats(dpre_prev + at * I + k, part[0]);
    }
  }
}

// Below: the element-wise activation under the chain (identity_fn: none, or not folded), whose backward
// the chain applies to the gradient at its input (a.dx then is the gradient at that activation's input).
template <class Ch, class Loss, bool Backward, class Below = identity_fn>
__global__ void __launch_bounds__(Ch::threads(Backward))
kernel_dense_chain(DenseChainArgs<Ch::S> a, LossRun<Loss> loss)
{
  constexpr int S = Ch::S, BT = Ch::BT, U = 32 / BT, NL = Ch::NL, T = Ch::threads(Backward), warps = T / 32;
  constexpr bool fused_loss = !std::is_same_v<Loss, NoLoss>;
  // Preconditions
  static_assert(Ch::supported, "ctnn: this dense chain's tile does not fit in shared memory");
  static_assert(U * BT == 32, "a warp's units times the tile's samples fill its lanes");
  static_assert(!Backward || fused_loss || true, "backward reads dtop without a fused loss");

  __shared__ __align__(16) float smem[Ch::smem_floats];
  wait_for_prior_grids();  // (launched dependent: see launch.cuh)
  const TileCluster tc;
  const int s0 = int(blockIdx.x) / tc.size * BT, count = min_of(BT, a.batch - s0);
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;

  // The input tile, 16 bytes at a time where the rows allow (all loads in flight at once: a classifier's
  // tile is 4 × 2048 floats).
  if constexpr (Ch::I0 % 4 == 0) {
    if (reinterpret_cast<std::uintptr_t>(a.x) % 16 == 0) {
      constexpr int Q = BT * Ch::I0 / 4;
#pragma unroll
      for (int i = 0; i < ceil_div(Q, T); ++i) {
        const int e = int(threadIdx.x) + i * T;
        if (Q % T == 0 || e < Q)
          reinterpret_cast<float4*>(smem)[e] = 4 * e / Ch::I0 < count
                                                   ? reinterpret_cast<const float4*>(a.x + std::size_t(s0) * Ch::I0)[e]
                                                   : make_float4(0.f, 0.f, 0.f, 0.f);
      }
    } else {
      for (int e = threadIdx.x; e < BT * Ch::I0; e += T) smem[e] = e / Ch::I0 < count ? a.x[std::size_t(s0) * Ch::I0 + e] : 0.f;
    }
  } else {
#pragma unroll 4
    for (int e = threadIdx.x; e < BT * Ch::I0; e += T) {
      const int s = e / Ch::I0;
      smem[e] = s < count ? a.x[std::size_t(s0) * Ch::I0 + e] : 0.f;
    }
  }
  tc.sync();

  // Forward, stage by stage: h_l [BT][N] = fn(W·in + b).
  // A stage one block computes in one round of its warps (N <= U·warps units) runs whole in every
  // block, the first writing its outputs; a larger one is shared by the cluster's blocks. (LeNet-5 at
  // batch 64 on an H200: 120 → 84 whole in each block 7.3 µs against 3.3 shared, 84 → 10 1.8 against 2.4.)
  // A whole stage with too few unit groups for the warps splits its inputs among them (chain_split_ways).
  const bool writer = tc.rank == 0;
  constexpr bool tail = Ch::tail && fused_loss;  // the last stage, the loss and its backward: chain_tail
  static_for<S>([&](auto stage) {
    constexpr int L = decltype(stage)::value;
    if constexpr (!(tail && L == S - 1)) {  // (else chain_tail)
      using St = typename Ch::template stage<L>;
      constexpr bool whole = St::N <= (32 / BT) * warps;
      constexpr int ks = whole ? chain_split_ways(St::N, St::I, vec_width(St::I), BT, warps) : 1;
      if constexpr (ks > 1)
        chain_forward_stage_split<BT, vec_width(St::I), typename St::fn>(
            smem + (L == 0 ? 0 : Ch::h_at(L - 1)), smem + Ch::h_at(L), a.w[L], a.b[L], writer ? a.pre[L] : nullptr,
            writer ? a.out[L] : nullptr, St::I, St::N, s0, count, ks, smem + Ch::red_at);
      else
        chain_forward_stage<BT, vec_width(St::I), typename St::fn>(
            smem + (L == 0 ? 0 : Ch::h_at(L - 1)), smem + Ch::h_at(L), a.w[L], a.b[L],
            !whole || writer ? a.pre[L] : nullptr, !whole || writer ? a.out[L] : nullptr, St::I, St::N, s0, count, warps,
            whole ? TileCluster::alone() : tc);
      if (whole) __syncthreads();
      else tc.sync();
    }
  });

  const float* top = smem + Ch::h_at(S - 1);  // [BT][NL]
  float* g0 = smem + Ch::g_at;                // [BT][NL], later [BT][I_l]: gradient rows, sample-major
  float* g1 = g0 + Ch::max_n * BT;
  // Per sample (a warp each, in every block; the first block writes the results out): the loss and its
  // gradient (a row of g0), or the Softmax's probabilities.
  if constexpr (tail) {
    using St = typename Ch::template stage<S - 1>;
    chain_tail<BT, NL, St::I, T, typename St::fn, typename Ch::template stage<S - 2>::fn, Loss, Backward>(
        smem + Ch::h_at(S - 2), smem + Ch::h_at(S - 1), g0, g1, a.w[S - 1], a.b[S - 1], a.pre[S - 1], a.out[S - 1],
        a.probs, a.dpre[S - 1], a.dpre[S - 2], loss, s0, count, a.batch, writer);
  } else if constexpr (fused_loss) {
    for (int s = warp; s < count; s += warps)
      chain_sample_loss<NL>(loss, top + s * NL, s0, s, a.batch, Backward ? g0 + s * NL : nullptr, a.probs, writer,
                            lane);
  } else if constexpr (Ch::softmax) {
    if (a.probs && writer)
      for (int s = warp; s < count; s += warps) softmax_row<NL>(top + s * NL, a.probs + std::size_t(s0 + s) * NL, lane);
  }
  if constexpr (!Backward) return;

  if constexpr (!fused_loss)
    for (int e = threadIdx.x; e < BT * NL; e += T) g0[e] = e / NL < count ? a.dtop[std::size_t(s0) * NL + e] : 0.f;
  __syncthreads();
  if constexpr (!tail) {  // The last stage's activation: the gradient at its Dense output (each block its
    // own copy; one writes it out).
    using Fn = typename Ch::template stage<S - 1>::fn;
    for (int e = threadIdx.x; e < BT * NL; e += T) {
      float g = g0[e];
      if constexpr (!std::is_same_v<Fn, identity_fn>) g *= Fn::derivative(top[e]);
      g0[e] = g;
      if (e / NL < count && writer) a.dpre[S - 1][std::size_t(s0) * NL + e] = g;
    }
    __syncthreads();
  }

  // Backward, stage by stage from the last: the gradient at stage L's Dense output is in one buffer
  // (g0 for the last stage); its product with W goes to the other, through the previous stage's
  // activation, or to dx.
  static_for<S>([&](auto rev) {
    constexpr int L = S - 1 - decltype(rev)::value;
    if constexpr (!(tail && L == S - 1)) {  // (else chain_tail)
      using St = typename Ch::template stage<L>;
      constexpr int I = St::I;
      const float* gp = (S - 1 - L) % 2 == 0 ? g0 : g1;  // [BT][N]
      float* gq = (S - 1 - L) % 2 == 0 ? g1 : g0;        // [BT][I]
      if constexpr (L > 0) {  // every block the whole stage (one block of the cluster writes dpre)
        using Fp = typename Ch::template stage<L - 1>::fn;
        chain_backward_stage<BT, vec_width(I), Fp>(gp, gq, smem + Ch::h_at(L - 1), a.w[L],
                                                   writer ? a.dpre[L - 1] : nullptr, I, St::N, s0, count, T,
                                                   TileCluster::alone());
        __syncthreads();
      } else if (a.dx) {  // the cluster's blocks a share of dx each (through Below: from the input tile)
        chain_backward_stage<BT, vec_width(I), Below>(gp, nullptr, smem, a.w[L], a.dx, I, St::N, s0, count, T, tc);
      }
    }
  });
}

// The weight-gradient blocks of the chain: stage l has DenseWgrad<N_l, I_l>'s tiles (k_tiles ×
// n_tiles), each cut into chunks(batch) chunks of the batch.
template <class Ch>
struct DenseChainWeights {
  static constexpr int S = Ch::S;
  static constexpr int threads = 128;
  template <int L>
  using Cfg = DenseWgrad<Ch::template stage<L>::N, Ch::template stage<L>::I>;
  static constexpr std::array<int, S> tiles = [] {
    std::array<int, S> t{};
    static_for<S>([&](auto stage) {
      constexpr int L = decltype(stage)::value;
      t[L] = Cfg<L>::k_tiles * Cfg<L>::n_tiles;
    });
    return t;
  }();
  static constexpr int all_tiles = [] {
    int t = 0;
    for (int v : tiles) t += v;
    return t;
  }();
  static constexpr int rows = 64;  // samples per chunk (DenseWgrad's)
  static constexpr int chunks(int batch) { return ceil_div(batch > 0 ? batch : 1, rows); }
  static constexpr int max_tn = 8;
};

template <class Ch>
__global__ void __launch_bounds__(DenseChainWeights<Ch>::threads)
kernel_dense_chain_weights(DenseChainGrads<Ch::S> a, unsigned* __restrict__ tickets)
{
  using W = DenseChainWeights<Ch>;
  constexpr int ROWS = W::rows, T = W::threads;
  __shared__ __align__(16) float dy_s[ROWS * W::max_tn];  // (ROWS, TN)
  wait_for_prior_grids();
  const int chunks = W::chunks(a.batch);
  const int blk = int(blockIdx.x) / chunks, chunk = int(blockIdx.x) % chunks;
  int tile_base = 0;  // tiles of the stages before this block's
  static_for<Ch::S>([&](auto stage) {
    constexpr int L = decltype(stage)::value;
    using Cfg = typename W::template Cfg<L>;
    constexpr int N = Ch::template stage<L>::N, I = Ch::template stage<L>::I, TN = Cfg::tn, E = Cfg::E;
    static_assert(Cfg::threads == T && TN <= W::max_tn, "every stage's tile fits the launch");
    const int tile = blk - tile_base;
    tile_base += W::tiles[L];
    if (tile < 0 || tile >= W::tiles[L]) return;  // another stage's block (uniform over the block)
    const int kt = tile % Cfg::k_tiles, nt = tile / Cfg::k_tiles;
    const int k = kt * T + int(threadIdx.x), n0 = nt * TN, b0 = chunk * ROWS;
    const int count = min_of(ROWS, a.batch - b0);
    stage_dy_rows<N, TN>(a.dpre[L], dy_s, ROWS, T, b0, count, n0);
    __syncthreads();
    float acc[TN] = {};
    if (k <= I) dense_wgrad_column<I>(a.x[L], dy_s, b0, count, k, acc);
    auto out = [&](int col, float v) {
      if (col < N * I) a.dw[L][col] = v;
      else a.db[L][col - N * I] = v;
    };
    if (chunks == 1) {  // the whole batch in this block: no partials
#pragma unroll
      for (int j = 0; j < TN; ++j)
        if (k <= I && n0 + j < N) out(k < I ? (n0 + j) * I + k : N * I + n0 + j, acc[j]);
      return;
    }
    float* part = a.partials[L] + std::size_t(chunk) * E;
#pragma unroll
    for (int j = 0; j < TN; ++j)
      if (k <= I && n0 + j < N) part[k < I ? (n0 + j) * I + k : N * I + n0 + j] = acc[j];
    finish_splits(
        a.partials[L], a.sums[L], tickets + std::size_t(blk) * group_tickets(chunks), E, chunk, chunks,
        T * TN,
        [&](int e) {
          const int kk = kt * T + e % T, n = n0 + e / T;
          if (kk > I || n >= N) return -1;
          return kk < I ? n * I + kk : N * I + n;
        },
        out);
  });
}

}  // namespace kernels

// A dense chain Ch on the device. Enqueue only.
template <class Ch>
struct cuda_dense_chain {
  using W = kernels::DenseChainWeights<Ch>;
  static constexpr bool supported = Ch::supported;
  // The smallest batch that runs the chain fused: below it the layers' own kernels were measured
  // faster on an H100 (docs/fusion.md). CTNN_DENSE_CHAIN_MIN_BATCH overrides it (for measuring).
#ifdef CTNN_DENSE_CHAIN_MIN_BATCH
  static constexpr int min_batch = CTNN_DENSE_CHAIN_MIN_BATCH;
#else
  static constexpr int min_batch = 1;
#endif
  // In a forward without a loss (inference) the layers' own kernels were faster in a CUDA graph at every
  // batch measured (LeNet-5 on an H100: batch 1 35.7 against 53.6 us, 10,000 images 24.2 against 16.9 M
  // images/s; launched eagerly the chain's fewer launches win at batches 1 and 1,024), so there the
  // chain never runs fused; with the loss fused in (training, evaluate) it won at every batch.
  static constexpr int forward_min_batch = std::numeric_limits<int>::max();
  static constexpr int S = Ch::S;

  // Per stage: the partials and group sums of its weight gradient.
  template <int L>
  static constexpr std::size_t stage_floats(int max_batch) {
    const int chunks = W::chunks(max_batch);
    if (chunks == 1) return 0;
    const int rows =
        chunks + kernels::max_over(chunks, [](int s) { return kernels::ceil_div(s, kernels::group_for(s)); });
    return kernels::round_up(std::size_t(rows) * std::size_t(W::template Cfg<L>::E), std::size_t{64});
  }
  static constexpr std::size_t workspace_floats(int max_batch) {
    std::size_t total = 0;
    kernels::static_for<S>([&](auto stage) { total += stage_floats<decltype(stage)::value>(max_batch); });
    return total;
  }
  static constexpr std::size_t ticket_count(int max_batch) {
    return std::size_t(W::all_tiles) *
           std::size_t(kernels::max_over(W::chunks(max_batch), [](int s) { return kernels::group_tickets(s); }));
  }

  // Forward (and with Backward, backward data) of a.batch samples; with a Loss other than NoLoss its
  // loss and gradient at the last stage's output, else (Backward) that gradient from a.dtop. Below: the
  // activation under the chain whose backward a.dx gets (kernel_dense_chain).
  template <class Loss, bool Backward, class Below = identity_fn>
  static void run(const CudaContext& ctx, const kernels::DenseChainArgs<S>& a, const kernels::LossRun<Loss>& loss) {
    kernels::check_batch(a.batch, "Dense chain");
    const unsigned tiles = kernels::grid_for(std::size_t(a.batch), Ch::BT);
    int blocks_per_tile = 1;
    if (kernels::clusters_supported())
      for (int c = Ch::cluster; c > 1; c /= 2)
        if (2 * tiles * unsigned(c) <= kernels::sm_count()) {
          blocks_per_tile = c;
          break;
        }
    const unsigned grid = tiles * unsigned(blocks_per_tile);
    kernels::launch_kernel(kernels::kernel_dense_chain<Ch, Loss, Backward, Below>, grid, Ch::threads(Backward), 0,
                           ctx.stream, blocks_per_tile, kernels::Launch::dependent, a, loss);
  }

  // Every stage's dW and db; a.partials and a.sums are set here from ctx.workspace.
  static void weights(const CudaContext& ctx, kernels::DenseChainGrads<S> a) {
    kernels::check_batch(a.batch, "Dense chain backward");
    kernels::check_workspace(ctx, workspace_floats(a.batch), "Dense chain backward", a.batch);
    if (ctx.tickets == nullptr || ctx.ticket_count < ticket_count(a.batch))
      throw std::invalid_argument("ctnn: Dense chain backward needs " + std::to_string(ticket_count(a.batch)) +
                                  " tickets, but the CudaContext provides " + std::to_string(ctx.ticket_count));
    const int chunks = W::chunks(a.batch);
    float* at = ctx.workspace;
    kernels::static_for<S>([&](auto stage) {
      constexpr int L = decltype(stage)::value;
      a.partials[L] = at;
      a.sums[L] = at + std::size_t(chunks) * W::template Cfg<L>::E;
      at += stage_floats<L>(a.batch);
    });
    const unsigned grid = unsigned(W::all_tiles * chunks);
    kernels::launch_dependent(kernels::kernel_dense_chain_weights<Ch>, grid, W::threads, 0, ctx.stream, a, ctx.tickets);
  }
};

}  // namespace ctnn
