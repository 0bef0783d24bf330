#pragma once
// The weight gradient of a conv group with a max pooling of PQ × PQ windows, stride PQ (conv_fused.cuh;
// pixels in no window, where PQ does not divide the output, have no gradient). Of each pooling window
// only the position of its maximum has a non-zero gradient, so
//
//   dW[o][c][ky][kx] = Σ over samples and over the windows of channel o:  g · x[c][oy·S − P + ky·D][ox·S − P + kx·D]
//
// with g the window's gradient and (oy, ox) its maximum: a quarter of the dense kernel's terms at 2 × 2
// windows (conv_direct.cuh's ConvWgrad multiplies the other three quarters by zero).
//
// A block takes whole samples. Per sample it stages x (zero-padded) and, for every window of every
// output channel, g and the offset in the staged x where its maximum's patch starts. A thread has a
// role (output channel o, input channel c, kernel row ky) and a window group: it adds the K taps of
// dW[o][c][ky] over its group's windows (one broadcast load of the window, K loads of x, K FMAs).
// The threads with c = ky = 0 add g into db[o]. At the end the window groups' sums are added in
// group order into the block's row of partials: every sum has a fixed order.
#include <cstddef>

#include "conv_direct.cuh"
#include "launch.cuh"

namespace ctnn::kernels {

template <class G, int PQ>
struct ConvPooledWgrad {
  static constexpr int QH = PQ > 0 ? G::OH / PQ : 0, QW = PQ > 0 ? G::OW / PQ : 0, Q = QH * QW;
  static constexpr int CK = G::C * G::K;
  static constexpr int E = G::Out * (G::CKK + 1);  // a row of partials: dW [Out][C·K·K], then db [Out]
  // Roles (c, ky) fastest, then o: a warp reads the windows of one or two channels (broadcasts).
  static constexpr int roles = CK * G::Out;
  static constexpr int role_threads = round_up(roles, 32);
  // Window groups: about 512 threads, as many as the groups' sums leave room for in shared memory.
  static constexpr int wg = clamp_to(min_of(512 / role_threads, smem_limit_floats / E), 1, max_of(Q, 1));
  static constexpr int threads = role_threads * wg;
  static constexpr int min_blocks = max_of(1, 1024 / threads);
  // The staged input of one sample: rows XR of XW pixels, the padding zero. The row stride is 2 mod 32:
  // the taps of a 2 × 2 window's four positions, rows r and columns d, fall in banks 2r + d, distinct
  // for 16 rows.
  static constexpr int XR = (G::OH - 1) * G::S + G::span, XW = (G::OW - 1) * G::S + G::span;
  static constexpr int XS = XW + ((2 - XW) % 32 + 32) % 32;
  // The channel stride: of XR·XS + 0..31, the one whose (c, ky) rows fall in the fewest shared banks
  // among 32 neighbouring roles (a warp's lanes at one window position).
  static constexpr int bank_collisions(int cs) {
    int n = 0;
    for (int i = 0; i < CK; ++i)
      for (int j = i + 1; j < CK && j < i + 32; ++j) {
        const int bi = ((i / G::K) * cs + (i % G::K) * G::D * XS) % 32, bj = ((j / G::K) * cs + (j % G::K) * G::D * XS) % 32;
        n += bi == bj;
      }
    return n;
  }
  static constexpr int CS = [] {
    int best = XR * XS;
    for (int p = 1; p < 32 && G::C > 1; ++p)
      if (bank_collisions(XR * XS + p) < bank_collisions(best)) best = XR * XS + p;
    return best;
  }();
  static constexpr int x_floats = round_up(G::C * CS, 4);
  // The windows of one channel, stride 1 mod 16 (2 mod 32 floats): a warp's channels, distinct banks.
  static constexpr int QS = Q + ((1 - Q) % 16 + 16) % 16;
  static constexpr int win_floats = 2 * G::Out * QS;
  static constexpr int smem_floats = max_of(x_floats + win_floats, wg > 1 ? wg * E : 0);
  static constexpr bool fits = PQ > 0 && Q > 0 && smem_floats <= smem_limit_floats && threads <= 1024;
  // Rows of partials: a sample each, at most ConvWgrad's rule (its rows are as wide).
  static constexpr int partials(int batch) { return clamp_to(batch, 1, ConvWgrad<G>::max_partials); }
};

// The body of the kernel: x [batch][C][H][W]; ld_dy a loader of max-pooling windows (ConvGroupGrad);
// this block's row of partials [gridDim.x][E]; the block takes samples [b·batch/grid, (b+1)·batch/grid).
template <class G, int PQ, class LoadDy>
__device__ __forceinline__ void conv_pooled_wgrad_block(const float* __restrict__ x, const LoadDy& ld_dy,
                                                        float* __restrict__ partials, int batch) {
  using Cfg = ConvPooledWgrad<G, PQ>;
  constexpr int K = G::K, D = G::D, S = G::S, T = Cfg::threads, WG = Cfg::wg, Q = Cfg::Q, QW = Cfg::QW;
  constexpr int XS = Cfg::XS, CS = Cfg::CS, QS = Cfg::QS, E = Cfg::E, CKK = G::CKK;
  constexpr int HW = G::H * G::W, NX = G::C * HW, NW = G::Out * Q;
  static_assert(Cfg::fits, "ctnn: the pooled weight gradient's staging exceeds 48 KB of shared memory");

  __shared__ __align__(16) float smem[Cfg::smem_floats];
  float* x_s = smem;                                                   // (C, XR, XS), channel stride CS
  float2* win_s = reinterpret_cast<float2*>(smem + Cfg::x_floats);  // (Out, QS): g, x_s offset
  float* red_s = smem;                                                 // (WG, E), after the last sample

  const int role = int(threadIdx.x) % Cfg::role_threads, wgi = int(threadIdx.x) / Cfg::role_threads;
  const bool active = role < Cfg::roles;
  const int ck = role % Cfg::CK, o = min_of(role / Cfg::CK, G::Out - 1), c = ck / K, ky = ck % K;
  const bool sums_bias = active && ck == 0;
  const float* xb = x_s + c * CS + ky * D * XS;  // this role's row of taps, window offset 0
  const float2* wrow = win_s + o * QS;

  float acc[K], bias = 0.f;
#pragma unroll
  for (int kx = 0; kx < K; ++kx) acc[kx] = 0.f;
  for (int e = threadIdx.x; e < Cfg::x_floats; e += T) x_s[e] = 0.f;  // the padding stays zero

  const int nb = int(gridDim.x), blk = int(blockIdx.x);
  const int n_begin = int((long long)blk * batch / nb), n_end = int((long long)(blk + 1) * batch / nb);
  for (int ni = n_begin; ni < n_end; ++ni) {
    const std::size_t n = std::size_t(ni);
    __syncthreads();  // x_s zeroed, or the previous sample's reads finished
    // The sample's input and its windows (three loads each: the gradient at the maximum, where it is,
    // the pooled output), in passes of XB inputs and WB windows a thread whose loads are all in flight
    // together (one pass where the thread has few). A window goes in as its gradient and where its
    // maximum's patch starts in x_s.
    constexpr int XB = min_of(ceil_div(NX, T), 8), WB = min_of(ceil_div(NW, T), 4);
    constexpr int passes = max_of(ceil_div(NX, XB * T), ceil_div(NW, WB * T));
    const float* xn = x + n * NX;
    for (int pass = 0; pass < passes; ++pass) {
      const int e0 = pass * XB * T + int(threadIdx.x), w0 = pass * WB * T + int(threadIdx.x);
      float v[XB];
      typename LoadDy::Window wv[WB] = {};
#pragma unroll
      for (int i = 0; i < XB; ++i) v[i] = e0 + i * T < NX ? xn[e0 + i * T] : 0.f;
#pragma unroll
      for (int i = 0; i < WB; ++i)
        if (w0 + i * T < NW) wv[i] = ld_dy.window_at(n * NW + (w0 + i * T));
#pragma unroll
      for (int i = 0; i < XB; ++i) {
        const int e = e0 + i * T, cc = e / HW, r = (e / G::W) % G::H + G::P, j = e % G::W + G::P;
        if (e < NX && r < Cfg::XR && j < Cfg::XW) x_s[cc * CS + r * XS + j] = v[i];
      }
#pragma unroll
      for (int i = 0; i < WB; ++i) {
        const int wi = w0 + i * T, q = wi % Q;
        if (wi >= NW) break;
        const int oy = (q / QW) * PQ + wv[i].at / PQ, ox = (q % QW) * PQ + wv[i].at % PQ;
        win_s[(wi / Q) * QS + q] = make_float2(LoadDy::window_grad(wv[i]), __int_as_float(oy * S * XS + ox * S));
      }
    }
    __syncthreads();
    if (active) {
#pragma unroll 4
      for (int i = 0; i < ceil_div(Q, WG); ++i) {
        const int q = wgi + i * WG;
        if (Q % WG != 0 && q >= Q) break;
        const float2 w = wrow[q];
        const float* p = xb + __float_as_int(w.y);
#pragma unroll
        for (int kx = 0; kx < K; ++kx) acc[kx] = fmaf(w.x, p[kx * D], acc[kx]);
        if (sums_bias) bias += w.x;
      }
    }
  }

  // The window groups' sums, in group order, into this block's row of partials.
  float* part = partials + std::size_t(blk) * E;
  const auto put = [&](float* row) {
    if (!active) return;
#pragma unroll
    for (int kx = 0; kx < K; ++kx) row[o * CKK + ck * K + kx] = acc[kx];
    if (sums_bias) row[G::Out * CKK + o] = bias;
  };
  store_group_sums<WG, T>(red_s, wgi, E, part, put);
}

}  // namespace ctnn::kernels
