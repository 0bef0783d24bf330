#pragma once
// FP32 forward of 3×3, stride-1, padding-1 convolutions by Winograd's minimal filtering F(2×2, 3×3):
// each 2×2 block of outputs ("tile") of an output channel k is A^T [Σ_c (G g_kc G^T) ⊙ (B^T d_c B)] A,
// where d_c is the 4×4 input patch under the tile in channel c and g_kc the 3×3 kernel. The 16
// products ⊙ are 16 independent GEMMs (one per position ξ of the 4×4 transformed tile) that reduce over
// the channels: 16·C multiplications per tile and output channel instead of the direct 36·C, 2.25×
// fewer. The transforms are additions (and halvings of the weights).
//
// One fused kernel (no transformed tensor in global memory): a block owns KB output channels × TB tiles
// (whole tile rows of one sample) and all 16 ξ. Per step of CB = 8 input channels it stages, with
// 16-byte cp.async two steps deep, the input rows its tiles read and the weights of those channels;
// transforms both into shared memory (V[ξ][c][t] = B^T d B, U[ξ][c][k] = G g G^T); then each warp
// multiplies two ξ: a lane owns 8 channels × 8 tiles of both, 128 accumulators, and per (ξ, c) reads two
// float4 of U and two of V for 64 FMAs. At the end the accumulators go through shared memory, half the
// channels at a time, so that each thread gathers the 16 ξ of its (channel, tile) pairs, applies A^T · A,
// adds the bias and the activation Fn and stores 2 × 2 outputs.
//
// Rounding: the sums run in a different order, with the transforms' additions, from the direct and
// GEMM kernels' (k = (c, ky, kx) increasing); results agree with them to rounding, not to the bit.
// Deterministic: a fixed order, no atomics.
//
// Measured and not kept (H100, docs/conv_kernels.md): V and U in two buffers, so that a step needs one
// barrier and the next step's transform overlaps this one's products: 255 registers, spills, 64->64 @16
// at B = 256 86.8 -> 97.9 µs.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "../layers/activation.hpp"
#include "conv_gemm.cuh"
#include "conv_mma.cuh"
#include "conv_patch.cuh"
#include "launch.cuh"

namespace ctnn::kernels {

// The block's shape for a layer G: KB output channels (64 where Out allows, else 32) × TB tiles, with
// KB·TB = 2048 so that 256 threads hold 8 × 8 (channel, tile) pairs of two ξ each.
// (Eight warps of two ξ each: with 16 warps of one ξ, 128 registers a thread, it was 2-6% slower.)
template <class G>
struct ConvWinograd {
  static constexpr int XW = 2;  // ξ a warp
  static constexpr int KB = G::Out % 64 == 0 ? 64 : 32, TB = 2048 / KB, CB = 8, threads = 16 / XW * 32;
  static constexpr int KG = KB / 8, TG = TB / 8;  // a warp's lanes: KG channel groups × TG tile groups
  static constexpr int W = G::W, H = G::H, TW = W / 2, TR = TB / TW;  // tiles a row; tile rows a block
  static constexpr int PR = 2 * TR + 2, RS = W + 8;   // staged input rows, and their stride (data at 4..)
  static constexpr int XS = PR * RS, WS = CB * 9;      // floats a staged channel; weights of one k
  static constexpr int raw_floats = CB * XS + KB * WS; // one stage: input rows, then weights
  static constexpr int VS = TB + 4, US = KB + 4;       // row strides of V[ξ][c] and U[ξ][c] (padded)
  static constexpr int v_floats = 16 * CB * VS, u_floats = 16 * CB * US;
  static constexpr int OS = TB + 4, o_floats = 16 * (KB / 2) * OS;  // the exchange, half of KB at a time
  static constexpr int smem_floats = max_of(2 * raw_floats + v_floats + u_floats, o_floats);
  static constexpr int smem_bytes = smem_floats * 4;
  static constexpr int steps = (G::C + CB - 1) / CB;  // channels past C are staged as zeros
  static constexpr bool whole_steps = G::C % CB == 0;  // then a k's 72 weights are 16-byte copies
  static constexpr int row_blocks = (H / 2) / max_of(TR, 1);  // blocks a sample, per KB channels
  static constexpr bool fits = G::K == 3 && G::S == 1 && G::P == 1 && G::D == 1 && G::Out % 32 == 0 &&
                               W % 8 == 0 && H % 2 == 0 && TB % TW == 0 && (H / 2) % max_of(TR, 1) == 0 &&
                               smem_bytes <= 200 * 1024;
};

// Stages step `step` (input channels c0 = 8·step ..) into `raw`: the block's input rows (row r of the
// stage is input row y_first + r; zeros outside the image; columns 0-3 and W+4.. are the zero border,
// never written here) and the KB × 72 weights w[k0 + k][c0 .. c0 + 7][3][3] (contiguous per k).
template <class G, class T>
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
  if constexpr (T::whole_steps) {
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

// raw → V (B^T d B per (tile, channel)) and U (G g G^T per (channel k, input channel)).
template <class T>
__device__ __forceinline__ void winograd_transform(const float* raw, float* V, float* U) {
  for (int e = threadIdx.x; e < T::TB * T::CB; e += T::threads) {
    const int t = e % T::TB, c = e / T::TB, tr = t / T::TW, tx = t % T::TW;
    const float* p = raw + c * T::XS + 2 * tr * T::RS + 4 + 2 * tx - 1;
    float d[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) d[i][j] = p[i * T::RS + j];
    float r[4][4];  // B^T d
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      r[0][j] = d[0][j] - d[2][j], r[1][j] = d[1][j] + d[2][j];
      r[2][j] = d[2][j] - d[1][j], r[3][j] = d[1][j] - d[3][j];
    }
    float* v = V + c * T::VS + t;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // (B^T d) B
      v[(4 * i + 0) * T::CB * T::VS] = r[i][0] - r[i][2];
      v[(4 * i + 1) * T::CB * T::VS] = r[i][1] + r[i][2];
      v[(4 * i + 2) * T::CB * T::VS] = r[i][2] - r[i][1];
      v[(4 * i + 3) * T::CB * T::VS] = r[i][1] - r[i][3];
    }
  }
  const float* ws = raw + T::CB * T::XS;
  for (int e = threadIdx.x; e < T::KB * T::CB; e += T::threads) {
    const int c = e % T::CB, k = e / T::CB;  // c fastest: the 9-float rows of a warp fall on distinct banks
    const float* g = ws + k * T::WS + c * 9;
    float r[4][3];  // G g
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      r[0][j] = g[j], r[3][j] = g[6 + j];
      r[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
      r[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
    }
    float* u = U + c * T::US + k;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // (G g) G^T
      u[(4 * i + 0) * T::CB * T::US] = r[i][0];
      u[(4 * i + 1) * T::CB * T::US] = 0.5f * (r[i][0] + r[i][1] + r[i][2]);
      u[(4 * i + 2) * T::CB * T::US] = 0.5f * (r[i][0] - r[i][1] + r[i][2]);
      u[(4 * i + 3) * T::CB * T::US] = r[i][2];
    }
  }
}

// Block (blockIdx.x = sample · row_blocks + row block, blockIdx.y = KB tile of the output channels).
template <class G, class Fn = identity_fn>
__global__ void __launch_bounds__(ConvWinograd<G>::threads, 1)
kernel_conv_winograd(const float* __restrict__ w,  // [Out][C][3][3]
                     const float* __restrict__ b,  // [Out]
                     const float* __restrict__ x,  // [batch][C][H][W]
                     float* __restrict__ y)        // [batch][Out][H][W]
{
  using T = ConvWinograd<G>;
  constexpr int KB = T::KB, TB = T::TB, CB = T::CB, XW = T::XW, steps = T::steps;
  float* smem = conv_mma_smem();
  float* raw[2] = {smem, smem + T::raw_floats};
  float* V = smem + 2 * T::raw_floats;
  float* U = V + T::v_floats;
  const int n = int(blockIdx.x) / T::row_blocks, rb = int(blockIdx.x) % T::row_blocks;
  const int k0 = int(blockIdx.y) * KB, y_first = 2 * rb * T::TR - 1;

  // The zero border columns of both stages' input rows (the copies never write them).
  for (int line = threadIdx.x; line < 2 * CB * T::PR; line += T::threads) {
    float* row = raw[line / (CB * T::PR)] + (line % (CB * T::PR)) * T::RS;
    *reinterpret_cast<float4*>(row) = make_float4(0.f, 0.f, 0.f, 0.f);
    *reinterpret_cast<float4*>(row + 4 + T::W) = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  winograd_stage<G, T>(raw[0], x, w, n, y_first, k0, 0);
  cp_async_commit();
  if (steps > 1) winograd_stage<G, T>(raw[1], x, w, n, y_first, k0, 1);
  cp_async_commit();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kg = lane / T::TG, tg = lane % T::TG;
  float acc[XW][8][8];
#pragma unroll
  for (int s = 0; s < XW; ++s)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[s][i][j] = 0.f;

  for (int step = 0; step < steps; ++step) {
    cp_async_wait<1>();  // this thread's copies of `step` have landed
    __syncthreads();     // everyone's have, and everyone is done with the last step's V and U
    winograd_transform<T>(raw[step & 1], V, U);
    __syncthreads();     // V and U complete; raw[step & 1] free
    if (step + 2 < steps) winograd_stage<G, T>(raw[step & 1], x, w, n, y_first, k0, step + 2);
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < XW; ++s) {
      const int xi = XW * warp + s;
#pragma unroll
      for (int c = 0; c < CB; ++c) {
        const float* u = U + (xi * CB + c) * T::US + 4 * kg;
        const float* v = V + (xi * CB + c) * T::VS + 4 * tg;
        const float4 u0 = *reinterpret_cast<const float4*>(u), u1 = *reinterpret_cast<const float4*>(u + KB / 2);
        const float4 v0 = *reinterpret_cast<const float4*>(v), v1 = *reinterpret_cast<const float4*>(v + TB / 2);
        const float a[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
        const float bb[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[s][i][j] = fmaf(a[i], bb[j], acc[s][i][j]);
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
        *reinterpret_cast<float4*>(o) = make_float4(a[0], a[1], a[2], a[3]);
        *reinterpret_cast<float4*>(o + TB / 2) = make_float4(a[4], a[5], a[6], a[7]);
      }
    __syncthreads();
    for (int e = threadIdx.x; e < half * TB; e += T::threads) {
      const int t = e % TB, kk = e / TB, k = k0 + h * half + kk;
      float m[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) m[i][j] = O[((4 * i + j) * half + kk) * T::OS + t];
      float r[2][4];  // A^T m
#pragma unroll
      for (int j = 0; j < 4; ++j) r[0][j] = m[0][j] + m[1][j] + m[2][j], r[1][j] = m[1][j] - m[2][j] - m[3][j];
      const float bias = b[k];
      const int ty = rb * T::TR + t / T::TW, tx = t % T::TW;
      float* out = y + (std::size_t(n) * G::Out + k) * plane + (2 * ty) * G::OW + 2 * tx;
#pragma unroll
      for (int i = 0; i < 2; ++i) {  // (A^T m) A
        const float y0 = Fn::apply(bias + (r[i][0] + r[i][1] + r[i][2]));
        const float y1 = Fn::apply(bias + (r[i][1] - r[i][2] - r[i][3]));
        *reinterpret_cast<float2*>(out + i * G::OW) = make_float2(y0, y1);
      }
    }
  }
}

// The FP32 rule takes this kernel for the implicit-GEMM family's layers it fits (>= 16 input channels)
// when the launch has at least 128 blocks (one wave of an H100 at one block per SM): below that the
// staged-patch kernel was as fast or faster (H100, docs/conv_kernels.md: 64->64 @16 at B = 16, 32 blocks,
// 23.1 against 23.6 µs; 20->32 @16 at B = 7, 12.7 against 11.2; at B = 64, 128 blocks, 23.5 against
// 38.4). The RGB stem (3 channels: 5 of every 8 staged channels zeros) stays direct: 40.4 against 33.0
// µs at B = 256.
template <class G>
constexpr bool conv_winograd_fits() {
  return ConvWinograd<G>::fits && G::C >= 16;
}
template <class G>
bool conv_winograd_wins(int batch) {
  return (long long)batch * ConvWinograd<G>::row_blocks * (G::Out / ConvWinograd<G>::KB) >= 128;
}

template <class G, class Fn = identity_fn>
void launch_conv_winograd(cudaStream_t stream, const float* w, const float* b, const float* x, float* y, int batch) {
  using T = ConvWinograd<G>;
  static_assert(T::fits, "ctnn: the Winograd kernel runs 3x3 stride-1 padding-1 layers (see ConvWinograd)");
  if (!conv_patch_aligned(w, x, y))  // 16-byte copies of w and x, 8-byte stores of y
    throw std::invalid_argument(
        "ctnn: Conv (Winograd kernel): weights and input must be 16-byte aligned, the output 8-byte aligned");
  if (batch <= 0) return;
  constexpr auto kernel = kernel_conv_winograd<G, Fn>;
  request_dynamic_smem<kernel, T::smem_bytes>();
  const dim3 grid(unsigned(batch) * T::row_blocks, G::Out / T::KB);
  kernel<<<grid, T::threads, T::smem_bytes, stream>>>(w, b, x, y);
  CTNN_CHECK_LAUNCH();
}

}  // namespace ctnn::kernels
