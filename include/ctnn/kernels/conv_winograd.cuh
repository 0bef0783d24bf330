#pragma once
// FP32 forward and backward data (the forward of the layer turned around: launch_conv_winograd_dgrad)
// of 3×3, stride-1, padding-1 convolutions by Winograd's minimal filtering F(m×m, 3×3), m = 2 or 4:
// each m×m block of outputs ("tile") of an output channel k is
// A^T [Σ_c (G g_kc G^T) ⊙ (B^T d_c B)] A, where d_c is the (m+2)×(m+2) input patch under the tile in
// channel c and g_kc the 3×3 kernel. The (m+2)² products ⊙ are independent GEMMs (one per position ξ of
// the transformed tile) that reduce over the channels: per output and input channel 16/4 = 4
// multiplications with m = 2, 36/16 = 2.25 with m = 4, instead of the direct 9 (2.25× and 4× fewer).
// F(2×2)'s transforms are additions (and halvings of the weights); F(4×4)'s (the points 0, ±1, ±2, ∞;
// Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016) multiply by up to 8 and
// by fractions, so its results carry about ten times F(2×2)'s rounding error (1e-5 of the largest
// output in the tests, where F(2×2) has 1e-6).
//
// One fused kernel (no transformed tensor in global memory): a block owns KB output channels × TB tiles
// (whole tile rows of one sample) and all ξ. Per step of CB = 8 input channels it stages, with
// 16-byte cp.async two steps deep, the input rows its tiles read and the weights of those channels;
// transforms both into shared memory (V[ξ][c][t] = B^T d B, U[ξ][c][k] = G g G^T); then each lane
// multiplies 8 channels × TN tiles of each of its XW ξ, reading per (ξ, c) two float4 of U and TN / 4 of
// V: with F(2×2) a warp takes two ξ (8 × 8 a lane), with F(4×4) three (8 × 4 a lane, 12 warps for the
// 36 ξ). At the end the accumulators go through shared memory, half the channels at a time, so that
// each thread gathers the ξ of its (channel, tile) pairs, applies A^T · A, adds the bias and the
// activation Fn and stores m × m outputs.
//
// Rounding: the sums run in a different order, with the transforms' arithmetic, from the direct and
// GEMM kernels' (k = (c, ky, kx) increasing); results agree with them to rounding, not to the bit.
// Deterministic: a fixed order, no atomics.
//
// Measured and not kept (H100, docs/conv_kernels.md): V and U in two buffers, so that a step needs one
// barrier and the next step's transform overlaps this one's products: 255 registers, spills, 64->64 @16
// at B = 256 86.8 -> 97.9 µs. F(4×4) with 4 ξ a lane (9 warps) or 2 (18 warps): spills at the register
// limits those leave, 64->64 @16 at B = 256 88.8 and 87.2 µs against 61.4 with 3.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "../layers/activation.hpp"
#include "conv_direct.cuh"
#include "conv_gemm.cuh"
#include "conv_mma.cuh"
#include "conv_patch.cuh"
#include "launch.cuh"

namespace ctnn::kernels {

// The block's shape for a layer G and tiles of OT × OT outputs: KB output channels (64 where Out allows,
// else 32) × TB tiles. F(2×2): KB·TB = 2048, 8 warps of two ξ, a lane 8 × 8 (channel, tile) pairs of
// each (with 16 warps of one ξ, 128 registers a thread, it was 2-6% slower). F(4×4): KB·TB = 1024,
// 12 warps of three ξ, a lane 8 × 4 pairs of each (96 accumulators; 12 warps leave 168 registers).
template <class G, int OT_ = 2>
struct ConvWinograd {
  static constexpr int OT = OT_;  // outputs a tile side
  static_assert(OT == 2 || OT == 4, "F(2x2, 3x3) or F(4x4, 3x3)");
  static constexpr int XI = OT + 2, NXI = XI * XI;     // transformed points a dimension; ξ
  static constexpr int XW = OT == 2 ? 2 : 3;           // ξ a lane
  static constexpr int TN = OT == 2 ? 8 : 4;           // a lane: 8 channels × TN tiles of each of its ξ
  static constexpr int KB = G::Out % 64 == 0 ? 64 : 32, TB = (OT == 2 ? 2048 : 1024) / KB, CB = 8;
  static constexpr int threads = NXI / XW * 32;        // a warp per XW ξ
  static_assert(NXI % XW == 0 && KB * TB == 32 * 8 * TN, "a warp's lanes cover the block's pairs of its ξ");
  static constexpr int KG = KB / 8, TG = TB / TN;      // a warp's lanes: KG channel groups × TG tile groups
  static constexpr int W = G::W, H = G::H, TW = W / OT, TR = TB / max_of(TW, 1);  // tiles a row; tile rows a block
  static constexpr int PR = OT * TR + 2, RS = W + 8;   // staged input rows, and their stride (data at 4..)
  static constexpr int XS = PR * RS, WS = CB * 9;      // floats a staged channel; weights of one k
  static constexpr int raw_floats = CB * XS + KB * WS; // one stage: input rows, then weights
  static constexpr int VS = TB + 4, US = KB + 4;       // row strides of V[ξ][c] and U[ξ][c] (padded)
  static constexpr int v_floats = NXI * CB * VS, u_floats = NXI * CB * US;
  static constexpr int OS = TB + 4, o_floats = NXI * (KB / 2) * OS;  // the exchange, half of KB at a time
  static constexpr int smem_floats = max_of(2 * raw_floats + v_floats + u_floats, o_floats);
  static constexpr int smem_bytes = smem_floats * 4;
  static constexpr int steps = (G::C + CB - 1) / CB;  // channels past C are staged as zeros
  static constexpr bool whole_steps = G::C % CB == 0;  // then a k's 72 weights are 16-byte copies
  static constexpr int row_blocks = (H / OT) / max_of(TR, 1);  // blocks a sample, per KB channels
  static constexpr bool fits = G::K == 3 && G::S == 1 && G::P == 1 && G::D == 1 && G::Out % 32 == 0 &&
                               W % 8 == 0 && H % OT == 0 && TW > 0 && TB % max_of(TW, 1) == 0 &&
                               (H / OT) % max_of(TR, 1) == 0 && smem_bytes <= 200 * 1024;
};

// Stages step `step` (input channels c0 = 8·step ..) into `raw`: the block's input rows (row r of the
// stage is input row y_first + r; zeros outside the image; columns 0-3 and W+4.. are the zero border,
// never written here) and the weights of the step: forward, the KB × 72 weights w[k0 + k][c0 .. c0 + 7]
// (contiguous per k); backward data (Dgrad: G is the layer turned around, from its Out channels to its
// C, and w the layer's [G::C][G::Out][3][3]), the 8 × KB kernels w[c0 + c][k0 .. k0 + KB] (contiguous per c).
template <class G, class T, bool Dgrad>
__device__ __forceinline__ void winograd_stage(float* raw, const float* __restrict__ x, const float* __restrict__ w,
                                               int n, int y_first, int k0, int step) {
  constexpr int quads_row = T::W / 4, x_quads = T::CB * T::PR * quads_row, w_quads = T::KB * T::WS / 4;
  const int c0 = step * T::CB;
  for (int e = threadIdx.x; e < x_quads; e += T::threads) {
    const int q = e % quads_row, r = e / quads_row % T::PR, c = e / (quads_row * T::PR), y = y_first + r;
    const bool ok = y >= 0 && y < T::H && (T::whole_steps || c0 + c < G::C);
    cp_async_f32x4(raw + c * T::XS + r * T::RS + 4 + 4 * q,
                   x + (ok ? ((std::size_t(n) * G::C + c0 + c) * T::H + y) * T::W + 4 * q : 0), ok);
  }
  float* ws = raw + T::CB * T::XS;
  if constexpr (Dgrad) {  // 16-byte aligned: G::Out and k0 are multiples of 32
    constexpr int per_c = T::KB * 9 / 4;
    for (int e = threadIdx.x; e < w_quads; e += T::threads) {
      const int c = e / per_c, q = e % per_c;
      const bool ok = T::whole_steps || c0 + c < G::C;
      cp_async_f32x4(ws + c * T::KB * 9 + 4 * q, w + (ok ? (std::size_t(c0 + c) * G::Out + k0) * 9 + 4 * q : 0), ok);
    }
  } else if constexpr (T::whole_steps) {
    for (int e = threadIdx.x; e < w_quads; e += T::threads) {
      const int k = e / (T::WS / 4), q = e % (T::WS / 4);
      cp_async_f32x4(ws + k * T::WS + 4 * q, w + (std::size_t(k0 + k) * G::C + c0) * 9 + 4 * q, true);
    }
  } else {  // a k's weights of the step are not 16-byte aligned: one float at a time, zeros past C
    for (int e = threadIdx.x; e < T::KB * T::WS; e += T::threads) {
      const int k = e / T::WS, r = e % T::WS;
      const bool ok = c0 + r / 9 < G::C;
      cp_async_f32(ws + e, w + (ok ? (std::size_t(k0 + k) * G::C + c0) * 9 + r : 0), ok);
    }
  }
}

// Weight transform e of a step: output channel k and input channel c (c fastest for the forward's
// [k][c][9] stage, whose 9-float rows then fall on distinct banks across a warp; k fastest for backward
// data's [c][k][9]), and the 3×3 kernel g (backward data: turned by 180°).
template <class T, bool Dgrad>
__device__ __forceinline__ void winograd_kernel_of(const float* ws, int e, int& k, int& c, float (&g)[9]) {
  c = Dgrad ? e / T::KB : e % T::CB, k = Dgrad ? e % T::KB : e / T::CB;
  const float* p = Dgrad ? ws + (c * T::KB + k) * 9 : ws + k * T::WS + c * 9;
#pragma unroll
  for (int i = 0; i < 9; ++i) g[i] = p[Dgrad ? 8 - i : i];
}

// The 1-D transforms of F(m, 3), m = OT: B^T on a column of m + 2 inputs, G on a kernel's 3 taps, A^T
// on m + 2 products. F(4, 3)'s are Lavin and Gray's (the points 0, ±1, ±2, ∞).
template <int OT>
struct WinogradTransforms;
template <>
struct WinogradTransforms<2> {
  __device__ static void bt(const float* d, float* r) {
    r[0] = d[0] - d[2], r[1] = d[1] + d[2], r[2] = d[2] - d[1], r[3] = d[1] - d[3];
  }
  __device__ static void g(const float* g, float* r) {
    r[0] = g[0], r[1] = 0.5f * (g[0] + g[1] + g[2]), r[2] = 0.5f * (g[0] - g[1] + g[2]), r[3] = g[2];
  }
  __device__ static void at(const float* q, float* r) { r[0] = q[0] + q[1] + q[2], r[1] = q[1] - q[2] - q[3]; }
};
template <>
struct WinogradTransforms<4> {
  __device__ static void bt(const float* d, float* r) {
    r[0] = fmaf(4.f, d[0], fmaf(-5.f, d[2], d[4]));
    r[1] = fmaf(-4.f, d[1] + d[2], d[3] + d[4]);
    r[2] = fmaf(4.f, d[1] - d[2], d[4] - d[3]);
    r[3] = fmaf(2.f, d[3] - d[1], d[4] - d[2]);
    r[4] = fmaf(2.f, d[1] - d[3], d[4] - d[2]);
    r[5] = fmaf(4.f, d[1], fmaf(-5.f, d[3], d[5]));
  }
  __device__ static void g(const float* g, float* r) {
    r[0] = 0.25f * g[0];
    r[1] = (g[0] + g[1] + g[2]) * (-1.f / 6);
    r[2] = (g[0] - g[1] + g[2]) * (-1.f / 6);
    r[3] = fmaf(1.f / 24, g[0], fmaf(1.f / 12, g[1], g[2] * (1.f / 6)));
    r[4] = fmaf(1.f / 24, g[0], fmaf(-1.f / 12, g[1], g[2] * (1.f / 6)));
    r[5] = g[2];
  }
  __device__ static void at(const float* q, float* r) {
    const float s12 = q[1] + q[2], d12 = q[1] - q[2], s34 = q[3] + q[4], d34 = q[3] - q[4];
    r[0] = q[0] + s12 + s34, r[1] = fmaf(2.f, d34, d12), r[2] = fmaf(4.f, s34, s12), r[3] = fmaf(8.f, d34, d12) + q[5];
  }
};

// A 2-D transform R = M X M^T of an n × n block X by the 1-D transform f (n → m points): f on each
// column, then on each row of the result. X is read through x(i, j); the m × m result goes to out(i, j).
template <int n, int m, class F, class In, class Out>
__device__ __forceinline__ void winograd_2d(F f, In x, Out out) {
  float r[m][n];
#pragma unroll
  for (int j = 0; j < n; ++j) {
    float col[n], res[m];
#pragma unroll
    for (int i = 0; i < n; ++i) col[i] = x(i, j);
    f(col, res);
#pragma unroll
    for (int i = 0; i < m; ++i) r[i][j] = res[i];
  }
#pragma unroll
  for (int i = 0; i < m; ++i) {
    float res[m];
    f(r[i], res);
#pragma unroll
    for (int j = 0; j < m; ++j) out(i, j, res[j]);
  }
}

// raw → V (B^T d B per (tile, channel): d the (OT + 2)² patch under the tile) and U (G g G^T per
// (output channel k, input channel)).
template <class T, bool Dgrad>
__device__ __forceinline__ void winograd_transform(const float* raw, float* V, float* U) {
  using F = WinogradTransforms<T::OT>;
  constexpr int XI = T::XI;
  for (int e = threadIdx.x; e < T::TB * T::CB; e += T::threads) {
    const int t = e % T::TB, c = e / T::TB, tr = t / T::TW, tx = t % T::TW;
    const float* p = raw + c * T::XS + T::OT * tr * T::RS + 4 + T::OT * tx - 1;
    float* v = V + c * T::VS + t;
    winograd_2d<XI, XI>([](const float* d, float* r) { F::bt(d, r); }, [&](int i, int j) { return p[i * T::RS + j]; },
                        [&](int i, int j, float q) { v[(XI * i + j) * T::CB * T::VS] = q; });
  }
  const float* ws = raw + T::CB * T::XS;
  for (int e = threadIdx.x; e < T::KB * T::CB; e += T::threads) {
    int k, c;
    float g[9];
    winograd_kernel_of<T, Dgrad>(ws, e, k, c, g);
    float* u = U + c * T::US + k;
    winograd_2d<3, XI>([](const float* w, float* r) { F::g(w, r); }, [&](int i, int j) { return g[3 * i + j]; },
                       [&](int i, int j, float q) { u[(XI * i + j) * T::CB * T::US] = q; });
  }
}

// Block (blockIdx.x = sample · row_blocks + row block, blockIdx.y = KB tile of the output channels).
// Forward: y = Fn(conv(x) + b). Backward data (Dgrad; G the layer turned around, x its dy, y its dx):
// y = conv(x) · Fn'(aux), aux the output of the activation Fn below the layer (identity_fn: none).
template <class G, int OT, class Fn, bool Dgrad>
__global__ void __launch_bounds__(ConvWinograd<G, OT>::threads, 1)
kernel_conv_winograd(const float* __restrict__ w,    // [Out][C][3][3] (Dgrad: [C][Out][3][3])
                     const float* __restrict__ aux,  // the bias [Out] (Dgrad: as y)
                     const float* __restrict__ x,    // [batch][C][H][W]
                     float* __restrict__ y)          // [batch][Out][H][W]
{
  using T = ConvWinograd<G, OT>;
  constexpr int KB = T::KB, TB = T::TB, CB = T::CB, XW = T::XW, TN = T::TN, steps = T::steps;
  float* smem = conv_mma_smem();
  // The two stages' raw input rows (a function, not an array of two pointers: indexed by a run-time
  // stage, such an array lives in local memory).
  auto raw = [smem](int stage) { return smem + stage * T::raw_floats; };
  float* V = smem + 2 * T::raw_floats;
  float* U = V + T::v_floats;
  const int n = int(blockIdx.x) / T::row_blocks, rb = int(blockIdx.x) % T::row_blocks;
  const int k0 = int(blockIdx.y) * KB, y_first = OT * rb * T::TR - 1;

  // The zero border columns of both stages' input rows (the copies never write them).
  for (int line = threadIdx.x; line < 2 * CB * T::PR; line += T::threads) {
    float* row = raw(line / (CB * T::PR)) + (line % (CB * T::PR)) * T::RS;
    *reinterpret_cast<float4*>(row) = make_float4(0.f, 0.f, 0.f, 0.f);
    *reinterpret_cast<float4*>(row + 4 + T::W) = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  winograd_stage<G, T, Dgrad>(raw(0), x, w, n, y_first, k0, 0);
  cp_async_commit();
  if (steps > 1) winograd_stage<G, T, Dgrad>(raw(1), x, w, n, y_first, k0, 1);
  cp_async_commit();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kg = lane / T::TG, tg = lane % T::TG;
  float acc[XW][8][TN];
#pragma unroll
  for (int s = 0; s < XW; ++s)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[s][i][j] = 0.f;

  for (int step = 0; step < steps; ++step) {
    cp_async_wait<1>();  // this thread's copies of `step` have landed
    __syncthreads();     // everyone's have, and everyone is done with the last step's V and U
    winograd_transform<T, Dgrad>(raw(step & 1), V, U);
    __syncthreads();     // V and U complete; raw(step & 1) free
    if (step + 2 < steps) winograd_stage<G, T, Dgrad>(raw(step & 1), x, w, n, y_first, k0, step + 2);
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < XW; ++s) {
      const int xi = XW * warp + s;
#pragma unroll
      for (int c = 0; c < CB; ++c) {
        const float* u = U + (xi * CB + c) * T::US + 4 * kg;
        const float* v = V + (xi * CB + c) * T::VS + 4 * tg;
        const float4 u0 = *reinterpret_cast<const float4*>(u), u1 = *reinterpret_cast<const float4*>(u + KB / 2);
        const float a[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
        float bb[TN];
#pragma unroll
        for (int jj = 0; jj < TN / 4; ++jj) {
          const float4 q = *reinterpret_cast<const float4*>(v + jj * (TB / 2));
          bb[4 * jj] = q.x, bb[4 * jj + 1] = q.y, bb[4 * jj + 2] = q.z, bb[4 * jj + 3] = q.w;
        }
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[s][i][j] = fmaf(a[i], bb[j], acc[s][i][j]);
      }
    }
  }
  cp_async_wait<0>();

  // Output transform, half of the block's channels at a time, through shared memory O[ξ][k'][t].
  float* O = smem;
  constexpr int half = KB / 2;
  constexpr std::size_t plane = std::size_t(G::OH) * G::OW;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    __syncthreads();  // the last step's V and U, or the previous half's O, are read
#pragma unroll
    for (int s = 0; s < XW; ++s)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float* o = O + ((XW * warp + s) * half + 4 * kg + i) * T::OS + 4 * tg;
        const float* a = acc[s][4 * h + i];
#pragma unroll
        for (int jj = 0; jj < TN / 4; ++jj)
          *reinterpret_cast<float4*>(o + jj * (TB / 2)) = make_float4(a[4 * jj], a[4 * jj + 1], a[4 * jj + 2], a[4 * jj + 3]);
      }
    __syncthreads();
    for (int e = threadIdx.x; e < half * TB; e += T::threads) {
      const int t = e % TB, kk = e / TB, k = k0 + h * half + kk;
      constexpr int XI = T::XI;
      float o[OT][OT];  // A^T m A
      winograd_2d<XI, OT>([](const float* q, float* r) { WinogradTransforms<OT>::at(q, r); },
                          [&](int i, int j) { return O[((XI * i + j) * half + kk) * T::OS + t]; },
                          [&](int i, int j, float q) { o[i][j] = q; });
      const int ty = rb * T::TR + t / T::TW, tx = t % T::TW;
      const std::size_t first = (std::size_t(n) * G::Out + k) * plane + (OT * ty) * G::OW + OT * tx;
      if constexpr (!Dgrad) {  // (backward data: no bias; aux is Fn's output)
        const float bias = aux[k];
#pragma unroll
        for (int i = 0; i < OT; ++i)
#pragma unroll
          for (int j = 0; j < OT; ++j) o[i][j] = bias + o[i][j];
      }
#pragma unroll
      for (int i = 0; i < OT; ++i) conv_patch_store<Dgrad, Fn>(y, aux, first + i * G::OW, o[i]);
    }
  }
}

// The FP32 rule takes this kernel for the implicit-GEMM family's layers it fits (>= 16 input channels)
// when the launch has at least 128 blocks (one wave of an H100 at one block per SM), with the 4 × 4
// tiles where they give that many blocks, else the 2 × 2 ones: below a wave the bigger blocks leave SMs
// idle (H100, docs/conv_kernels.md: 64->64 @16 at B = 64, 64 blocks of 4 × 4 tiles, 31.2 µs against
// 23.6 with 2 × 2; at B = 128, 32.0 against 44.8). Below 128 blocks of 2 × 2 tiles the staged-patch
// kernel was as fast or faster (64->64 @16 at B = 16, 32 blocks, 23.1 against 23.6 µs; 20->32 @16 at
// B = 7, 12.7 against 11.2; at B = 64, 128 blocks, 23.5 against 38.4). The RGB stem (3 channels: 5 of
// every 8 staged channels zeros) stays direct: 40.4 against 33.0 µs at B = 256.
template <class G, int OT = 2>
constexpr bool conv_winograd_fits() {
  return ConvWinograd<G, OT>::fits && G::C >= 16;
}
template <class G, int OT = 2>
bool conv_winograd_wins(int batch) {
  using T = ConvWinograd<G, OT>;
  return (long long)batch * T::row_blocks * (G::Out / T::KB) >= 128;
}
// The rule's tile (4 or 2 outputs a side), 0 for no Winograd kernel.
template <class G>
int conv_winograd_tile(int batch) {
  if constexpr (conv_winograd_fits<G, 4>())
    if (conv_winograd_wins<G, 4>(batch)) return 4;
  if constexpr (conv_winograd_fits<G, 2>())
    if (conv_winograd_wins<G, 2>(batch)) return 2;
  return 0;
}

// Backward data of a 3×3 stride-1 padding-1 layer G is the forward of the layer turned around (from
// G::Out channels to G::C, with each kernel turned by 180°), which the Winograd kernel runs reading the
// layer's own weights (Dgrad). The rule as for the forward, on the turned layer.
template <class G>
using ConvWinogradDgradDims = ConvDims<G::Out, G::H, G::W, G::C, 3, 1, 1, 1>;
template <class G>
constexpr bool conv_winograd_dgrad_fits() {
  return G::K == 3 && G::S == 1 && G::P == 1 && G::D == 1 && conv_winograd_fits<ConvWinogradDgradDims<G>>();
}

template <class G, int OT, class Fn, bool Dgrad>
void launch_winograd_kernel(cudaStream_t stream, const float* w, const float* aux, const float* x, float* y,
                            int batch) {
  using T = ConvWinograd<G, OT>;
  static_assert(T::fits, "ctnn: the Winograd kernel runs 3x3 stride-1 padding-1 layers (see ConvWinograd)");
  if (!conv_patch_aligned(w, x, y) || (OT == 4 && reinterpret_cast<std::uintptr_t>(y) % 16 != 0))
    throw std::invalid_argument("ctnn: Conv (Winograd kernel): weights and input must be 16-byte aligned, the "
                                "output 8-byte aligned (16-byte with 4x4 tiles)");
  if (batch <= 0) return;
  constexpr auto kernel = kernel_conv_winograd<G, OT, Fn, Dgrad>;
  request_dynamic_smem<kernel, T::smem_bytes>();
  const dim3 grid(unsigned(batch) * T::row_blocks, G::Out / T::KB);
  kernel<<<grid, T::threads, T::smem_bytes, stream>>>(w, aux, x, y);
  CTNN_CHECK_LAUNCH();
}

// The forward with tiles of OT × OT outputs (2 or 4) and the activation Fn in the store.
template <class G, class Fn = identity_fn, int OT = 2>
void launch_conv_winograd(cudaStream_t stream, const float* w, const float* b, const float* x, float* y, int batch) {
  launch_winograd_kernel<G, OT, Fn, false>(stream, w, b, x, y, batch);
}
// Backward data of layer G (w its weights): dx = conv^T(dy) · Fn'(below), below the output of the
// activation Fn below the layer, aligned as dx (identity_fn: none, below unused).
template <class G, class Fn = identity_fn, int OT = 2>
void launch_conv_winograd_dgrad(cudaStream_t stream, const float* w, const float* dy, const float* below, float* dx,
                                int batch) {
  launch_winograd_kernel<ConvWinogradDgradDims<G>, OT, Fn, true>(stream, w, below, dy, dx, batch);
}

// The rule's launch (forward, or with Dgrad the backward data, G then the turned layer's dims): the
// tiles conv_winograd_tile takes, 4 × 4 only into a 16-byte aligned y (else 2 × 2). False, having
// launched nothing, where the rule takes no Winograd kernel or the pointers are not aligned for it.
template <class G, class Fn, bool Dgrad>
bool launch_conv_winograd_rule(cudaStream_t stream, const float* w, const float* aux, const float* x, float* y,
                               int batch) {
  if constexpr (!conv_winograd_fits<G, 2>()) {
    return false;
  } else {
    const int tile = conv_winograd_tile<G>(batch);
    if constexpr (conv_winograd_fits<G, 4>())
      if (tile == 4 && conv_patch_fp32_aligned(w, x, y)) {
        launch_winograd_kernel<G, 4, Fn, Dgrad>(stream, w, aux, x, y, batch);
        return true;
      }
    if (tile == 0 || !conv_patch_aligned(w, x, y)) return false;
    launch_winograd_kernel<G, 2, Fn, Dgrad>(stream, w, aux, x, y, batch);
    return true;
  }
}

}  // namespace ctnn::kernels
