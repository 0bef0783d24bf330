#pragma once
// Dense on the device. Forward through one cuBLASLt matmul with the bias (and, for forward_relu, ReLU)
// in its epilogue (dense_lt.cuh), or, where the context has no cuBLASLt handle or cuBLASLt no
// algorithm, through cublasSgemm after a bias fill kernel (beta = 1); long inputs with few outputs
// split the reduction over I (DenseSplitK below: a strided-batched product into the workspace, then
// one kernel that adds the chunks, the bias and the ReLU in a fixed order). The input gradient through
// cuBLAS. FP32 unless the context's math is TF32 (the handle's math mode, ctx.math). The weight and
// bias gradients by default through ctnn's own two-stage reduction (kernel_dense_backward_weights +
// sum_partials): deterministic by construction, and on an H100 for LeNet-5's three layers at batch
// 64, 256 and 1024 as fast as cuBLAS's GEMM + column sums or faster, except fc1 at 1024 (11.2 vs
// 10.7 µs); cuBLAS picked a 30 µs kernel for fc3's 84 × 10 × 256 dW (6.5 µs here). Layers of 2^18
// weights or more take cuBLAS's GEMM at batches of several reduction chunks (backward below).
// DenseGrad::cublas selects the cuBLAS path. With Math::tf32 a large layer's weight gradient (and at
// large batches its input gradient) runs on dense_mma.cuh's tensor-core kernels instead (on_tensor_cores
// below). The handle must already be bound to ctx.stream (the network driver calls cublasSetStream).
//
// Row-major arrays seen by column-major cuBLAS: a row-major r × c matrix is a column-major c × r
// matrix with leading dimension c, i.e. its transpose. With W [N][I], x [B][I], y [B][N]:
//   Wc  = W  as column-major I × N (ld I),   Wc(i, n) = W[n][i]
//   Xc  = x  as column-major I × B (ld I),   Xc(i, b) = x[b][i]
//   Yc  = y  as column-major N × B (ld N),   Yc(n, b) = y[b][n]   (dy alike)
//   forward   Yc  (N × B) = Wcᵀ · Xc        -> gemm(T, N, m=N, n=B, k=I, A=W ld I, B=x ld I, C=y ld N)
//   weights   dWc (I × N) = Xc · dYcᵀ       -> gemm(N, T, m=I, n=N, k=B, A=x ld I, B=dy ld N, C=dW ld I)
//             (dWc(i, n) = Σ_b x[b][i]·dy[b][n] = dW[n][i]: the row-major [N][I] gradient)
//   data      dXc (I × B) = Wc · dYc        -> gemm(N, N, m=I, n=B, k=N, A=W ld I, B=dy ld N, C=dx ld I)
#include <cstddef>

#include "../core/cuda_context.hpp"
#include "../layers/activation.hpp"
#include "../layers/dense.hpp"
#include "dense_lt.cuh"
#include "dense_mma.cuh"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn {

// How Dense computes dW and db (see above).
enum class DenseGrad { reduction, cublas };

namespace kernels {

inline constexpr int dense_threads = 256;

// y[b][n] = bias[n], before the forward GEMM accumulates W·x onto it (beta = 1).
template <int N>
__global__ void __launch_bounds__(dense_threads)
kernel_dense_fill_bias(const float* __restrict__ bias,  // [N]
                       float* __restrict__ y,           // [batch][N]
                       std::size_t count)               // batch·N
{
  // Preconditions
  static_assert(N > 0, "at least one unit");
  const std::size_t i = std::size_t(blockIdx.x) * dense_threads + threadIdx.x;
  if (i < count) y[i] = bias[i % N];
}

// y = relu(y) in place: forward_relu's ReLU where cuBLASLt cannot apply it.
template <int N>
__global__ void __launch_bounds__(dense_threads)
kernel_dense_relu_in_place(float* y,           // [batch][N]
                           std::size_t count)  // batch·N
{
  const std::size_t i = std::size_t(blockIdx.x) * dense_threads + threadIdx.x;
  if (i < count) y[i] = relu_fn::apply(y[i]);
}

// Forward split-K. cuBLASLt without a workspace (dense_lt.cuh) runs a product as one kernel whose blocks
// each own output tiles, so a long input with few outputs leaves most SMs idle: a CIFAR head's 4096 ->
// 256 at batch 256 ran 64 blocks for 100+ µs on an H100. Where the 64×64 output tiles are fewer than
// the SMs (132 on an H100) and I has room, the product runs as `splits` products over equal chunks of I
// (at least 256 inputs each; one cublasSgemmStridedBatched) into the workspace [split][batch][N], and
// kernel_dense_sum_splits writes y = act(bias + chunk 0 + chunk 1 + ...): deterministic.
template <int N, int I>
struct DenseSplitK {
  static constexpr int min_chunk = 256, max_splits = 16, sms = 132;
  static constexpr int splits(int batch) {
    const long long tiles = (long long)ceil_div(N, 64) * ceil_div(batch > 0 ? batch : 1, 64);
    if (tiles >= sms || I < 2 * min_chunk) return 1;
    const int want = int(min_of<long long>(min_of(I / min_chunk, max_splits), ceil_div<long long>(2 * sms, tiles)));
    for (int s = want; s > 1; --s)
      if (I % s == 0 && (I / s) % 4 == 0) return s;  // equal chunks, 16-byte aligned
    return 1;
  }
  static constexpr std::size_t floats(int batch) {
    const int s = splits(batch);
    return s > 1 ? std::size_t(s) * std::size_t(batch) * N : 0;
  }
  // Largest need over the batches up to max_batch (only batches under sms·64 output rows ever split).
  static constexpr std::size_t workspace_floats(int max_batch) {
    std::size_t m = 0;
    for (int b = 1; b <= min_of(max_batch, sms * 64); ++b) m = max_of(m, floats(b));
    return m;
  }
};

template <int N, bool Relu>
__global__ void __launch_bounds__(dense_threads)
kernel_dense_sum_splits(const float* __restrict__ partials,  // [splits][count]
                        const float* __restrict__ bias,      // [N]
                        float* __restrict__ y,               // [batch][N]
                        int splits, std::size_t count)       // count = batch·N
{
  const std::size_t i = std::size_t(blockIdx.x) * dense_threads + threadIdx.x;
  if (i >= count) return;
  float v = bias[i % N];
  for (int s = 0; s < splits; ++s) v += partials[std::size_t(s) * count + i];
  y[i] = Relu ? relu_fn::apply(v) : v;
}

// dW [N][I] and db [N], stage 1 of 2: with the bias as one more input column that is all ones
// (k = I), block (kt, nt, chunk) sums x[b][k]·dy[b][n] over the `rows` samples of its chunk for its
// `threads` columns k (one per thread, coalesced loads of x) and `tn` rows n (dy staged in shared
// memory, read as broadcasts). With one chunk it writes dW and db directly; otherwise partials
// [chunk][E] (dW then db, as for Conv) that sum_partials adds in a fixed order.
template <int N, int I>
struct DenseWgrad {
  static constexpr int threads = 128;
  static constexpr int kcols = I + 1;
  static constexpr int k_tiles = ceil_div(kcols, threads);
  static constexpr int tn = ceil_div(N, ceil_div(N, 8));  // rows per thread: at most 8, balanced
  static constexpr int n_tiles = ceil_div(N, tn);
  static constexpr int rows = 64;                         // samples per chunk
  static constexpr int E = N * kcols;
  static constexpr int chunks(int batch) { return ceil_div(batch > 0 ? batch : 1, rows); }
  static constexpr std::size_t workspace_floats(int max_batch) {
    return chunks(max_batch) > 1 ? std::size_t(chunks(max_batch)) * E : 0;
  }
};

// The weight-gradient step shared by kernel_dense_backward_weights and the dense chain's
// (dense_chain.cuh): stage rows b0.. b0 + count of dy's columns n0 .. n0 + TN into dy_s [rows][TN]
// (zeros past the batch and past N; threads `threads`), ...
template <int N, int TN>
__device__ __forceinline__ void stage_dy_rows(const float* __restrict__ dy, float* dy_s, int rows, int threads, int b0,
                                              int count, int n0) {
  for (int e = threadIdx.x; e < rows * TN; e += threads) {
    const int r = e / TN, j = e % TN;
    dy_s[e] = (r < count && n0 + j < N) ? dy[std::size_t(b0 + r) * N + n0 + j] : 0.f;
  }
}
// ... then, after a barrier, column k's sums acc[j] = Σ_r x[b0 + r][k] · dy_s[r][j] over the count rows,
// with the bias as one more input column that is all ones (k = I).
template <int I, int TN>
__device__ __forceinline__ void dense_wgrad_column(const float* __restrict__ x, const float* dy_s, int b0, int count,
                                                   int k, float (&acc)[TN]) {
#pragma unroll
  for (int j = 0; j < TN; ++j) acc[j] = 0.f;
  const float* xk = x + std::size_t(b0) * I + k;
  // 16 rows' loads of x in flight (8 before; the same sums). LeNet-5's epochs on an H100 with 16: 1%
  // shorter at batch 64; with 32 its chain weight gradient took 5.6 us instead of 6.1 but the epochs
  // were no shorter (2026-11-27).
#pragma unroll 16
  for (int r = 0; r < count; ++r) {
    const float v = k < I ? xk[std::size_t(r) * I] : 1.f;
    float d[TN];
    load_floats(dy_s + r * TN, d);
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[j] = fmaf(v, d[j], acc[j]);
  }
}

template <int N, int I>
__global__ void __launch_bounds__(DenseWgrad<N, I>::threads)
kernel_dense_backward_weights(const float* __restrict__ x,   // [batch][I]
                              const float* __restrict__ dy,  // [batch][N]
                              float* __restrict__ partials,  // [gridDim.z][E], used when gridDim.z > 1
                              float* __restrict__ dw,        // [N][I], written when gridDim.z == 1
                              float* __restrict__ db,        // [N], likewise
                              int batch)
{
  using Cfg = DenseWgrad<N, I>;
  constexpr int TN = Cfg::tn, ROWS = Cfg::rows;
  // Preconditions
  static_assert(N > 0 && I > 0, "at least one unit and one input");
  static_assert(TN >= 1 && TN <= 8 && Cfg::n_tiles * TN >= N, "row tiles cover N");

  __shared__ __align__(16) float dy_s[ROWS * TN];  // (ROWS, TN)
  const int k = int(blockIdx.x) * Cfg::threads + threadIdx.x;
  const int n0 = int(blockIdx.y) * TN, b0 = int(blockIdx.z) * ROWS;
  const int count = min_of(ROWS, batch - b0);
  stage_dy_rows<N, TN>(dy, dy_s, ROWS, Cfg::threads, b0, count, n0);
  __syncthreads();
  if (k > I) return;  // no barrier follows

  float acc[TN];
  dense_wgrad_column<I>(x, dy_s, b0, count, k, acc);

  const bool direct = gridDim.z == 1;
  float* out_w = direct ? dw : partials + std::size_t(blockIdx.z) * Cfg::E;  // [N][I]
  float* out_b = direct ? db : partials + std::size_t(blockIdx.z) * Cfg::E + N * I;  // [N]
#pragma unroll
  for (int j = 0; j < TN; ++j) {
    const int n = n0 + j;
    if (n >= N) continue;
    if (k < I) out_w[n * I + k] = acc[j];
    else out_b[n] = acc[j];
  }
}

}  // namespace kernels

template <int N, class In>
struct cuda_layer<Dense<N>, In> {
  using bound = typename Dense<N>::template bind<In>;
  static constexpr int I = bound::I;
  using Wg = kernels::DenseWgrad<N, I>;
  using Split = kernels::DenseSplitK<N, I>;
  // Partials of the dW/db reduction (none when the batch fits one chunk, or for a large layer, whose
  // larger batches take cuBLAS: see backward), or of the split forward.
  static constexpr bool large = std::size_t(N) * I >= dense_large_weights;
  static constexpr std::size_t workspace_floats(int max_batch) {
    return kernels::max_of(large ? 0 : Wg::workspace_floats(max_batch), Split::workspace_floats(max_batch));
  }

  static void forward(const CudaContext& ctx, const float* w, const float* b, const float* x, float* y,
                      int batch) {
    kernels::check_batch(batch, "Dense forward");
    if (forward_split<false>(ctx, w, b, x, y, batch)) return;
    if (kernels::lt_dense_forward(ctx, N, I, batch, w, b, x, y, kernels::DenseEpilogue::bias)) return;
    forward_sgemm(ctx, w, b, x, y, batch);
  }

  // The split-K forward where DenseSplitK splits the batch and the context has the handle and the
  // workspace for it (a network always does; a caller's own context may not, and then gets the
  // one-kernel product instead). Returns whether it ran.
  template <bool Relu>
  static bool forward_split(const CudaContext& ctx, const float* w, const float* b, const float* x, float* y,
                            int batch) {
    const int splits = Split::splits(batch);
    if (splits == 1 || !ctx.blas || !ctx.workspace || ctx.workspace_floats < Split::floats(batch)) return false;
    const float one = 1.f, zero = 0.f;
    const int chunk = I / splits;
    CTNN_CUBLAS_CHECK(cublasSgemmStridedBatched(ctx.blas, CUBLAS_OP_T, CUBLAS_OP_N, N, batch, chunk, &one, w, I,
                                                chunk, x, I, chunk, &zero, ctx.workspace, N,
                                                (long long)batch * N, splits));
    const std::size_t count = std::size_t(batch) * N;
    kernels::kernel_dense_sum_splits<N, Relu><<<kernels::grid_for(count, kernels::dense_threads),
                                                 kernels::dense_threads, 0, ctx.stream>>>(ctx.workspace, b, y,
                                                                                          splits, count);
    CTNN_CHECK_LAUNCH();
    return true;
  }

  // y = relu(W·x + b): the Dense followed by ReLU, without the Dense's own output.
  static void forward_relu(const CudaContext& ctx, const float* w, const float* b, const float* x, float* y,
                           int batch) {
    kernels::check_batch(batch, "Dense forward");
    if (forward_split<true>(ctx, w, b, x, y, batch)) return;
    if (kernels::lt_dense_forward(ctx, N, I, batch, w, b, x, y, kernels::DenseEpilogue::relu_bias)) return;
    forward_sgemm(ctx, w, b, x, y, batch);
    const std::size_t count = std::size_t(batch) * N;
    kernels::kernel_dense_relu_in_place<N><<<kernels::grid_for(count, kernels::dense_threads), kernels::dense_threads,
                                             0, ctx.stream>>>(y, count);
    CTNN_CHECK_LAUNCH();
  }

  // The way without cuBLASLt: a bias fill kernel, then the product accumulated onto it.
  static void forward_sgemm(const CudaContext& ctx, const float* w, const float* b, const float* x, float* y,
                            int batch) {
    const std::size_t count = std::size_t(batch) * N;
    kernels::kernel_dense_fill_bias<N><<<kernels::grid_for(count, kernels::dense_threads),
                                         kernels::dense_threads, 0, ctx.stream>>>(b, y, count);
    CTNN_CHECK_LAUNCH();
    const float one = 1.f;
    CTNN_CUBLAS_CHECK(cublasSgemm(ctx.blas, CUBLAS_OP_T, CUBLAS_OP_N, N, batch, I, &one, w, I, x, I, &one,
                                  y, N));
  }

  template <DenseGrad How>
  static void backward_with(const CudaContext& ctx, const float* w, const float* x, const float*,
                            const float* dy, float* dx, float* dw, float* db, int batch) {
    kernels::check_batch(batch, "Dense backward");
    weights_with<How>(ctx, x, dy, dw, db, batch);
    if (dx) backward_data(ctx, w, dy, dx, batch);
  }

  // dW and db, one way or the other (see backward).
  template <DenseGrad How>
  static void weights_with(const CudaContext& ctx, const float* x, const float* dy, float* dw, float* db, int batch) {
    if constexpr (How == DenseGrad::reduction) {
      const int chunks = Wg::chunks(batch);
      if (chunks > 1) kernels::check_workspace(ctx, std::size_t(chunks) * Wg::E, "Dense backward", batch);
      const dim3 grid(Wg::k_tiles, Wg::n_tiles, unsigned(chunks));
      kernels::kernel_dense_backward_weights<N, I>
          <<<grid, Wg::threads, 0, ctx.stream>>>(x, dy, ctx.workspace, dw, db, batch);
      CTNN_CHECK_LAUNCH();
      if (chunks > 1) kernels::sum_partials(ctx.stream, ctx.workspace, chunks, Wg::E, N * I, dw, db);
    } else {
      const float one = 1.f, zero = 0.f;
      CTNN_CUBLAS_CHECK(cublasSgemm(ctx.blas, CUBLAS_OP_N, CUBLAS_OP_T, I, N, batch, &one, x, I, dy, N,
                                    &zero, dw, I));
      // db: column sums of dy [batch][N], the same fixed-order reduction as the partials of stage 2.
      kernels::sum_partials(ctx.stream, dy, batch, N, N, db, nullptr);
    }
  }

  // The rule: ctnn's reduction for small layers (LeNet-5's: as fast as cuBLAS or faster, above) and for
  // batches of one chunk, cuBLAS's GEMM for large layers at larger batches, where the reduction's
  // chunks and their sum cost more (a CIFAR head, 4096 -> 256, on an H100: vgg epochs at batch 256
  // 2.3% faster; at batch 64, one chunk, the same).
  static bool weights_use_blas(int batch) { return large && Wg::chunks(batch) > 1; }
  // With Math::tf32 a large layer with 16-byte rows takes ctnn's tensor-core kernels (dense_mma.cuh) for
  // its weight gradient (no cuBLAS, so it runs on the network's second stream at every batch) and, at
  // batches where they win, its data gradient. A CIFAR head (4096 -> 256) on an H200, vgg's TF32 epochs:
  // 1.4% shorter at batch 256, the same at 64. They decline unaligned arrays (never a network's: its
  // arena aligns every slot), which then take the FP32 rule's way.
  static constexpr bool mma_fits = large && kernels::dense_mma_fits<N, I>;
  static bool on_tensor_cores(Math math) { return mma_fits && math == Math::tf32; }
  static void backward(const CudaContext& ctx, const float* w, const float* x, const float*, const float* dy,
                       float* dx, float* dw, float* db, int batch) {
    backward_weights(ctx, x, dy, dw, db, batch);
    if (dx) backward_data(ctx, w, dy, dx, batch);
  }

  // The two halves of backward (a network runs the weights on a second stream, where the rule's way
  // needs no cuBLAS: weights_use_blas false, or on_tensor_cores): dW and db by the rule; the input
  // gradient dx (cuBLAS, or the tensor-core kernel).
  static void backward_weights(const CudaContext& ctx, const float* x, const float* dy, float* dw, float* db,
                               int batch) {
    kernels::check_batch(batch, "Dense backward");
    if constexpr (mma_fits)  // (nothing instantiated for the others: LeNet-5's compile time)
      if (on_tensor_cores(ctx.math) && kernels::launch_dense_wgrad_mma<N, I>(ctx.stream, x, dy, dw, db, batch)) return;
    if (weights_use_blas(batch)) weights_with<DenseGrad::cublas>(ctx, x, dy, dw, db, batch);
    else weights_with<DenseGrad::reduction>(ctx, x, dy, dw, db, batch);
  }
  static void backward_data(const CudaContext& ctx, const float* w, const float* dy, float* dx, int batch) {
    kernels::check_batch(batch, "Dense backward");
    if constexpr (mma_fits)
      if (on_tensor_cores(ctx.math) && kernels::dense_mma_dgrad_wins<I>(batch) &&
          kernels::launch_dense_dgrad_mma<N, I>(ctx.stream, w, dy, dx, batch))
        return;
    const float one = 1.f, zero = 0.f;
    CTNN_CUBLAS_CHECK(cublasSgemm(ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, I, batch, N, &one, w, I, dy, N,
                                  &zero, dx, I));
  }
};

}  // namespace ctnn
