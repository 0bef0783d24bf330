#pragma once
// TF32 weight gradient on Hopper's wgmma (sm_90a) for the stride-1 "same" 3×3 layers of conv_wgmma.cuh
// with 64 output channels.
//
// dW[m][c][ky][kx] = Σ over pixels p of dy[m][p] · x[c][p shifted by (ky, kx)] is a GEMM whose k is the
// pixels. wgmma wants TF32 operands K-major (pixels contiguous), which both are as stored (NCHW); what a
// descriptor cannot do is a column shift (it starts on 16 bytes, a shift is 4 bytes). So:
//   A (64 × 8 pixels of one output row): dy, staged [pixel quad][m][4] (a 16-byte cp.async a quad);
//   B (8 pixels × 3·C columns (kx, c)): the input staged three times, once per column shift kx − 1, as
//     [pixel quad][input row][kx][c][4]: for one quad and input row the 3·C columns are consecutive
//     16-byte rows, so the columns of a kernel row ky at output row y are one start address (row y + ky);
//   D (64 × 3·C) in the accumulators of warpgroup ky (3·C / 2 registers: 96 at C = 64).
// A block is three warpgroups, one a kernel row, over a split's steps; a step is TH output rows (about 64
// pixels) of one sample, for which each warpgroup issues one m64n(3C)k8 wgmma per 8 pixels. Against 64-
// column tiles (one wgmma a tap) that reads a third less shared memory a product: the tensor cores read
// their operands from shared memory, and it is what bounds them here. x goes through registers (loaded
// during the step before the one that stores it; the shifted copies made with two shuffles), dy by
// cp.async three stages deep; a step's wgmmas are issued at once and waited for at its end.
// Operands are truncated to TF32 by the tensor cores (as cuBLAS's TF32 kernels on Hopper do). The bias
// gradient sums the staged dy in FP32. Each block writes its split's partial [m][ky][kx][c] (then db);
// sum_partials adds the splits in order and puts each column in dW's order (WgmmaWgradColumn):
// deterministic.
#include <cstddef>

#include "conv_gemm.cuh"
#include "conv_patch_fp32.cuh"
#include "conv_wgmma.cuh"
#include "reduce.cuh"

namespace ctnn::kernels {

// Which layers: those of the wgmma forward (conv_wgmma_fits: stride 1, 3×3, pad 1, H a multiple of 8, 32
// or 64 channels either side) with 64 output channels (wgmma's 64 rows), rows of at most 32 quads (the
// shuffles' reach).
template <class G>
constexpr bool conv_wgmma_wgrad_shape() {
  return conv_wgmma_fits<G>() && G::Out == 64 && G::W % 8 == 0 && G::W <= 128;
}

template <class G, int Pixels = 64, int Blocks_ = 132>
struct ConvWgmmaWgradTile {
  static constexpr int C = G::C, M = 64, W = G::W, H = G::H, threads = 3 * 128, W4 = W / 4, NC = 3 * C;
  static constexpr int CK = C, BM = M;  // a block's input and output channels: all (one block a split)
  // Output rows a step: about Pixels pixels, dividing H.
  static constexpr int TH = [] {
    for (int th = max_of(1, Pixels / W); th > 1; --th)
      if (H % th == 0) return th;
    return 1;
  }();
  static constexpr int quads = TH * W4, slices = TH * W / 8;
  // Input rows a stage holds (TH + 2), a quad's block of them PR · 3·C 16-byte rows.
  static constexpr int PR = TH + 2, quad_rows = PR * NC;
  static constexpr int x_floats = W4 * quad_rows * 4, d_floats = TH * W * M, d_stages = 3;
  static constexpr int smem_bytes = (2 * x_floats + d_stages * d_floats) * 4;
  static constexpr int min_blocks = 1;
  // x: a warp's lanes CL channels × the W4 quads of one input row.
  static constexpr int CL = 32 / W4, x_units = C * PR * W4, x_passes = ceil_div(x_units, threads);
  static constexpr int d_units = M * quads, d_passes = ceil_div(d_units, threads);
  // A split's "k step" is a step; one tile covers all of dW, so Blocks_ splits, one a block (132: one an
  // SM of an H100 or H200; two waves of blocks were slower, 46.6 against 35.0 µs at 64→64 @16, batch 256).
  using Splits = ConvWgradSplits<G, M, 9 * C, TH * W, Blocks_>;
  static_assert(quads % 4 == 0, "dy copied 4 quads × 8 channels a warp");
  static_assert(W4 <= 32 && C % CL == 0, "a row's quads within a warp");
  static constexpr bool fits = conv_wgmma_wgrad_shape<G>() && smem_bytes <= 227 * 1024;
};

template <class G>
constexpr bool conv_wgmma_wgrad_fits() {
  if constexpr (!conv_wgmma_wgrad_shape<G>()) return false;
  else return ConvWgmmaWgradTile<G>::fits;
}

// Column e of a partial (m = e / 9C, then ky, kx, c) in dW [64][C][3][3].
template <int C>
struct WgmmaWgradColumn {
  __device__ static int at(int e) {
    const int m = e / (9 * C), r = e % (9 * C);
    return m * 9 * C + r % C * 9 + r / C;
  }
};

template <class G, class T>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_wgmma_wgrad(const float* __restrict__ x,   // [batch][C][H][W]
                        const float* __restrict__ dy,  // [batch][64][H][W]
                        float* __restrict__ partials,  // [splits][E]: [m][ky][kx][c], then db [64]
                        int per_split, int steps) {
  wait_for_prior_grids();
  constexpr int C = T::C, M = T::M, NC = T::NC, W = T::W, H = T::H, TH = T::TH, PR = T::PR, W4 = T::W4,
                CL = T::CL, NT = T::threads, plane = H * W, row_tiles = H / TH;
  float* Xs = conv_mma_smem();       // (2, x_floats): [quad][input row][kx][c][4]
  float* Ds = Xs + 2 * T::x_floats;  // (d_stages, d_floats): [quad][m][4]
  const int first = blockIdx.x * per_split, count = min_of(per_split, steps - first);
  const int ky = threadIdx.x / 128;  // this warpgroup's kernel row

  // x: unit (channel c, input row r, quad q); a quad's neighbours are CL lanes away.
  float4 xv[T::x_passes];
  auto unit = [](int p, int& c, int& r, int& q) {
    const int u = threadIdx.x + p * NT;
    c = u % CL + u / (CL * W4 * PR) * CL, q = u / CL % W4, r = u / (CL * W4) % PR;
  };
  auto fetch = [&](int step) {
    const int n = step / row_tiles, y0 = step % row_tiles * TH - 1;
    const float* x_n = x + std::size_t(n) * C * plane;
#pragma unroll
    for (int p = 0; p < T::x_passes; ++p) {
      int c, r, q;
      unit(p, c, r, q);
      const bool in = (T::x_units % NT == 0 || threadIdx.x + p * NT < T::x_units) && y0 + r >= 0 && y0 + r < H;
      const float* from = x_n + c * plane + (y0 + r) * W + 4 * q;
      xv[p] = in ? *reinterpret_cast<const float4*>(from) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  auto store_x = [&](int stage) {
    float* X = Xs + stage * T::x_floats;
#pragma unroll
    for (int p = 0; p < T::x_passes; ++p) {
      int c, r, q;
      unit(p, c, r, q);
      // Columns 4q − 1 and 4q + 4: the neighbouring quads' (zero past the row's ends).
      float left = __shfl_up_sync(0xffffffffu, xv[p].w, CL), right = __shfl_down_sync(0xffffffffu, xv[p].x, CL);
      if (q == 0) left = 0.f;
      if (q == W4 - 1) right = 0.f;
      if (T::x_units % NT != 0 && threadIdx.x + p * NT >= T::x_units) continue;
      float* to = X + ((q * PR + r) * NC + c) * 4;
      *reinterpret_cast<float4*>(to) = make_float4(left, xv[p].x, xv[p].y, xv[p].z);
      *reinterpret_cast<float4*>(to + 4 * C) = xv[p];
      *reinterpret_cast<float4*>(to + 8 * C) = make_float4(xv[p].y, xv[p].z, xv[p].w, right);
    }
  };
  // dy: eight lanes a run of 8 channels' same quad (128 contiguous bytes in shared memory), four such runs a
  // warp over 4 consecutive quads (64 contiguous bytes of each channel's dy).
  auto load_dy = [&](int stage, int step) {
    const int n = step / row_tiles, oy0 = step % row_tiles * TH;
    float* D = Ds + stage * T::d_floats;
    const float* dy_n = dy + (std::size_t(n) * M * plane + oy0 * W);
#pragma unroll
    for (int i = 0; i < T::d_passes; ++i) {
      const int u = threadIdx.x + i * NT;
      if (T::d_units % NT != 0 && u >= T::d_units) break;
      const int m = u % 8 + u / 32 % (M / 8) * 8, q = u / 8 % 4 + u / (4 * M) * 4;
      cp_async_f32x4(D + (q * M + m) * 4, dy_n + m * plane + 4 * q, true);
    }
  };

  float acc[NC / 2];
#pragma unroll
  for (int j = 0; j < NC / 2; ++j) acc[j] = 0.f;
  float bsum = 0.f;  // channel threadIdx.x % 64 over quads threadIdx.x / 64, + NT / 64, ...

  // Descriptors at stage 0: A (dy) core matrices 8 channels (128 bytes) apart, a slice's two quads M rows
  // apart; B (x) 8 columns apart, the two quads a quad's block apart.
  const unsigned long long a_desc0 = wgmma_desc(Ds, M * 16, 128);
  const unsigned long long b_desc0 = wgmma_desc(Xs, T::quad_rows * 16, 128);

  // Step t's wgmmas read x stage t % 2 and dy stage t % 3 while the threads fill the other x stage with
  // step t + 1 (from registers, loaded during step t − 1), issue step t + 2's dy copies and load its x.
  if (count > 0) {
    fetch(first);
    load_dy(0, first);
    store_x(0);
    if (count > 1) fetch(first + 1);
  }
  cp_async_commit();
  if (count > 1) load_dy(1, first + 1);
  cp_async_commit();
  int d_stage = 0;  // step % d_stages
  for (int step = 0; step < count; ++step) {
    const int stage = step & 1;
    cp_async_wait<1>();        // this step's dy (the next step's may be in flight)
    fence_proxy_async_smem();  // this thread's stores and copies (generic proxy) before the tensor cores' reads
    __syncthreads();           // the step's stages are full; everyone's wgmmas of step − 1 are done

    wgmma_fence_operands(acc);
    wgmma_fence();
#pragma unroll
    for (int sl = 0; sl < T::slices; ++sl) {
      const int yl = sl / (W / 8), q0 = sl % (W / 8) * 2;
      const unsigned long long a = a_desc0 + (d_stage * T::d_floats + (yl * W4 + q0) * M * 4) / 4;
      const unsigned long long b = b_desc0 + (stage * T::x_floats + (q0 * T::quad_rows + (yl + ky) * NC) * 4) / 4;
      wgmma_tf32<NC>(acc, a, b);
    }
    wgmma_commit();
    if (step + 2 < count) load_dy(d_stage == 0 ? 2 : d_stage - 1, first + step + 2);  // the stage step − 1 read
    cp_async_commit();
    if (step + 1 < count) {
      store_x(stage ^ 1);
      if (step + 2 < count) fetch(first + step + 2);
    }
    {  // beside the tensor cores: the bias gradient from the staged dy
      const float* D = Ds + d_stage * T::d_floats;
#pragma unroll
      for (int q = threadIdx.x / M; q < T::quads; q += NT / M) {
        const float4 v = *reinterpret_cast<const float4*>(D + (q * M + threadIdx.x % M) * 4);
        bsum += (v.x + v.y) + (v.z + v.w);
      }
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    d_stage = d_stage == T::d_stages - 1 ? 0 : d_stage + 1;
  }
  cp_async_wait<0>();

  // Row 16w + g (+ 8) (channel m), column 8j + 2t (+ 1) (kx, c): acc[4j + 2h (+ 1)].
  const int w = threadIdx.x / 32 % 4, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  float* part = partials + std::size_t(blockIdx.x) * T::Splits::E;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float* row = part + (16 * w + g + 8 * h) * 9 * C + ky * NC + 2 * t;
#pragma unroll
    for (int j = 0; j < NC / 8; ++j)
      *reinterpret_cast<float2*>(row + 8 * j) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
  }
  __syncthreads();  // everyone is done reading the staging
  float* red = conv_mma_smem();
  red[threadIdx.x] = bsum;  // the bias gradient: the threads' sums of each channel, in thread order
  __syncthreads();
  if (threadIdx.x < M) {
    float v = red[threadIdx.x];
#pragma unroll
    for (int k = 1; k < NT / M; ++k) v += red[threadIdx.x + k * M];
    part[9 * C * M + threadIdx.x] = v;
  }
}

// The rule's tiles (launch_conv_wgmma_wgrad_auto): 132 blocks, one an SM, where all of them pay (C = 32
// above batch 64); 66 blocks elsewhere, half the partials to write and add up beside the backward data on
// the network's other stream. cifar_bench on an H200, TF32, one call, alternating, twice (s an epoch, 66
// for C = 64 and for C = 32 up to batch 64, against 132 throughout): vgg 64 0.1173, 0.1172 against 0.1184,
// 0.1185; vgg 256 0.0699, 0.0699 against 0.0696, 0.0694; strided 256 0.0627, 0.0627 against 0.0646,
// 0.0646; strided 64 0.1088 either way. 66 for C = 32 at 256 too: vgg 0.0704 against 0.0690.
template <class G>
using ConvWgmmaWgradWide = ConvWgmmaWgradTile<G>;
template <class G>
using ConvWgmmaWgradHalf = ConvWgmmaWgradTile<G, 64, 66>;

template <class G>
constexpr std::size_t conv_wgmma_wgrad_workspace_floats(int max_batch) {
  if constexpr (!conv_wgmma_wgrad_fits<G>()) return 0;
  else return ConvWgmmaWgradWide<G>::Splits::workspace_floats(max_batch);  // (more splits than the half's)
}

// Stage 1 into `partials` (T::Splits::workspace_floats(batch) floats), then the splits' sum into dw and db
// in dW's order; both launched dependent.
template <class G, class T = ConvWgmmaWgradWide<G>>
void launch_conv_wgmma_wgrad(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                             float* db, int batch) {
  launch_conv_patch_wgrad_kernel<G, T, kernel_conv_wgmma_wgrad<G, T>, WgmmaWgradColumn<G::C>>(stream, x, dy, partials,
                                                                                            dw, db, batch);
}

// The rule's tile for this layer and batch (see ConvWgmmaWgradHalf).
template <class G>
void launch_conv_wgmma_wgrad_auto(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                                  float* db, int batch) {
  if (G::C == 64 || batch <= 64)
    launch_conv_wgmma_wgrad<G, ConvWgmmaWgradHalf<G>>(stream, x, dy, partials, dw, db, batch);
  else
    launch_conv_wgmma_wgrad<G, ConvWgmmaWgradWide<G>>(stream, x, dy, partials, dw, db, batch);
}

// --- The rule ----------------------------------------------------------------------------------------------
// In a context whose network runs its wgmma layers on wgmma (CudaContext::wgmma_weights set: sm_90a device
// code on a Hopper GPU, TF32 math), 16 or more columns, and C = 32 at every batch, C = 64 from batch 128:
// conv_bench-style runs on an H200 (scratch, twenty-sixth stop, µs at batch 64 / 256, against the
// mma.sync patch kernel): 32→64 @16 10.8 / 21.1 against 12.1 / 25.4; 64→64 @16 18.4 / 35.0 against
// 16.6 / 42.0; 64→64 @8 10.5 / 18.0 against 10.4 / 16.6.
template <class G>
bool conv_wgmma_wgrad_chosen(int batch) {
  return conv_wgmma_wgrad_fits<G>() && G::W >= 16 && (G::C == 32 || batch >= 128);
}

// The weight gradient of layer G on the wgmma kernel, where the rule takes it (ctx.workspace holds
// conv_wgmma_wgrad_workspace_floats<G>(batch) floats); false, having launched nothing, elsewhere.
template <class G>
bool launch_conv_wgmma_wgrad_rule(const CudaContext& ctx, const float* x, const float* dy, float* dw, float* db,
                                  int batch) {
  if constexpr (!conv_wgmma_wgrad_fits<G>()) return false;
  else {
    if (!ctx.wgmma_weights || !conv_wgmma_wgrad_chosen<G>(batch) || !conv_patch_wgrad_aligned(x, dy)) return false;
    launch_conv_wgmma_wgrad_auto<G>(ctx.stream, x, dy, ctx.workspace, dw, db, batch);
    return true;
  }
}

}  // namespace ctnn::kernels
