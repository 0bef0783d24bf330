#pragma once
// The implicit-GEMM convolutions of conv_gemm.cuh on the TF32 tensor cores (CudaContext::math ==
// Math::tf32; sm_80 or newer): the same three problems, the same gathers (ConvColumn, gather_a_tile,
// ConvWgradGather), the same cp.async pipeline and the same deterministic weight-gradient split, with
// the arithmetic done by mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32. Each operand is rounded
// to TF32 (10-bit mantissa, round to nearest, ties away, as cvt.rna rounds) as it leaves shared memory;
// the products accumulate in FP32, starting from the bias.
//
// A block of 4 warps owns a BM × BN tile of the result; warp (wm, wn) a (BM/WM) × (BN/WN) part of it,
// as MI × NJ mma tiles of 16 × 8, whose accumulators it holds in registers. Per BK = 16 slice a warp
// loads its A and B fragments from shared memory and issues 2·MI·NJ mma. Layouts, chosen so that
// every fragment load of a warp touches 32 distinct banks and each operand needs one base register:
//
//   k-contiguous (A of every problem; B of the weight gradient): one row of BK + 8 = 24 floats per row
//     (m) or column (n) of the tile. The mma's k slots t and t + 4 take the slice's k 2t and 2t + 1, so
//     a thread's two k of a row are neighbours: one 8-byte load (rows 24 floats apart put the 16 lanes
//     of a half-warp on 32 distinct banks).
//   k-major (B of the forward kind, gathered by 32 consecutive columns per warp and k): rows of
//     BN + 4 floats per k; a thread reads k 2t and 2t + 1 of column g (rows 2·(BN + 4) ≡ 8 (mod 32)
//     floats apart: lanes (t, g) on bank 8t + g).
//
// Summation order: fixed by the tile (mma k slots, then slices in increasing k), so two runs give the
// same bits; it differs from the FP32 kernels', and so do the results (by TF32's rounding).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../layers/activation.hpp"
#include "conv_gemm.cuh"

namespace ctnn::kernels {

// --- TF32 mma.sync ------------------------------------------------------------------------------------
// x rounded to TF32 as cvt.rna.tf32.f32 rounds it (to nearest on the 10-bit mantissa, ties away from
// zero), in one integer add: the mma ignores the 13 low bits of a TF32 operand, so adding half a TF32
// ulp to the magnitude bits rounds. Same result as cvt.rna for every input (an Inf stays Inf and a NaN
// a NaN once the low bits are dropped); cvt.rna compiles to a compare and a predicated add.
__device__ __forceinline__ unsigned tf32_round(float x) { return __float_as_uint(x) + 0x1000u; }

// d (16 × 8, FP32) += a (16 × 8, TF32, row-major) · b (8 × 8, TF32, column-major). Fragments (lane =
// 4·g + t): a = {(g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)}, b = {(t, g), (t + 4, g)},
// d = {(g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)}.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // TF32 tensor cores need sm_80 or newer
#endif
}

// --- Tile shape ---------------------------------------------------------------------------------------
template <int BM_, int BN_, int WM_, int WN_, int Stages_ = 3>
struct MmaTile {
  static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, BK = 16, stages = Stages_;
  static constexpr int threads = 32 * WM * WN;
  static constexpr int MI = BM / WM / 16, NJ = BN / WN / 8;  // m16 and n8 mma tiles per warp
  static constexpr int KC = BK + 8;                          // row stride of a k-contiguous tile
  static constexpr int KM = BN + 4;                          // row stride of a k-major tile
  static constexpr int KMA = BM + 4;                         // row stride of a k-major A tile (dense.cuh)
  // Blocks per SM the register allocation must allow (at most 168 registers per thread).
  static constexpr int min_blocks = 65536 / 168 / threads > 0 ? 65536 / 168 / threads : 1;
  static_assert(BM % (16 * WM) == 0 && BN % (8 * WN) == 0, "whole 16 × 8 mma tiles per warp");
  static_assert(BN % 16 == 0 && BM % 16 == 0, "k-major rows of BN + 4 (BM + 4) ≡ 4 (mod 16) floats");
  static_assert(stages >= 2, "double buffering at least");
};

// This lane's place: its mma group g and thread t in the group; the warp's first row and column.
template <class T>
struct MmaLane {
  int g, t, mw, nw;
  __device__ MmaLane() {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    g = lane / 4, t = lane % 4;
    mw = (warp / T::WN) * (T::BM / T::WM), nw = (warp % T::WN) * (T::BN / T::WN);
  }
  // Offsets of this lane's first fragment element in an A tile (k-contiguous rows) and a B tile.
  __device__ int a_at() const { return (mw + g) * T::KC + 2 * t; }
  __device__ int a_kmajor_at() const { return 2 * t * T::KMA + mw + g; }
  template <bool BKMajor>
  __device__ int b_at() const { return BKMajor ? 2 * t * T::KM + nw + g : (nw + g) * T::KC + 2 * t; }
};

// The sum of v over the four lanes of this lane's mma group (lanes 4g .. 4g + 3: the k slots of rows g,
// g + 8); every lane of the warp must call it.
__device__ __forceinline__ float mma_group_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// One k-step of a warp's tile: acc[i][j] += a[i] · b[j] for its MI m tiles and NJ n tiles.
template <int MI, int NJ>
__device__ __forceinline__ void mma_tile_tf32(float (&acc)[MI][NJ][4], const unsigned (&a)[MI][4],
                                              const unsigned (&b)[NJ][2]) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NJ; ++j) mma_m16n8k8_tf32(acc[i][j], a[i], b[j]);
}

// A warp's tile of accumulators from the bias (fragments as mma_m16n8k8_tf32's d): this lane's rows
// row0 + 16·i and row0 + 16·i + 8 of m tile i, bias[row] below `rows`, else (and with no bias) zero.
template <int MI, int NJ>
__device__ __forceinline__ void mma_tile_from_bias(float (&acc)[MI][NJ][4], const float* bias, int row0, int rows) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = row0 + 16 * i + 8 * h;
      const float b0 = bias && m < rows ? bias[m] : 0.f;
#pragma unroll
      for (int j = 0; j < NJ; ++j) acc[i][j][2 * h] = acc[i][j][2 * h + 1] = b0;
    }
}

// The A fragments of MI m tiles from shared memory, rounded to TF32: this lane's rows g, g + 8 and k
// columns t, t + 4 of m tile i, element (row r, column k) at A[(16·i + r)·row_step + k·k_step] (A already
// at this lane's (g, t)).
template <int MI>
__device__ __forceinline__ void load_a_tf32(unsigned (&a)[MI][4], const float* A, int row_step, int k_step) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) a[i][q] = tf32_round(A[(16 * i + 8 * (q % 2)) * row_step + 4 * (q / 2) * k_step]);
}

// acc += A · B over one BK = 16 slice: two m16n8k8 steps s. The mma's k slot j of step s is the
// slice's k 8s + 2j for j < 4 and 8s + 2(j − 4) + 1 for j >= 4 (any fixed permutation of k is the
// same product), which puts a thread's two k next to each other in a k-contiguous row. A and B point
// at this lane's first element (MmaLane::a_at, b_at). on_a(i, lo, hi) sees the unrounded A values
// of rows g and g + 8 of m tile i (the weight gradient sums them for the bias). AKMajor: A is stored
// k-major too (rows of KMA per k, MmaLane::a_kmajor_at), as a dense weight gradient's dy is.
template <class T, bool BKMajor, bool AKMajor = false, class OnA>
__device__ __forceinline__ void mma_slice(const float* A, const float* B, float (&acc)[T::MI][T::NJ][4],
                                          OnA&& on_a) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    unsigned a[T::MI][4], b[T::NJ][2];
#pragma unroll
    for (int i = 0; i < T::MI; ++i) {
      float2 lo, hi;  // rows g and g + 8, k 8s + 2t and 8s + 2t + 1
      if constexpr (AKMajor) {
        lo = make_float2(A[(8 * s) * T::KMA + 16 * i], A[(8 * s + 1) * T::KMA + 16 * i]);
        hi = make_float2(A[(8 * s) * T::KMA + 16 * i + 8], A[(8 * s + 1) * T::KMA + 16 * i + 8]);
      } else {
        lo = *reinterpret_cast<const float2*>(A + (16 * i) * T::KC + 8 * s);
        hi = *reinterpret_cast<const float2*>(A + (16 * i + 8) * T::KC + 8 * s);
      }
      on_a(i, lo, hi);
      a[i][0] = tf32_round(lo.x), a[i][1] = tf32_round(hi.x), a[i][2] = tf32_round(lo.y), a[i][3] = tf32_round(hi.y);
    }
#pragma unroll
    for (int j = 0; j < T::NJ; ++j) {
      if constexpr (BKMajor) {
        b[j][0] = tf32_round(B[(8 * s) * T::KM + 8 * j]);
        b[j][1] = tf32_round(B[(8 * s + 1) * T::KM + 8 * j]);
      } else {
        const float2 v = *reinterpret_cast<const float2*>(B + (8 * j) * T::KC + 8 * s);
        b[j][0] = tf32_round(v.x), b[j][1] = tf32_round(v.y);
      }
    }
    mma_tile_tf32(acc, a, b);
  }
}

// --- Shared memory ------------------------------------------------------------------------------------
// Dynamic shared memory (the tiles plus the k table may pass 48 KB); every kernel here declares it
// through this one function, so the declarations agree.
__device__ __forceinline__ float* conv_mma_smem() {
  extern __shared__ __align__(16) float4 conv_mma_smem_raw[];
  return reinterpret_cast<float*>(conv_mma_smem_raw);
}

// At most this much shared memory per block, so that at least two blocks fit on an SM (228 KB on
// Hopper, 164 KB on the A100); the k table goes in only when it fits beside the tiles.
inline constexpr int conv_mma_smem_budget = 80 * 1024;

// Forward kind: stages × (A: BM rows of KC, B: BK rows of KM), then the k table.
template <class T>
struct ConvMmaTiles {
  static constexpr int a_floats = T::BM * T::KC, b_floats = T::BK * T::KM;
  static constexpr int bytes = T::stages * (a_floats + b_floats) * 4;
};
template <class Pb, class T>
constexpr int conv_mma_table_size() {
  constexpr int kpad = ceil_div(ConvGemmTaps<Pb>::Kd, T::BK) * T::BK;
  return ConvMmaTiles<T>::bytes + 16 * kpad <= conv_mma_smem_budget ? kpad : 0;
}

// --- The forward kind (forward, backward data) --------------------------------------------------------
// One block: the BM × BN tile at (blockIdx.y, blockIdx.x) of a problem of the forward kind (see
// ConvFwdGemm). A (weights) is gathered k-contiguous: 16-byte copies of W's rows for the forward
// (a_rows_contiguous), otherwise element by element through the k table; B (the source) k-major by
// ConvColumn, as in conv_gemm_block. Fn: the activation after the layer, applied before the store.
template <class Pb, class T, class Fn = identity_fn>
__device__ __forceinline__ void conv_mma_block(float* smem, int tab_size, const float* __restrict__ a_src,
                                               const float* __restrict__ bias, const float* __restrict__ src,
                                               float* __restrict__ out, int batch, int splits) {
  using Tiles = ConvMmaTiles<T>;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, NT = T::threads, MI = T::MI, NJ = T::NJ;
  constexpr int QHW = Pb::QH * Pb::QW, Kd = ConvGemmTaps<Pb>::Kd;
  constexpr int k_tiles = ceil_div(Kd, BK), b_rows = NT / BN;
  constexpr bool a_vec = Pb::a_rows_contiguous && Pb::AMS % 4 == 0 && Kd % 4 == 0;
  // Preconditions
  static_assert(NT % BN == 0 && BK % b_rows == 0, "each thread gathers one column of the source tile");
  static_assert(QHW > 0 && Pb::M > 0, "a non-empty problem");
  static_assert(BM * (BN + 4) * 4 <= Tiles::bytes, "a split's partial tile fits in the tiles' memory");

  float* As = smem;                                 // (stages, BM, KC): A, k-contiguous rows
  float* Bs = smem + T::stages * Tiles::a_floats;   // (stages, BK, KM): the source, k-major
  ConvTap* tap_s = reinterpret_cast<ConvTap*>(Bs + T::stages * Tiles::b_floats);  // (k), or none
  const int columns = batch * QHW;
  const ConvSplit sp(splits, k_tiles);
  const int q0 = sp.tile() * BN, m0 = blockIdx.y * BM;
  if (q0 >= columns) return;  // a smaller parity class than the grid's largest: the whole block (cluster)
  const ConvTapSource<Pb> tap = conv_tap_source<Pb, NT>(tap_s, tab_size, k_tiles * BK);
  const int lq = threadIdx.x % BN, lk = threadIdx.x / BN;  // the source column this thread gathers
  const ConvColumn<Pb> column(src, q0 + lq, columns);
  __syncthreads();  // tap_s is ready

  auto load_tile = [&](int stage, int kt) {
    const int k0 = kt * BK;
    float* A = As + stage * Tiles::a_floats;
    if constexpr (a_vec) {
      constexpr int quads = BM * BK / 4;  // 4 consecutive k of one row
#pragma unroll
      for (int j = 0; j < ceil_div(quads, NT); ++j) {
        const int e = threadIdx.x + j * NT;
        const int v = e % (BK / 4), mm = e / (BK / 4), m = m0 + mm, k = k0 + 4 * v;
        const bool ok = m < Pb::M && k < Kd;  // Kd % 4 == 0: a quad is all in or all out
        if (quads % NT == 0 || e < quads) cp_async_f32x4(A + mm * T::KC + 4 * v, ok ? a_src + m * Pb::AMS + k : a_src, ok);
      }
    } else {
      gather_a_tile<Pb, BM, BK, NT>(a_src, m0, k0, tap, [&](int kk, int mm) { return A + mm * T::KC + kk; });
    }
    float* B = Bs + stage * Tiles::b_floats;
#pragma unroll
    for (int j = 0; j < BK / b_rows; ++j) {
      const int kk = lk + j * b_rows;
      column.gather(B + kk * T::KM + lq, tap(k0 + kk));  // the same k across the warp
    }
  };

  const MmaLane<T> lane;
  float acc[MI][NJ][4];  // (m tile, n tile, fragment)
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + lane.mw + 16 * i + 8 * h + lane.g;
      const float b0 = Pb::has_bias && m < Pb::M && sp.split == 0 ? bias[m] : 0.f;
#pragma unroll
      for (int j = 0; j < NJ; ++j) acc[i][j][2 * h] = acc[i][j][2 * h + 1] = b0;
    }
  const int a_at = lane.a_at(), b_at = lane.template b_at<true>();
  cp_async_pipeline<T::stages>(sp.end - sp.first, [&](int stage, int t) { load_tile(stage, sp.first + t); },
                               [&](int stage) {
                                 mma_slice<T, true>(As + stage * Tiles::a_floats + a_at,
                                                    Bs + stage * Tiles::b_floats + b_at, acc, [](int, float2, float2) {});
                               });

  if (splits > 1) {
    __syncthreads();  // every warp is done with the tiles: they hold the partial tile now
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < NJ; ++j)
          *reinterpret_cast<float2*>(smem + (lane.mw + 16 * i + 8 * h + lane.g) * (BN + 4) + lane.nw + 8 * j + 2 * lane.t) =
              make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
    conv_split_reduce_store<Pb, BM, BN, NT, Fn>(smem, sp, out, m0, q0, columns);
    return;
  }

  // A thread holds columns q, q + 1 of rows g and g + 8 per mma tile. For the forward (contiguous
  // output rows, QH·QW even) the two are neighbours in one sample's plane: one 8-byte store.
  constexpr bool pairs = Pb::OYS == 1 && Pb::OXS == 1 && Pb::QW == Pb::OW && QHW % 2 == 0;
  const bool vec = pairs && reinterpret_cast<std::uintptr_t>(out) % 8 == 0;
  constexpr std::size_t plane = std::size_t(Pb::OH) * Pb::OW;
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int q = q0 + lane.nw + 8 * j + 2 * lane.t;
    if (q >= columns) continue;
    const bool second = q + 1 < columns;
    const std::size_t at0 = conv_out_offset<Pb>(q), at1 = second && !vec ? conv_out_offset<Pb>(q + 1) : 0;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + lane.mw + 16 * i + 8 * h + lane.g;
        if (m >= Pb::M) continue;
        const float v0 = Fn::apply(acc[i][j][2 * h]), v1 = Fn::apply(acc[i][j][2 * h + 1]);
        if (vec) {
          *reinterpret_cast<float2*>(out + at0 + m * plane) = make_float2(v0, v1);  // q even, columns even
        } else {
          out[at0 + m * plane] = v0;
          if (second) out[at1 + m * plane] = v1;
        }
      }
  }
}

template <class Pb, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_mma(const float* __restrict__ a_src,  // weights: A(m, k) = a_src[m·AMS + a_off(k)]
                const float* __restrict__ bias,   // [M] (unused without Pb::has_bias)
                const float* __restrict__ src,    // [batch][SC][SH][SW]
                float* __restrict__ out,          // [batch][M][OH][OW]
                int batch, int splits)
{
  conv_mma_block<Pb, T, Fn>(conv_mma_smem(), conv_mma_table_size<Pb, T>(), a_src, bias, src, out, batch, splits);
}

template <class G, class T>
constexpr int conv_dgrad_mma_table_size() {
  return max_over_parity_classes<G>([](auto pb) { return conv_mma_table_size<typename decltype(pb)::type, T>(); });
}

// Backward data, all S·S parity classes in one launch: class blockIdx.z.
template <class G, class T>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_dgrad_mma(const float* __restrict__ w,   // [Out][C][K][K]
                      const float* __restrict__ dy,  // [batch][Out][OH][OW]
                      float* __restrict__ dx,        // [batch][C][H][W]
                      int batch, int splits)
{
  constexpr int tab = conv_dgrad_mma_table_size<G, T>();
  for_parity_class<G>(int(blockIdx.z), [&](auto pb) {
    conv_mma_block<typename decltype(pb)::type, T>(conv_mma_smem(), tab, w, nullptr, dy, dx, batch, splits);
  });
}

// Tiles: BM = 32 or 64 rows; BN 128 (wide: 4 warps of 32 × 32 or 32 × 64), 64 (narrow: 4 warps of
// 16 × 32 or 32 × 32) or 32 (slim: 4 warps of 16 × 16 or 32 × 16). The gathers' instructions, not the
// mma, set the pace: a block runs its k tiles one after another, so the widest tile that still gives
// enough blocks wins (measured on an H100, docs/conv_kernels.md).
template <int M>
using ConvMmaWide = MmaTile<(M <= 32 ? 32 : 64), 128, (M <= 32 ? 1 : 2), (M <= 32 ? 4 : 2)>;
template <int M>
using ConvMmaNarrow = MmaTile<(M <= 32 ? 32 : 64), 64, 2, 2>;
template <int M>
using ConvMmaSlim = MmaTile<(M <= 32 ? 32 : 64), 32, 2, 2>;
enum class ConvMmaTileChoice { wide, narrow, slim };
// The rule's tile and split-K factor, from conv_bench on an H100 (docs/conv_kernels.md): the wide tile
// when it gives at least two blocks per SM (for 64 rows too: 7-14% faster than narrow at B = 256),
// else the narrow one when it gives at least one block per SM, else the slim one; split-K 2 when the
// chosen tile gives under two blocks per SM (7-15% faster), except for strided backward data (its
// splits were slower: 19.5 -> 21.9 us on 64->64 s2, B = 64).
struct ConvMmaPlan {
  ConvMmaTileChoice tile;
  int splits;
};
template <int M>
ConvMmaPlan conv_mma_plan(long long columns, long long x_columns, int classes, int k_tiles) {
  using C = ConvMmaTileChoice;
  const C tile = conv_blocks<M>(columns, 128) >= conv_two_waves ? C::wide
                 : conv_blocks<M>(columns, 64) >= conv_two_waves / 2 ? C::narrow
                                                                     : C::slim;
  const int bn = tile == C::wide ? 128 : tile == C::narrow ? 64 : 32;
  return {tile, conv_split_k(classes == 1 && conv_blocks<M>(x_columns, bn) < conv_two_waves && k_tiles >= 16)};
}
template <class Pb>
ConvMmaPlan conv_mma_fwd_plan(int batch) {
  const long long columns = (long long)batch * Pb::QH * Pb::QW;
  return conv_mma_plan<Pb::M>(columns, columns, 1, ceil_div(ConvGemmTaps<Pb>::Kd, 16));
}
template <class G>
ConvMmaPlan conv_mma_dgrad_plan(int batch) {
  return conv_mma_plan<G::C>((long long)batch * G::H * G::W,
                             (long long)batch * ceil_div(G::H, G::S) * ceil_div(G::W, G::S), G::S * G::S,
                             conv_dgrad_k_tiles<G>());
}

inline void check_tf32_weights(const float* w) {
  if (reinterpret_cast<std::uintptr_t>(w) % 16 != 0)
    throw std::invalid_argument("ctnn: Conv (TF32): the weights must be 16-byte aligned");
}

template <class Pb, class T, class Fn = identity_fn>
void launch_conv_mma(cudaStream_t stream, const float* a_src, const float* bias, const float* src, float* out,
                     int batch, int splits = 1) {
  const long long columns = (long long)batch * Pb::QH * Pb::QW;
  check_conv_columns(columns, batch);
  if constexpr (Pb::a_rows_contiguous) check_tf32_weights(a_src);
  constexpr int smem = ConvMmaTiles<T>::bytes + 16 * conv_mma_table_size<Pb, T>();
  request_dynamic_smem<kernel_conv_mma<Pb, T, Fn>, smem>();
  const dim3 grid(grid_for(std::size_t(columns), T::BN) * unsigned(splits), unsigned(ceil_div(Pb::M, T::BM)));
  launch_split_k(kernel_conv_mma<Pb, T, Fn>, grid, T::threads, smem, stream, splits, a_src, bias, src, out, batch, splits);
}

template <class Pb, class Fn = identity_fn>
void launch_conv_mma_auto(cudaStream_t stream, const float* a_src, const float* bias, const float* src,
                          float* out, int batch) {
  const ConvMmaPlan p = conv_mma_fwd_plan<Pb>(batch);
  switch (p.tile) {
    case ConvMmaTileChoice::wide: return launch_conv_mma<Pb, ConvMmaWide<Pb::M>, Fn>(stream, a_src, bias, src, out, batch, p.splits);
    case ConvMmaTileChoice::narrow: return launch_conv_mma<Pb, ConvMmaNarrow<Pb::M>, Fn>(stream, a_src, bias, src, out, batch, p.splits);
    case ConvMmaTileChoice::slim: return launch_conv_mma<Pb, ConvMmaSlim<Pb::M>, Fn>(stream, a_src, bias, src, out, batch, p.splits);
  }
}

// Backward data: one launch, grid (columns of the largest class, C tiles, S·S classes).
template <class G, class T>
void launch_conv_dgrad_mma(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch,
                           int splits = 1) {
  constexpr int qmax = ceil_div(G::H, G::S) * ceil_div(G::W, G::S);  // class (0, 0) is the largest
  check_conv_columns((long long)batch * G::H * G::W, batch);
  constexpr int smem = ConvMmaTiles<T>::bytes + 16 * conv_dgrad_mma_table_size<G, T>();
  request_dynamic_smem<kernel_conv_dgrad_mma<G, T>, smem>();
  const dim3 grid(grid_for(std::size_t(batch) * qmax, T::BN) * unsigned(splits), unsigned(ceil_div(G::C, T::BM)),
                  G::S * G::S);
  launch_split_k(kernel_conv_dgrad_mma<G, T>, grid, T::threads, smem, stream, splits, w, dy, dx, batch, splits);
}
template <class G>
void launch_conv_dgrad_mma_auto(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch) {
  const ConvMmaPlan p = conv_mma_dgrad_plan<G>(batch);
  switch (p.tile) {
    case ConvMmaTileChoice::wide: return launch_conv_dgrad_mma<G, ConvMmaWide<G::C>>(stream, w, dy, dx, batch, p.splits);
    case ConvMmaTileChoice::narrow: return launch_conv_dgrad_mma<G, ConvMmaNarrow<G::C>>(stream, w, dy, dx, batch, p.splits);
    case ConvMmaTileChoice::slim: return launch_conv_dgrad_mma<G, ConvMmaSlim<G::C>>(stream, w, dy, dx, batch, p.splits);
  }
}

// --- Backward weights ---------------------------------------------------------------------------------
// The FP32 kernel's problem, split and gathers (rows o, columns k = (c, ky, kx), reduction over the
// positions q in BK steps), with both operands k-contiguous: dy as rows o, x's window taps as rows k.
template <class G>
struct ConvWgradMma : ConvWgradSplits<G, (G::Out <= 32 ? 32 : 64), wgrad_bn<G::CKK>(), 16> {
  static constexpr int BM = G::Out <= 32 ? 32 : 64, BN = wgrad_bn<G::CKK>();
  using Tile = MmaTile<BM, BN, BM / 32, 4 / (BM / 32)>;  // 4 warps of 32 × BN/4 or 32 × BN/2
  static constexpr int a_floats = BM * Tile::KC, b_floats = BN * Tile::KC;
  static constexpr int smem_bytes = Tile::stages * (a_floats + b_floats) * 4 + 16 * BN;
  static constexpr bool dy_vec = G::OHW % 4 == 0;  // dy gathered 4 positions at a time (16-byte aligned)
};

template <class G>
__global__ void __launch_bounds__(ConvWgradMma<G>::Tile::threads, ConvWgradMma<G>::Tile::min_blocks)
kernel_conv_wgrad_mma(const float* __restrict__ x,   // [batch][C][H][W]
                      const float* __restrict__ dy,  // [batch][Out][OH][OW]
                      float* __restrict__ partials,  // [gridDim.x][E]: dW [Out][C·K·K], db [Out]
                      int rows,                      // batch·OH·OW
                      int per_split)                 // BK steps per split
{
  using Cfg = ConvWgradMma<G>;
  using T = typename Cfg::Tile;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, NT = T::threads, MI = T::MI, NJ = T::NJ;
  constexpr bool dy_vec = Cfg::dy_vec;
  // Preconditions
  static_assert(G::valid, "ctnn: invalid convolution geometry");

  float* As = conv_mma_smem();                     // (stages, BM, KC): dy, rows o
  float* Bs = As + T::stages * Cfg::a_floats;      // (stages, BN, KC): x window taps, rows k
  ConvTap* tap_s = reinterpret_cast<ConvTap*>(Bs + T::stages * Cfg::b_floats);  // (BN): the k columns
  const int split = blockIdx.x, n0 = blockIdx.y * BN, m0 = blockIdx.z * BM;
  const int step0 = split * per_split;
  const int step_end = min_of(step0 + per_split, ceil_div(rows, BK));
  using Gather = ConvWgradGather<G, BM, BN, BK, NT>;
  for (int nn = threadIdx.x; nn < BN; nn += NT) tap_s[nn] = Gather::Taps::at(n0 + nn);
  __syncthreads();
  const Gather gather(x, dy, tap_s, rows, m0);

  const MmaLane<T> lane;
  float acc[MI][NJ][4] = {};  // (m tile, n tile, fragment)
  // db (row sums of dy): in the blocks of the first k tile, by the warps of the first warp column;
  // each lane sums its own k slots, the four lanes of a group are added at the end.
  float bsum[MI][2] = {};
  const bool sums_bias = blockIdx.y == 0 && (threadIdx.x / 32) % T::WN == 0;
  const int a_at = lane.a_at(), b_at = lane.template b_at<false>();
  cp_async_pipeline<T::stages>(
      max_of(step_end - step0, 0),
      [&](int stage, int t) {
        float* A = As + stage * Cfg::a_floats;
        float* B = Bs + stage * Cfg::b_floats;
        if constexpr (dy_vec) {
          // dy's rows are contiguous in q within a sample, and OH·OW % 4 == 0: 16-byte copies of 4 q.
          const int q0 = (step0 + t) * BK;
#pragma unroll
          for (int j = 0; j < ceil_div(BM * BK / 4, NT); ++j) {
            const int e = threadIdx.x + j * NT, v = e % (BK / 4), mm = e / (BK / 4), o = m0 + mm, q = q0 + 4 * v;
            const bool ok = q < rows && o < G::Out;  // rows % 4 == 0: a quad is all in or all out
            const int n = q / G::OHW, p = q % G::OHW;
            if ((BM * BK / 4) % NT == 0 || e < BM * BK / 4)
              cp_async_f32x4(A + mm * T::KC + 4 * v, dy + (ok ? (std::size_t(n) * G::Out + o) * G::OHW + p : 0), ok);
          }
        } else {
          gather.load_dy(step0 + t, [&](int kk, int mm) { return A + mm * T::KC + kk; });
        }
        gather.load_x(step0 + t, [&](int kk, int nn) { return B + nn * T::KC + kk; });
      },
      [&](int stage) {
        mma_slice<T, false>(As + stage * Cfg::a_floats + a_at, Bs + stage * Cfg::b_floats + b_at, acc,
                            [&](int i, float2 lo, float2 hi) {
                              if (sums_bias) bsum[i][0] += lo.x + lo.y, bsum[i][1] += hi.x + hi.y;
                            });
      });

  float* part = partials + std::size_t(split) * Cfg::E;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int o = m0 + lane.mw + 16 * i + 8 * h + lane.g;
      if (sums_bias) {  // warp-uniform: every lane takes part in the shuffles
        const float v = mma_group_sum(bsum[i][h]);
        if (lane.t == 0 && o < G::Out) part[G::Out * G::CKK + o] = v;
      }
      if (o >= G::Out) continue;
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const int k = n0 + lane.nw + 8 * j + 2 * lane.t;
        if (k < G::CKK) part[o * G::CKK + k] = acc[i][j][2 * h];
        if (k + 1 < G::CKK) part[o * G::CKK + k + 1] = acc[i][j][2 * h + 1];
      }
    }
}

// Stage 1 into `partials` (at least ConvWgradMma<G>::workspace_floats(batch) floats), then stage 2.
template <class G>
void launch_conv_wgrad_mma(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                           float* db, int batch) {
  using Cfg = ConvWgradMma<G>;
  const long long rows = (long long)batch * G::OHW;
  if (rows + Cfg::Tile::BK > 0x7fffffffLL)
    throw std::invalid_argument("ctnn: Conv backward: batch " + std::to_string(batch) + " is too large");
  if (Cfg::dy_vec && reinterpret_cast<std::uintptr_t>(dy) % 16 != 0)
    throw std::invalid_argument("ctnn: Conv backward (TF32): dy must be 16-byte aligned");
  const int splits = Cfg::splits(batch);
  request_dynamic_smem<kernel_conv_wgrad_mma<G>, Cfg::smem_bytes>();
  const dim3 grid(unsigned(splits), Cfg::n_tiles, Cfg::m_tiles);
  kernel_conv_wgrad_mma<G><<<grid, Cfg::Tile::threads, Cfg::smem_bytes, stream>>>(x, dy, partials, int(rows),
                                                                                 int(Cfg::per_split(batch)));
  CTNN_CHECK_LAUNCH();
  sum_partials(stream, partials, splits, Cfg::E, G::Out * G::CKK, dw, db);
}

}  // namespace ctnn::kernels
