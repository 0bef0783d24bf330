#pragma once
// Convolution as implicit GEMM, for layers wide enough to fill a matrix tile (>= 16 input and output
// channels): forward, backward data and backward weights, all FP32 on the CUDA cores.
//
//   forward         Y  (Out × batch·OH·OW) = W (Out × C·K·K)   · Xcol  (C·K·K × batch·OH·OW)
//   backward data   dX (C × batch·H·W)     = Wᵀ (C × Out·taps) · dYcol (Out·taps × batch·H·W)
//   backward weight dW (Out × C·K·K)       = dY (Out × batch·OH·OW) · Xcolᵀ (batch·OH·OW × C·K·K)
//
// The column matrices are never stored: each k tile is gathered from the activation tensor straight
// into shared memory with cp.async (4-byte copies; a padded or out-of-range element is zero-filled by
// the copy itself), three stages deep, so the gathers of the next tiles overlap the arithmetic.
// A block owns a BM × BN tile of the result; each thread holds TM × TN accumulators and per k step
// reads TM + TN operands from shared memory as float4 (the tiles are stored k-major, rows padded by
// 4 floats so that the transposing stores of the gathers hit few banks and the float4 reads none).
//
// Backward data with stride S splits dX into S·S parity classes (iy mod S, ix mod S). In a class only
// the taps with (iy + P − ky·D) divisible by S contribute, and they read dy at a fixed offset from
// (iy div S), so each class is a dense GEMM with no zero taps (for S = 1 there is one class: the
// usual "convolution with the flipped kernel").
//
// Backward weights reduces over batch·OH·OW: the reduction is cut into a number of splits that
// depends on the batch alone; block (split, k tile, o tile) writes its partial tile and
// sum_partials adds the splits in a fixed order: deterministic, no atomics. db is the row sums of dY,
// accumulated by the blocks of the first k tile on the side.
//
// Every accumulator starts from the bias (or zero) and adds its k terms in increasing k with fmaf, so
// the result does not depend on the tile shape (the forward's bits equal the direct kernel's).
//
// Split-K (forward and backward data, when the columns give too few blocks to fill the GPU): the k
// tiles are cut into `splits` contiguous ranges, one per block of a thread-block cluster; each block
// leaves its partial tile in its shared memory and the cluster adds the partials in split order through
// distributed shared memory (conv_split_reduce_store): deterministic, no atomics, no workspace. The
// sum then differs from the unsplit kernel's by rounding only.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../layers/activation.hpp"
#include "cluster.cuh"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn::kernels {

// --- cp.async (sm_80+), with a synchronous fallback for older targets -------------------------------
// 4 bytes to a shared-window address (__cvta_generic_to_shared of a buffer, which a caller that
// copies many elements converts once: a generic pointer per copy costs a conversion each), zero-filled
// when !valid. sm_80+ only (the mma kernels that call it directly need it anyway).
__device__ __forceinline__ void cp_async_f32(unsigned dst_shared, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst_shared), "l"(src), "r"(valid ? 4 : 0));
#else
  (void)dst_shared, (void)src, (void)valid;
  __trap();
#endif
}
__device__ __forceinline__ void cp_async_f32(float* dst_smem, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  cp_async_f32(static_cast<unsigned>(__cvta_generic_to_shared(dst_smem)), src, valid);
#else
  *dst_smem = valid ? *src : 0.f;
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most N committed groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
// 16 bytes (4 floats; both addresses 16-byte aligned), zero-filled when !valid; L2 only (.cg).
__device__ __forceinline__ void cp_async_f32x4(float* dst_smem, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(dst_smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
#else
  *reinterpret_cast<float4*>(dst_smem) = valid ? *reinterpret_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// The k loop of a cp.async pipeline `Stages` deep: load(stage, step) issues the copies of one step
// into a stage buffer, compute(stage) consumes one. The copies of steps t+1 .. t+Stages-1 are in
// flight while step t is computed; one __syncthreads per step (after it, every thread's copies of
// step t have landed and every thread is done with the stage that step t + Stages − 1 overwrites).
template <int Stages, class Load, class Compute>
__device__ __forceinline__ void cp_async_pipeline(int steps, Load&& load, Compute&& compute) {
  static_assert(Stages >= 2, "double buffering at least");
#pragma unroll
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < steps) load(s, s);
    cp_async_commit();
  }
  int rd = 0, wr = Stages - 1;
  for (int t = 0; t < steps; ++t) {
    cp_async_wait<Stages - 2>();  // this thread's copies of step t have landed
    __syncthreads();              // everyone's have, and everyone is done with step t − 1
    const int next = t + Stages - 1;
    if (next < steps) load(wr, next);  // into the stage step t − 1 used
    cp_async_commit();
    compute(rd);
    rd = rd + 1 == Stages ? 0 : rd + 1;  // = t % Stages, next % Stages, without divisions
    wr = wr + 1 == Stages ? 0 : wr + 1;
  }
  cp_async_wait<0>();
}

// --- Tile shape ------------------------------------------------------------------------------------
// Thread (tr, tc) of the TR × TC thread grid owns rows ((g·TR + tr)·4 + i) and columns
// ((h·TC + tc)·4 + j), i, j < 4, of the BM × BN tile: float4 groups strided by the thread grid, so
// that neighbouring threads read neighbouring float4s (conflict-free) and store neighbouring columns.
template <int BM_, int BN_, int TM_, int TN_, int BK_ = 16, int Stages_ = 3, bool Swizzle_ = false>
struct GemmTile {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_, BK = BK_, stages = Stages_;
  static constexpr bool swizzle = Swizzle_;
  static constexpr int TR = BM / TM, TC = BN / TN;  // thread rows, thread columns
  static constexpr int threads = TR * TC;
  // Blocks per SM the register allocation must allow (at most 168 registers per thread): the
  // compiler's own choice for an 8 × 8 tile (over 220) leaves 8 warps per SM, too few to hide the
  // gather's latency.
  static constexpr int min_blocks = 65536 / 168 / threads;
  static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are whole float4s");
  static_assert(BM % 32 == 0 && BN % 32 == 0, "tiles of whole warps' float4 reads");
  static_assert(BM % TM == 0 && BN % TN == 0 && threads % 32 == 0 && threads <= 256, "thread grid");
  static_assert(threads % BK == 0, "a thread keeps one k row of every tile it gathers");
  static_assert(stages >= 2, "double buffering at least");
  // A k-major tile row holds BX + 4 floats: the gathers' transposing stores (neighbouring lanes,
  // neighbouring k) then fall in 8 banks instead of one, and the float4 reads stay aligned. Or, with
  // Swizzle, BX floats with the float4 groups of row kk XOR'd with kk mod 8 (same effect on the banks;
  // measured faster for the weight gradient, whose 8 × 8 thread tile is short of registers).
  static constexpr int AS = swizzle ? BM : BM + 4, BS = swizzle ? BN : BN + 4;  // row strides
  static constexpr int a_floats = BK * AS, b_floats = BK * BS;
  static constexpr int smem_floats = stages * (a_floats + b_floats);
  // A warp covers WR × WC threads of the grid (4 × 8, or 8 × 4 when TC is not a multiple of 8), so
  // that per k its fragment reads touch 4 or 8 distinct float4s of A and of B: one shared-memory
  // wavefront each, where a warp spanning 2 × 16 threads needs two for B.
  static constexpr int WC = TC % 8 == 0 && TR % 4 == 0 ? 8 : 4, WR = 32 / WC;
  static_assert(TC % WC == 0 && TR % WR == 0, "whole warps tile the thread grid");
  static constexpr __host__ __device__ int thread_row(int t) { return (t / 32) / (TC / WC) * WR + (t % 32) / WC; }
  static constexpr __host__ __device__ int thread_col(int t) { return (t / 32) % (TC / WC) * WC + t % WC; }
  static_assert(smem_floats <= smem_limit_floats, "static shared memory");
};

// Element (kk, col) of a k-major tile of T whose rows hold `Stride` floats.
template <class T, int Stride>
__device__ __forceinline__ int tile_at(int kk, int col) {
  if constexpr (T::swizzle) return kk * Stride + (col ^ ((kk & 7) << 2));
  else return kk * Stride + col;
}

// acc[i][j] += Σ_kk A[kk][row i] · B[kk][column j] over one BK step.
template <class T>
__device__ __forceinline__ void tile_multiply(const float* As, const float* Bs, int tr, int tc,
                                              float (&acc)[T::TM][T::TN]) {
#pragma unroll
  for (int kk = 0; kk < T::BK; ++kk) {
    float a[T::TM], b[T::TN];
#pragma unroll
    for (int g = 0; g < T::TM / 4; ++g) {
      const float4 v = *reinterpret_cast<const float4*>(As + tile_at<T, T::AS>(kk, (g * T::TR + tr) * 4));
      a[4 * g] = v.x, a[4 * g + 1] = v.y, a[4 * g + 2] = v.z, a[4 * g + 3] = v.w;
    }
#pragma unroll
    for (int h = 0; h < T::TN / 4; ++h) {
      const float4 v = *reinterpret_cast<const float4*>(Bs + tile_at<T, T::BS>(kk, (h * T::TC + tc) * 4));
      b[4 * h] = v.x, b[4 * h + 1] = v.y, b[4 * h + 2] = v.z, b[4 * h + 3] = v.w;
    }
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
      for (int j = 0; j < T::TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }
}

template <class T>
__device__ __forceinline__ int tile_row(int i, int tr) { return ((i / 4) * T::TR + tr) * 4 + i % 4; }
template <class T>
__device__ __forceinline__ int tile_col(int j, int tc) { return ((j / 4) * T::TC + tc) * 4 + j % 4; }

// --- The two GEMM problems of the forward kind ------------------------------------------------------
// Both compute out[n][m][oy(a)][ox(b)] = bias[m] + Σ_k A(m, k) · src[n][ch][a·YS + Y0 + ty(jy)]
// [b·XS + X0 + tx(jx)], zero where the source index falls outside the source, for columns
// q = (n, a, b) over batch × QH × QW and k = (ch, jy, jx) over SC × NY × NX window taps;
// A(m, k) = a_src[m·AMS + a_koff(ch, jy, jx)].

// Forward: A = W [Out][C·K·K], source x, columns the output pixels.
template <class G>
struct ConvFwdGemm {
  static constexpr int M = G::Out, SC = G::C, NY = G::K, NX = G::K;
  static constexpr int SH = G::H, SW = G::W;                 // source x
  static constexpr int QH = G::OH, QW = G::OW;               // columns per sample
  static constexpr int YS = G::S, Y0 = -G::P, XS = G::S, X0 = -G::P;
  static constexpr int OH = G::OH, OW = G::OW;               // out = y
  static constexpr int OYS = 1, OY0 = 0, OXS = 1, OX0 = 0;   // column (a, b) → out pixel
  static constexpr bool has_bias = true;
  static constexpr bool a_rows_contiguous = true;  // a_koff(k) == k: A's rows are W's rows
  static constexpr int ty(int j) { return j * G::D; }
  static constexpr int tx(int j) { return j * G::D; }
  static constexpr int AMS = G::CKK;
  static constexpr int a_koff(int ch, int jy, int jx) { return (ch * G::K + jy) * G::K + jx; }
};

// The taps ky of a K-tap, dilation-D, stride-S window that reach input rows ≡ Py (mod S): those with
// ky·D ≡ Py + P (mod S). They form the progression first + j·step, j < count, and read dy row
// (iy div S) + off0 − j·doff.
template <int K, int S, int P, int D, int Py>
struct ParityTaps {
  static constexpr int first = [] {
    for (int k = 0; k < K; ++k)
      if (((Py + P - k * D) % S + S) % S == 0) return k;
    return K;
  }();
  static constexpr int step = [] {
    int s = 1;
    while ((s * D) % S != 0) ++s;
    return s;
  }();
  static constexpr int count = first < K ? (K - 1 - first) / step + 1 : 0;
  static constexpr int off0 = first < K ? (Py + P - first * D) / S : 0;  // exact division
  static constexpr int doff = step * D / S;
};

// Backward data, parity class (Py, Px): A(c, k = (o, jy, jx)) = w[o][c][ky(jy)][kx(jx)], source dy,
// columns the input pixels (Py + S·a, Px + S·b).
template <class G, int Py, int Px>
struct ConvDgradGemm {
  using TY = ParityTaps<G::K, G::S, G::P, G::D, Py>;
  using TX = ParityTaps<G::K, G::S, G::P, G::D, Px>;
  static constexpr int M = G::C, SC = G::Out, NY = TY::count, NX = TX::count;
  static constexpr int SH = G::OH, SW = G::OW;  // source dy
  static constexpr int QH = Py < G::H ? (G::H - Py + G::S - 1) / G::S : 0;
  static constexpr int QW = Px < G::W ? (G::W - Px + G::S - 1) / G::S : 0;
  static constexpr int YS = 1, Y0 = 0, XS = 1, X0 = 0;
  static constexpr int OH = G::H, OW = G::W;  // out = dx
  static constexpr int OYS = G::S, OY0 = Py, OXS = G::S, OX0 = Px;
  static constexpr bool has_bias = false;
  static constexpr bool a_rows_contiguous = false;
  static constexpr int ty(int j) { return TY::off0 - j * TY::doff; }
  static constexpr int tx(int j) { return TX::off0 - j * TX::doff; }
  static constexpr int AMS = G::KK;
  static constexpr int a_koff(int o, int jy, int jx) {
    return o * G::C * G::KK + (TY::first + jy * TY::step) * G::K + TX::first + jx * TX::step;
  }
};

// One k of a GEMM of the forward kind, precomputed per block in shared memory: where its tap sits
// relative to a column's window origin in the source, which window tap it is (a bit of the column's
// validity mask; `taps` for k past the end, whose bit is always clear), and its offset in A.
struct alignas(16) ConvTap {
  int src_off, r, a_off, unused;
};

template <class Pb>
struct ConvGemmTaps {
  static constexpr int taps = Pb::NY * Pb::NX, Kd = Pb::SC * taps;
  static_assert(taps < 64, "ctnn: the implicit-GEMM convolution supports windows of up to 63 taps (7x7)");
  using Mask = std::conditional_t<(taps < 32), unsigned, unsigned long long>;
  __device__ static ConvTap at(int k) {
    if (k >= Kd) return {0, taps, 0, 0};
    // (A parity class without taps, as in a 1×1 stride-2 layer's backward data, never gets here.)
    constexpr int divisor_taps = max_of(taps, 1), divisor_nx = max_of(Pb::NX, 1);
    const int ch = k / divisor_taps, r = k - ch * taps, jy = r / divisor_nx, jx = r - jy * Pb::NX;
    return {(ch * Pb::SH + Pb::ty(jy)) * Pb::SW + Pb::tx(jx), r, Pb::a_koff(ch, jy, jx), 0};
  }
  // Bit r set when window tap r of the window at (y_org, x_org) falls inside the source.
  __device__ static Mask valid_taps(int y_org, int x_org) {
    Mask row = 0, m = 0;
#pragma unroll
    for (int jx = 0; jx < Pb::NX; ++jx)
      if (unsigned(x_org + Pb::tx(jx)) < unsigned(Pb::SW)) row |= Mask(1) << jx;
#pragma unroll
    for (int jy = 0; jy < Pb::NY; ++jy)
      if (unsigned(y_org + Pb::ty(jy)) < unsigned(Pb::SH)) m |= row << (jy * Pb::NX);
    return m;
  }
};

// The k table of a problem in shared memory when it fits beside the tiles; computed in place otherwise.
template <class Pb, class T>
constexpr int conv_tap_table_size() {
  constexpr int kpad = ceil_div(ConvGemmTaps<Pb>::Kd, T::BK) * T::BK;
  return T::smem_floats + 4 * kpad <= smem_limit_floats ? kpad : 0;
}

// The k table as the gathers see it: entries in shared memory (filled by the block) when the kernel
// reserved room for all k_total of them, computed in place otherwise.
template <class Pb>
struct ConvTapSource {
  const ConvTap* table;
  bool in_smem;
  __device__ ConvTap operator()(int k) const { return in_smem ? table[k] : ConvGemmTaps<Pb>::at(k); }
};
// Fills the table when it fits; a __syncthreads must come between this and the first lookup.
template <class Pb, int NT>
__device__ __forceinline__ ConvTapSource<Pb> conv_tap_source(ConvTap* tap_s, int tab_size, int k_total) {
  const bool in_smem = tab_size >= k_total;
  if (in_smem)
    for (int k = threadIdx.x; k < k_total; k += NT) tap_s[k] = ConvGemmTaps<Pb>::at(k);
  return {tap_s, in_smem};
}

// One column q of a forward-kind problem's source matrix, decoded once per thread: its sample, its
// window origin in the source, and which window taps fall inside the source (none past the end).
template <class Pb>
struct ConvColumn {
  using Taps = ConvGemmTaps<Pb>;
  const float* src_q;          // the column's sample in the source
  int org;                     // window origin y·SW + x; may be negative: only valid taps are added
  typename Taps::Mask valid;   // bit r: window tap r falls inside the source
  __device__ ConvColumn(const float* src, int q, int columns) {
    constexpr int QHW = Pb::QH * Pb::QW;
    const bool q_ok = q < columns;
    const int qn = q_ok ? q / QHW : 0, qp = q_ok ? q % QHW : 0;
    const int y_org = (qp / Pb::QW) * Pb::YS + Pb::Y0, x_org = (qp % Pb::QW) * Pb::XS + Pb::X0;
    valid = q_ok ? Taps::valid_taps(y_org, x_org) : 0;
    src_q = src + std::size_t(qn) * Pb::SC * (Pb::SH * Pb::SW);
    org = y_org * Pb::SW + x_org;
  }
  // Copies the column's element at tap t into dst, or zero when the tap falls outside the source
  // (then the copy reads nothing at src_q: a 32-bit offset select, no 64-bit pointer select).
  __device__ __forceinline__ void gather(float* dst, const ConvTap& t) const {
    const bool ok = (valid >> t.r) & 1;
    cp_async_f32(dst, src_q + (ok ? org + t.src_off : 0), ok);
  }
};

// Where column q's results go: out[conv_out_offset(q) + m·OH·OW] for row m.
template <class Pb>
__device__ __forceinline__ std::size_t conv_out_offset(int q) {
  constexpr int QHW = Pb::QH * Pb::QW;
  const int n = q / QHW, p = q % QHW;
  const int oy = (p / Pb::QW) * Pb::OYS + Pb::OY0, ox = (p % Pb::QW) * Pb::OXS + Pb::OX0;
  return std::size_t(n) * Pb::M * (Pb::OH * Pb::OW) + oy * Pb::OW + ox;
}

// The BM × BK slice of A at (m0, k0), element (kk, mm) copied to dst(kk, mm), zero past M or the
// problem's k; kk is fastest across threads, so that neighbours read along a row of W.
template <class Pb, int BM, int BK, int NT, class Dst>
__device__ __forceinline__ void gather_a_tile(const float* __restrict__ a_src, int m0, int k0,
                                              const ConvTapSource<Pb>& tap, Dst&& dst) {
  constexpr int per_thread = (BK * BM + NT - 1) / NT;
#pragma unroll
  for (int j = 0; j < per_thread; ++j) {
    const int e = threadIdx.x + j * NT;
    const int kk = e % BK, m = m0 + e / BK;
    const bool inside = (BK * BM) % NT == 0 || e < BK * BM;  // compile-time true when NT divides
    const bool ok = inside && m < Pb::M && k0 + kk < ConvGemmTaps<Pb>::Kd;
    if (inside) cp_async_f32(dst(kk, e / BK), a_src + (ok ? m * Pb::AMS + tap(k0 + kk).a_off : 0), ok);
  }
}

// --- Split-K across a thread-block cluster (sm_90) ----------------------------------------------------
// Block x of a split launch is split x % splits of column tile x / splits; the cluster (splits × 1 × 1
// blocks, rank = split) holds the splits of one tile. This block's k tiles: [first, end) of k_tiles.
struct ConvSplit {
  int splits, split, first, end;
  __device__ ConvSplit(int splits_, int k_tiles) : splits(splits_), split(int(blockIdx.x) % splits_) {
    const int per = ceil_div(k_tiles, splits);
    first = min_of(split * per, k_tiles), end = min_of(first + per, k_tiles);
  }
  __device__ int tile() const { return int(blockIdx.x) / splits; }
};

// Every block of the cluster has its partial BM × BN tile in `part` (its own shared memory, rows of
// BN + 4 floats; split 0's includes the bias). Block `split` adds rows m ≡ split (mod splits) of all the
// partials, in split order, and stores Fn of them at (m0 + m, q0 + column) of the problem's output.
template <class Pb, int BM, int BN, int NT, class Fn = identity_fn>
__device__ __forceinline__ void conv_split_reduce_store(const float* part, const ConvSplit& sp, float* out, int m0,
                                                        int q0, int columns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int RS = BN + 4, groups = BN / 4;
  constexpr std::size_t plane = std::size_t(Pb::OH) * Pb::OW;
  constexpr bool contiguous = Pb::OYS == 1 && Pb::OXS == 1 && Pb::QW == Pb::OW && (Pb::QH * Pb::QW) % 4 == 0;
  const bool vec = contiguous && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  cluster::sync();  // every partial tile is complete
  for (int e = threadIdx.x; e < BM / sp.splits * groups; e += NT) {
    const int mm = e / groups * sp.splits + sp.split, c = 4 * (e % groups), m = m0 + mm, q = q0 + c;
    if (m >= Pb::M || q >= columns) continue;
    float4 s = *reinterpret_cast<const float4*>(cluster::map_shared_rank(part, 0) + mm * RS + c);
    for (int r = 1; r < sp.splits; ++r) {
      const float4 v = *reinterpret_cast<const float4*>(cluster::map_shared_rank(part, r) + mm * RS + c);
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
    s.x = Fn::apply(s.x), s.y = Fn::apply(s.y), s.z = Fn::apply(s.z), s.w = Fn::apply(s.w);
    if (vec && q + 3 < columns) {
      *reinterpret_cast<float4*>(out + conv_out_offset<Pb>(q) + m * plane) = s;
    } else {
      const float v[4] = {s.x, s.y, s.z, s.w};
      for (int j = 0; j < 4 && q + j < columns; ++j) out[conv_out_offset<Pb>(q + j) + m * plane] = v[j];
    }
  }
  cluster::sync();  // no block leaves while another still reads its shared memory
#else
  (void)part, (void)sp, (void)out, (void)m0, (void)q0, (void)columns;
  __trap();  // the host launches splits > 1 only where clusters exist (clusters_supported)
#endif
}

// kernel<<<grid, threads, smem, stream>>>(args...), as clusters of `splits` blocks along x if splits > 1.
template <class... Params, class... Args>
void launch_split_k(void (*kernel)(Params...), dim3 grid, int threads, int smem, cudaStream_t stream, int splits,
                    Args... args) {
  if (splits != 1 && (!clusters_supported() || splits > 8 || splits < 1))
    throw std::invalid_argument("ctnn: Conv: split-K needs thread-block clusters (sm_90) of at most 8 blocks");
  launch_clustered(kernel, grid, threads, smem, stream, splits, args...);
}

// Launch sizes in blocks of a tile of BN columns over `columns` columns and M rows (BM 32 or 64), and
// the thresholds of the tile and split rules: two blocks per SM of a 132-SM H100.
template <int M>
long long conv_blocks(long long columns, int bn) {
  return ceil_div<long long>(columns, bn) * ceil_div(M, M <= 32 ? 32 : 64);
}
inline constexpr long long conv_two_waves = 264;
// The split-K factor when a rule asks for one: 2 (more lost to the partial tiles than won in blocks at
// 4 and 8 on every CIFAR layer measured), or 1 on a device without clusters.
inline int conv_split_k(bool split) { return split && clusters_supported() ? 2 : 1; }

// One block of a GEMM of the forward kind: the BM × BN tile at (blockIdx.y, column tile), or with
// splits > 1 its share of the k tiles (ConvSplit). Fn: the element-wise activation that follows the
// layer, applied before the store (identity_fn: none).
template <class Pb, class T, class Fn = identity_fn>
__device__ __forceinline__ void conv_gemm_block(float* smem,  // (stages, BK, BM) A tiles, then B tiles
                                                ConvTap* tap_s, int tab_size,  // (k), or none
                                                const float* __restrict__ a_src, const float* __restrict__ bias,
                                                const float* __restrict__ src, float* __restrict__ out,
                                                int batch, int splits) {
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, TM = T::TM, TN = T::TN, NT = T::threads;
  constexpr int QHW = Pb::QH * Pb::QW, Kd = ConvGemmTaps<Pb>::Kd;
  constexpr int k_tiles = (Kd + BK - 1) / BK;
  constexpr int b_rows = NT / BN;
  // Preconditions
  static_assert(NT % BN == 0 && BK % b_rows == 0, "each thread gathers one column of the source tile");
  static_assert(QHW > 0 && Pb::M > 0, "a non-empty problem");
  static_assert(T::smem_floats <= smem_limit_floats, "the tiles fit in 48 KB of shared memory");
  static_assert(BM * (BN + 4) <= T::smem_floats, "a split's partial tile fits in the tiles' memory");

  auto As = reinterpret_cast<float (*)[T::a_floats]>(smem);
  auto Bs = reinterpret_cast<float (*)[T::b_floats]>(smem + T::stages * T::a_floats);
  const int columns = batch * QHW;
  const int tr = T::thread_row(threadIdx.x), tc = T::thread_col(threadIdx.x);
  const ConvSplit sp(splits, k_tiles);
  const int q0 = sp.tile() * BN, m0 = blockIdx.y * BM;
  if (q0 >= columns) return;  // a smaller parity class than the grid's largest: the whole block
  const ConvTapSource<Pb> tap = conv_tap_source<Pb, NT>(tap_s, tab_size, k_tiles * BK);
  const int lq = threadIdx.x % BN, lk = threadIdx.x / BN;  // the source column this thread gathers
  const ConvColumn<Pb> column(src, q0 + lq, columns);
  __syncthreads();  // tap_s is ready

  auto load_tile = [&](int stage, int kt) {
    const int k0 = kt * BK;
    gather_a_tile<Pb, BM, BK, NT>(a_src, m0, k0, tap, [&](int kk, int mm) { return &As[stage][tile_at<T, T::AS>(kk, mm)]; });
#pragma unroll
    for (int j = 0; j < BK / b_rows; ++j) {
      const int kk = lk + j * b_rows;
      column.gather(&Bs[stage][tile_at<T, T::BS>(kk, lq)], tap(k0 + kk));  // the same k across the warp
    }
  };
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + tile_row<T>(i, tr);
    const float b0 = Pb::has_bias && m < Pb::M && sp.split == 0 ? bias[m] : 0.f;
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = b0;
  }
  cp_async_pipeline<T::stages>(
      sp.end - sp.first, [&](int stage, int t) { load_tile(stage, sp.first + t); },
      [&](int stage) { tile_multiply<T>(As[stage], Bs[stage], tr, tc, acc); });

  if (splits > 1) {
    __syncthreads();  // every warp is done with the tiles: they hold the partial tile now
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int h = 0; h < TN / 4; ++h)
        *reinterpret_cast<float4*>(smem + tile_row<T>(i, tr) * (BN + 4) + tile_col<T>(4 * h, tc)) =
            make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]);
    conv_split_reduce_store<Pb, BM, BN, NT, Fn>(smem, sp, out, m0, q0, columns);
    return;
  }

  // Columns j of a thread come in runs of 4 consecutive q; for the forward (contiguous output rows,
  // QH·QW a multiple of 4) a run is 4 consecutive floats of one sample's plane: one float4 store.
  constexpr bool contiguous = Pb::OYS == 1 && Pb::OXS == 1 && Pb::QW == Pb::OW && QHW % 4 == 0;
  const bool vec = contiguous && (reinterpret_cast<std::uintptr_t>(out) % 16 == 0);
#pragma unroll
  for (int h = 0; h < TN / 4; ++h) {
    const int qc = q0 + tile_col<T>(4 * h, tc);
    if (qc >= columns) continue;
    if (vec && qc + 3 < columns) {
      float* o = out + conv_out_offset<Pb>(qc);
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const int m = m0 + tile_row<T>(i, tr);
        if (m < Pb::M)
          *reinterpret_cast<float4*>(o + std::size_t(m) * QHW) =
              make_float4(Fn::apply(acc[i][4 * h]), Fn::apply(acc[i][4 * h + 1]), Fn::apply(acc[i][4 * h + 2]),
                          Fn::apply(acc[i][4 * h + 3]));
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int qj = qc + j;
        if (qj >= columns) break;
        float* o = out + conv_out_offset<Pb>(qj);
#pragma unroll
        for (int i = 0; i < TM; ++i) {
          const int m = m0 + tile_row<T>(i, tr);
          if (m < Pb::M) o[std::size_t(m) * (Pb::OH * Pb::OW)] = Fn::apply(acc[i][4 * h + j]);
        }
      }
    }
  }
}

template <class Pb, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_gemm(const float* __restrict__ a_src,  // weights: A(m, k) = a_src[m·AMS + a_off(k)]
                 const float* __restrict__ bias,   // [M] (unused without Pb::has_bias)
                 const float* __restrict__ src,    // [batch][SC][SH][SW]
                 float* __restrict__ out,          // [batch][M][OH][OW]
                 int batch, int splits)
{
  constexpr int tab = conv_tap_table_size<Pb, T>();
  __shared__ __align__(16) float tiles[T::smem_floats];  // (stages, BK, BM) weights, (stages, BK, BN) source
  __shared__ ConvTap tap_s[max_of(tab, 1)];               // (k)
  conv_gemm_block<Pb, T, Fn>(tiles, tap_s, tab, a_src, bias, src, out, batch, splits);
}

// Backward data, all S·S parity classes in one launch: class blockIdx.z. for_parity_class calls
// f(std::type_identity<Pb>{}) with parity class `cls`'s problem Pb (nothing for a class without
// columns); max_over_parity_classes is the largest f(std::type_identity<Pb>{}) over the classes (the
// k table a kernel reserves).
template <class G, int I = 0, class F>
__device__ __forceinline__ void for_parity_class(int cls, F&& f) {
  using Pb = ConvDgradGemm<G, I / G::S, I % G::S>;
  if (cls == I) {
    if constexpr (Pb::QH * Pb::QW > 0) f(std::type_identity<Pb>{});
  } else if constexpr (I + 1 < G::S * G::S) {
    for_parity_class<G, I + 1>(cls, f);
  }
}
template <class G, int I = 0, class F>
constexpr int max_over_parity_classes(F f) {
  const int v = f(std::type_identity<ConvDgradGemm<G, I / G::S, I % G::S>>{});
  if constexpr (I + 1 < G::S * G::S) return max_of(v, max_over_parity_classes<G, I + 1>(f));
  else return v;
}

template <class G, class T>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_dgrad_gemm(const float* __restrict__ w,   // [Out][C][K][K]
                       const float* __restrict__ dy,  // [batch][Out][OH][OW]
                       float* __restrict__ dx,        // [batch][C][H][W]
                       int batch, int splits)
{
  constexpr int tab = max_over_parity_classes<G>([](auto pb) { return conv_tap_table_size<typename decltype(pb)::type, T>(); });
  __shared__ __align__(16) float tiles[T::smem_floats];
  __shared__ ConvTap tap_s[max_of(tab, 1)];
  for_parity_class<G>(int(blockIdx.z), [&](auto pb) {
    conv_gemm_block<typename decltype(pb)::type, T>(tiles, tap_s, tab, w, nullptr, dy, dx, batch, splits);
  });
}

// Tiles for the forward kind: BM covers the output channels (32 or 64 rows, 8 thread rows), BN the
// columns. The wide tile (BN 128, 8 × 8 per thread) reuses each operand the most; the narrow one
// (BN 64, 8 × 4 or 4 × 4) doubles the block count when the columns are few (small images, small
// batch), where the wide tile would leave SMs idle. Both sum in the same order: same bits.
template <int M>
using ConvGemmWide = GemmTile<(M <= 32 ? 32 : 64), 128, (M <= 32 ? 4 : 8), 8>;
template <int M>
using ConvGemmNarrow = GemmTile<(M <= 32 ? 32 : 64), 64, (M <= 32 ? 4 : 8), 4>;

inline void check_conv_columns(long long columns, int batch) {
  if (columns > (1LL << 30))
    throw std::invalid_argument("ctnn: Conv: batch " + std::to_string(batch) +
                                " is too large for the implicit-GEMM kernels");
}

template <class Pb, class T, class Fn = identity_fn>
void launch_conv_gemm(cudaStream_t stream, const float* a_src, const float* bias, const float* src,
                      float* out, int batch, int splits = 1) {
  const long long columns = (long long)batch * Pb::QH * Pb::QW;
  check_conv_columns(columns, batch);
  const dim3 grid(grid_for(std::size_t(columns), T::BN) * unsigned(splits), unsigned(ceil_div(Pb::M, T::BM)));
  launch_split_k(kernel_conv_gemm<Pb, T, Fn>, grid, T::threads, 0, stream, splits, a_src, bias, src, out, batch, splits);
}

// The rule's tile and split-K factor, from conv_bench on an H100 (docs/conv_kernels.md):
// * forward: the wide tile when it gives about two blocks per SM (from 15/16 of that: 64->128 s2 @16 at
//   B = 256 has 256 wide blocks, and they took 89.0 µs against the narrow tile's 96.6 on an H200), else
//   the narrow one, with split-K 2 when it has under two blocks per SM and at least 32 k tiles (K = 576:
//   4-40% faster; with 18 k tiles it was 2% slower);
// * backward data: the wide tile only for 32-row problems (for 64 rows the narrow one was measured
//   faster before), with the same two-blocks rule; split-K 2 as for the forward, and also for every
//   strided layer with at least 16 k tiles in its largest class: its parity classes have 1, 2 or 4 of
//   the 9 taps, and the split evens their blocks' work (1.2x at 2,048 blocks).
struct ConvGemmPlan {
  bool wide;
  int splits;
};
template <class Pb>
ConvGemmPlan conv_gemm_fwd_plan(int batch) {
  const long long columns = (long long)batch * Pb::QH * Pb::QW;
  const bool wide = conv_blocks<Pb::M>(columns, 128) * 16 >= conv_two_waves * 15;
  const bool few = !wide && conv_blocks<Pb::M>(columns, 64) < conv_two_waves;
  return {wide, conv_split_k(few && ceil_div(ConvGemmTaps<Pb>::Kd, 16) >= 32)};
}
template <class G>
constexpr int conv_dgrad_k_tiles() {  // class (0, 0) has the most taps: ceil(K / S) per axis
  return ceil_div(G::Out * ceil_div(G::K, G::S) * ceil_div(G::K, G::S), 16);
}
template <class G>
ConvGemmPlan conv_gemm_dgrad_plan(int batch) {
  const long long x_columns = (long long)batch * ceil_div(G::H, G::S) * ceil_div(G::W, G::S);  // per class
  const bool wide = G::C <= 32 && conv_blocks<G::C>((long long)batch * G::H * G::W, 128) >= conv_two_waves;
  const bool few = conv_blocks<G::C>(x_columns, wide ? 128 : 64) * (G::S * G::S) < conv_two_waves;
  constexpr int k_tiles = conv_dgrad_k_tiles<G>();
  return {wide, conv_split_k((few && k_tiles >= 32) || (G::S > 1 && k_tiles >= 16))};
}

template <class Pb, class Fn = identity_fn>
void launch_conv_gemm_auto(cudaStream_t stream, const float* a_src, const float* bias, const float* src,
                           float* out, int batch) {
  const ConvGemmPlan p = conv_gemm_fwd_plan<Pb>(batch);
  if (p.wide)
    launch_conv_gemm<Pb, ConvGemmWide<Pb::M>, Fn>(stream, a_src, bias, src, out, batch, p.splits);
  else
    launch_conv_gemm<Pb, ConvGemmNarrow<Pb::M>, Fn>(stream, a_src, bias, src, out, batch, p.splits);
}

// Backward data: one launch, grid (columns of the largest class, C tiles, S·S classes).
template <class G, class T>
void launch_conv_dgrad_gemm(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch,
                            int splits = 1) {
  constexpr int qmax = ceil_div(G::H, G::S) * ceil_div(G::W, G::S);  // class (0, 0) is the largest
  check_conv_columns((long long)batch * G::H * G::W, batch);
  const dim3 grid(grid_for(std::size_t(batch) * qmax, T::BN) * unsigned(splits), unsigned(ceil_div(G::C, T::BM)),
                  G::S * G::S);
  launch_split_k(kernel_conv_dgrad_gemm<G, T>, grid, T::threads, 0, stream, splits, w, dy, dx, batch, splits);
}
template <class G>
void launch_conv_dgrad_gemm_auto(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch) {
  const ConvGemmPlan p = conv_gemm_dgrad_plan<G>(batch);
  if (p.wide)
    launch_conv_dgrad_gemm<G, ConvGemmWide<G::C>>(stream, w, dy, dx, batch, p.splits);
  else
    launch_conv_dgrad_gemm<G, ConvGemmNarrow<G::C>>(stream, w, dy, dx, batch, p.splits);
}

// --- Backward weights -------------------------------------------------------------------------------
// Rows o (BM of Out), columns k (BN of C·K·K), reduction over q = (n, oy, ox) in BK steps. BN is the
// candidate (64, 96, 128) that pads C·K·K least, the larger on a tie: 3×3 kernels on 32 or 64
// channels (288, 576 taps) get 96, with no padding.
template <int CKK>
constexpr int wgrad_bn() {
  int best = 64;
  for (int bn : {64, 96, 128}) {
    const int waste = ceil_div(CKK, bn) * bn - CKK, best_waste = ceil_div(CKK, best) * best - CKK;
    if (waste <= best_waste) best = bn;
  }
  return best;
}

// The split of the weight gradient's reduction, for tiles of BM rows (of Out) and BN columns (of
// C·K·K) reducing BK positions per step: the same rule for the FP32 and the TF32 kernels.
template <class G, int BM, int BN, int BK, int TargetBlocks = 512>
struct ConvWgradSplits {
  static constexpr int m_tiles = ceil_div(G::Out, BM), n_tiles = ceil_div(G::CKK, BN);
  static constexpr int E = G::Out * G::CKK + G::Out;  // floats per partial: dW, then db
  // About this many blocks in all (512: ≈ 4 per SM of an H100), so that the gather latency hides.
  static constexpr int target_blocks = TargetBlocks;
  static constexpr int max_splits = ceil_div(target_blocks, m_tiles * n_tiles);
  // The reduction over batch·OH·OW in BK steps, cut into splits of `per_split` steps each.
  static constexpr long long steps(int batch) { return ceil_div<long long>((long long)batch * G::OHW, BK); }
  static constexpr long long per_split(int batch) {
    return ceil_div<long long>(steps(batch), min_of<long long>(max_splits, max_of<long long>(steps(batch), 1)));
  }
  static constexpr int splits(int batch) {
    return steps(batch) == 0 ? 0 : int(ceil_div<long long>(steps(batch), per_split(batch)));
  }
  // An upper bound of splits(batch) for every batch <= max_batch (splits itself is not monotonic).
  static constexpr std::size_t workspace_floats(int max_batch) {
    return std::size_t(min_of<long long>(max_splits, steps(max_batch > 0 ? max_batch : 0))) * E;
  }
};

template <class G>
struct ConvWgradGemm : ConvWgradSplits<G, (G::Out <= 32 ? 32 : 64), wgrad_bn<G::CKK>(), 16> {
  static constexpr int BN_ = wgrad_bn<G::CKK>();
  using Tile = GemmTile<(G::Out <= 32 ? 32 : 64), BN_, (G::Out <= 32 ? 4 : 8), (BN_ == 64 ? 4 : 8), 16, 3, true>;
};

// The gathers of one reduction step of the weight gradient: BK positions q = (n, oy, ox), and for each
// the values of BM output channels of dy and of BN window taps (k columns n0 ..) of x. Thread
// kk = tid % BK owns position step·BK + kk (neighbouring threads read neighbouring pixels) and the
// rows lr, lr + NT/BK, ... of both tiles; element (kk, row) goes to dst_a(kk, row) / dst_b(kk, row).
template <class G, int BM, int BN, int BK, int NT>
struct ConvWgradGather {
  using Taps = ConvGemmTaps<ConvFwdGemm<G>>;
  static constexpr int a_per_thread = ceil_div(BK * BM, NT), b_per_thread = ceil_div(BK * BN, NT);
  static_assert(NT % BK == 0, "each thread gathers one reduction row of every tile");
  const float* x;       // [batch][C][H][W]
  const float* dy;      // [batch][Out][OH][OW]
  const ConvTap* taps;  // (BN): the block's k columns
  int rows, m0, kk, lr;
  __device__ ConvWgradGather(const float* x_, const float* dy_, const ConvTap* taps_, int rows_, int m0_)
      : x(x_), dy(dy_), taps(taps_), rows(rows_), m0(m0_), kk(threadIdx.x % BK), lr(threadIdx.x / BK) {}

  template <class DstA, class DstB>
  __device__ __forceinline__ void load(int step, DstA&& dst_a, DstB&& dst_b) const {
    load_dy(step, dst_a);
    load_x(step, dst_b);
  }
  template <class DstA>
  __device__ __forceinline__ void load_dy(int step, DstA&& dst_a) const {
    const int q = step * BK + kk;
    const bool q_ok = q < rows;
    const int n = q_ok ? q / G::OHW : 0, p = q_ok ? q % G::OHW : 0;
    const float* dyq = dy + std::size_t(n) * G::Out * G::OHW + p;
#pragma unroll
    for (int j = 0; j < a_per_thread; ++j) {
      const int mm = lr + j * (NT / BK), o = m0 + mm;
      const bool ok = q_ok && o < G::Out;
      if (mm < BM) cp_async_f32(dst_a(kk, mm), dyq + (ok ? o * G::OHW : 0), ok);
    }
  }
  template <class DstB>
  __device__ __forceinline__ void load_x(int step, DstB&& dst_b) const {
    const int q = step * BK + kk;
    const bool q_ok = q < rows;
    const int n = q_ok ? q / G::OHW : 0, p = q_ok ? q % G::OHW : 0;
    // Position q's window: its origin and which of its taps fall inside x.
    const int iy0 = (p / G::OW) * G::S - G::P, ix0 = (p % G::OW) * G::S - G::P;
    const typename Taps::Mask valid = q_ok ? Taps::valid_taps(iy0, ix0) : 0;
    const float* xq = x + std::size_t(n) * G::in_size;
    const int org = iy0 * G::W + ix0;  // may be negative: only valid taps are added to it
#pragma unroll
    for (int j = 0; j < b_per_thread; ++j) {
      const int nn = lr + j * (NT / BK);
      if (nn < BN) {
        const ConvTap t = taps[nn];
        const bool ok = (valid >> t.r) & 1;
        cp_async_f32(dst_b(kk, nn), xq + (ok ? org + t.src_off : 0), ok);
      }
    }
  }
};

template <class G>
__global__ void __launch_bounds__(ConvWgradGemm<G>::Tile::threads, ConvWgradGemm<G>::Tile::min_blocks)
kernel_conv_wgrad_gemm(const float* __restrict__ x,   // [batch][C][H][W]
                       const float* __restrict__ dy,  // [batch][Out][OH][OW]
                       float* __restrict__ partials,  // [gridDim.x][E]: dW [Out][C·K·K], db [Out]
                       int rows,                      // batch·OH·OW
                       int per_split)                 // BK steps per split
{
  using Cfg = ConvWgradGemm<G>;
  using T = typename Cfg::Tile;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, TM = T::TM, TN = T::TN, NT = T::threads;
  // Preconditions
  static_assert(G::valid, "ctnn: invalid convolution geometry");

  __shared__ __align__(16) float As[T::stages][T::a_floats];  // (BK, BM): dy, q-major
  __shared__ __align__(16) float Bs[T::stages][T::b_floats];  // (BK, BN): x window taps
  __shared__ ConvTap tap_s[BN];  // (BN): the block's k columns (r = K·K past C·K·K: never valid)

  const int tr = T::thread_row(threadIdx.x), tc = T::thread_col(threadIdx.x);
  const int split = blockIdx.x, n0 = blockIdx.y * BN, m0 = blockIdx.z * BM;
  const int step0 = split * per_split;
  const int step_end = min_of(step0 + per_split, ceil_div(rows, BK));
  using Gather = ConvWgradGather<G, BM, BN, BK, NT>;
  for (int nn = threadIdx.x; nn < BN; nn += NT) tap_s[nn] = Gather::Taps::at(n0 + nn);
  __syncthreads();
  const Gather gather(x, dy, tap_s, rows, m0);

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  float bacc[TM];  // db, in the blocks of the first k tile, by their threads of column 0
#pragma unroll
  for (int i = 0; i < TM; ++i) bacc[i] = 0.f;
  const bool sums_bias = blockIdx.y == 0 && tc == 0;

  cp_async_pipeline<T::stages>(
      max_of(step_end - step0, 0),
      [&](int stage, int t) {
        gather.load(step0 + t, [&](int kk, int mm) { return &As[stage][tile_at<T, T::AS>(kk, mm)]; },
                    [&](int kk, int nn) { return &Bs[stage][tile_at<T, T::BS>(kk, nn)]; });
      },
      [&](int stage) {
        const float* A = As[stage];
        tile_multiply<T>(A, Bs[stage], tr, tc, acc);
        if (sums_bias) {
#pragma unroll
          for (int r = 0; r < BK; ++r)
#pragma unroll
            for (int i = 0; i < TM; ++i) bacc[i] += A[tile_at<T, T::AS>(r, tile_row<T>(i, tr))];
        }
      });

  float* part = partials + std::size_t(split) * Cfg::E;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int o = m0 + tile_row<T>(i, tr);
    if (o >= G::Out) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int k = n0 + tile_col<T>(j, tc);
      if (k < G::CKK) part[o * G::CKK + k] = acc[i][j];
    }
    if (sums_bias) part[G::Out * G::CKK + o] = bacc[i];
  }
}

// Stage 1 into `partials` (at least ConvWgradGemm<G>::workspace_floats(batch) floats), then stage 2.
template <class G>
void launch_conv_wgrad_gemm(cudaStream_t stream, const float* x, const float* dy, float* partials,
                            float* dw, float* db, int batch) {
  using Cfg = ConvWgradGemm<G>;
  const long long rows = (long long)batch * G::OHW;
  if (rows + Cfg::Tile::BK > 0x7fffffffLL)
    throw std::invalid_argument("ctnn: Conv backward: batch " + std::to_string(batch) + " is too large");
  const int splits = Cfg::splits(batch);
  const dim3 grid(unsigned(splits), Cfg::n_tiles, Cfg::m_tiles);
  kernel_conv_wgrad_gemm<G><<<grid, Cfg::Tile::threads, 0, stream>>>(x, dy, partials, int(rows),
                                                                      int(Cfg::per_split(batch)));
  CTNN_CHECK_LAUNCH();
  sum_partials(stream, partials, splits, Cfg::E, G::Out * G::CKK, dw, db);
}

}  // namespace ctnn::kernels
