#pragma once
// TF32 convolution on Hopper's warpgroup tensor-core instruction (wgmma.mma_async, sm_90a): the
// stride-1 "same" problems of conv_patch.cuh (forward; backward data with the window flipped) and the
// forward of stride-2 3×3 layers (ConvWgmmaFwdS2: the patch staged by column parity), with both operands
// read by the tensor cores straight from shared memory.
//
// Why: conv_patch.cuh's mma.sync kernels spend their issue slots on the fragment loads (a shared load
// per operand element and lane: MIO throttle is their first stall), and mma.sync itself tops out near
// 60% of the TF32 peak on an H200 (docs/conv_kernels.md). wgmma reads its operands from shared memory
// through descriptors: no loads, no fragments, 64 rows a warpgroup.
//
// The GEMM of one filter tap: D (pixels × M channels) += A (pixels × 8 source channels) · B (8 × M).
// wgmma wants TF32 operands K-major (the reduced channels contiguous, in 16-byte "core matrices" of
// 8 rows × 4 channels), so
//   A, the patch, is staged channel-innermost: [chunk of 4 channels][patch row][column][4], L = W + 2
//     columns (a zero column either side). x is NCHW (a pixel's channels lie a plane apart): a thread
//     loads 4 columns of 4 channels (four 16-byte loads), transposes them in registers and stores the 4
//     pixels (four 16-byte stores). A 64-row A tile is 8 × 8 output pixels: its core matrices are image
//     rows, L · 16 bytes apart (SBO), the two channel chunks a chunk apart (LBO); a tap (ky, kx) only
//     moves the start address;
//   B, the weights, come from a copy made by kernel_wgmma_weights: [channel step][tap][chunk][M][4],
//     rounded to TF32 (cvt.rna); a step's weights are one contiguous run. A CudaNetwork makes the copies
//     of all its wgmma layers in one launch at the start of each pass (CudaContext::wgmma_weights).
// The patch is not rounded: the tensor cores truncate it to TF32 (as cuBLAS's Hopper TF32 kernels do),
// 2^-10 relative at most, against 2^-11 for conv_patch.cuh's rounding.
//
// Status (twenty-fourth stop, H200): faster than the mma.sync patch kernels on the 16×16 and 8×8 layers
// (64→64 @16, batch 256: 218 against 149 TFLOP/s), not on 32→32 @32 at batch 256 (133 against 138:
// with N = 32 an A tile feeds only 16 clocks of tensor work). Nsight Compute: tensor pipe 27-43%, the
// warps waiting on their own staging (the next step's global loads, the block barrier). In the networks'
// TF32 rule since the twenty-fifth stop (cuda_layer<Conv>: launch_conv_wgmma_rule), where the program
// was built for sm_90a (CMake: ctnn_use_wgmma) and runs on a Hopper GPU. The stride-2 forward since the
// twenty-ninth stop: 64→128 s2 @16 at batch 256 170 against 83 TFLOP/s. docs/conv_kernels.md.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "../core/cuda_context.hpp"
#include "conv_patch.cuh"

namespace ctnn::kernels {

// Whether this compilation pass has wgmma (sm_90a); the kernels trap elsewhere.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CTNN_DEVICE_WGMMA 1
#else
#define CTNN_DEVICE_WGMMA 0
#endif

template <int = 0>  // a template: a header's functions must not be defined once per translation unit
__global__ void kernel_wgmma_probe(int* has) {
  *has = CTNN_DEVICE_WGMMA;
}

// Whether this program's device code for the current device has wgmma (it was compiled for sm_90a and
// the device is a Hopper): the kernels below trap otherwise. One small launch and a copy each call.
inline bool conv_wgmma_available() {
  int* flag = nullptr;
  if (cudaMalloc(&flag, sizeof(int)) != cudaSuccess) return (void)cudaGetLastError(), false;
  int has = 0;
  kernel_wgmma_probe<><<<1, 1>>>(flag);
  const bool ran = cudaGetLastError() == cudaSuccess &&
                   cudaMemcpy(&has, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(flag);
  (void)cudaGetLastError();  // no image for this device: not an error of the caller's
  return ran && has == 1;
}

// --- wgmma primitives -----------------------------------------------------------------------------------
// Shared-memory matrix descriptor, no swizzle: start address, LBO (between the two core matrices along
// k) and SBO (between core matrices 8 rows apart), all in 16-byte units.
__device__ __forceinline__ unsigned long long wgmma_desc(const float* smem, unsigned lbo_bytes, unsigned sbo_bytes) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (unsigned long long)((lbo_bytes >> 4) & 0x3FFFu) << 16 |
         (unsigned long long)((sbo_bytes >> 4) & 0x3FFFu) << 32;
}

__device__ __forceinline__ void wgmma_fence() {
#if CTNN_DEVICE_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if CTNN_DEVICE_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if CTNN_DEVICE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses of an accumulator across the asynchronous wgmma.
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define CTNN_WGMMA_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                         "+f"(d[i + 6]), "+f"(d[i + 7])
// d (64 × N, FP32, the wgmma accumulator layout) += A (64 × 8) · B (8 × N), both TF32 from shared memory.
template <int N>
__device__ __forceinline__ void wgmma_tf32(float (&d)[N / 2], unsigned long long a, unsigned long long b) {
  static_assert(N == 32 || N == 64 || N == 96 || N == 128 || N == 192, "the widths the kernels use");
#if CTNN_DEVICE_WGMMA
  if constexpr (N == 32)
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, 1, 1, 1;\n"
        : CTNN_WGMMA_D8(0), CTNN_WGMMA_D8(8)
        : "l"(a), "l"(b));
  else if constexpr (N == 64)
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1;\n"
        : CTNN_WGMMA_D8(0), CTNN_WGMMA_D8(8), CTNN_WGMMA_D8(16), CTNN_WGMMA_D8(24)
        : "l"(a), "l"(b));
  else if constexpr (N == 96)
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n96k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49, 1, 1, 1;\n"
        : CTNN_WGMMA_D8(0), CTNN_WGMMA_D8(8), CTNN_WGMMA_D8(16), CTNN_WGMMA_D8(24), CTNN_WGMMA_D8(32),
          CTNN_WGMMA_D8(40)
        : "l"(a), "l"(b));
  else if constexpr (N == 128)
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1;\n"
        : CTNN_WGMMA_D8(0), CTNN_WGMMA_D8(8), CTNN_WGMMA_D8(16), CTNN_WGMMA_D8(24), CTNN_WGMMA_D8(32),
          CTNN_WGMMA_D8(40), CTNN_WGMMA_D8(48), CTNN_WGMMA_D8(56)
        : "l"(a), "l"(b));
  else if constexpr (N == 192)
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n192k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, 1, 1, 1;\n"
        : CTNN_WGMMA_D8(0), CTNN_WGMMA_D8(8), CTNN_WGMMA_D8(16), CTNN_WGMMA_D8(24), CTNN_WGMMA_D8(32),
          CTNN_WGMMA_D8(40), CTNN_WGMMA_D8(48), CTNN_WGMMA_D8(56), CTNN_WGMMA_D8(64), CTNN_WGMMA_D8(72),
          CTNN_WGMMA_D8(80), CTNN_WGMMA_D8(88)
        : "l"(a), "l"(b));
#else
  (void)d, (void)a, (void)b;
  __trap();
#endif
}
#undef CTNN_WGMMA_D8

// Orders this thread's generic-proxy writes of shared memory (cp.async, stores) before the tensor
// cores' reads of it (the async proxy).
__device__ __forceinline__ void fence_proxy_async_smem() {
#if CTNN_DEVICE_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cp_async_f32(float* dst_smem, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(dst_smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
#else
  *dst_smem = *src;
#endif
}

// --- The weights' copies ----------------------------------------------------------------------------------
// wt [SC / CK][KK][CK / 4][M][4] from w, channel c = CK·step + 4·chunk + c4: forward (dgrad false)
// w [M][SC][KK], element (m, c, tap) = w[m][c][tap]; backward data w [SC][M][KK] read flipped,
// (m, c, tap) = w[c][m][KK − 1 − tap]. Rounded to TF32 (to nearest, ties away) so that the tensor cores'
// truncation keeps them. A network makes all its layers' copies in one launch: one job a copy (M = 0:
// none, a stride-2 layer's backward-data copy).
struct WgmmaWeightsJob {
  const float* w;
  float* wt;
  int M, SC, CK;
  bool dgrad;
};
template <int N>
struct WgmmaWeightsJobs {
  WgmmaWeightsJob job[N];
};

// blockIdx.y: the job; the blocks of x stride over its M · SC · 9 floats.
template <int N>
__global__ void kernel_wgmma_weights(const WgmmaWeightsJobs<N> jobs) {
  constexpr int KK = 9;
  wait_for_prior_grids();
  const WgmmaWeightsJob& j = jobs.job[blockIdx.y];
  const int M = j.M, total = M * j.SC * KK;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c4 = i % 4, m = i / 4 % M, chunk = i / (4 * M) % (j.CK / 4), tap = i / (j.CK * M) % KK,
              s = i / (j.CK * M * KK);
    const int c = j.CK * s + 4 * chunk + c4;
    const float v = j.dgrad ? j.w[(c * M + m) * KK + KK - 1 - tap] : j.w[(m * j.SC + c) * KK + tap];
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    j.wt[i] = __uint_as_float(r);
  }
}

template <int N>
void launch_wgmma_weights(cudaStream_t stream, const WgmmaWeightsJobs<N>& jobs) {
  int most = 0;
  for (const WgmmaWeightsJob& j : jobs.job) most = most > j.M * j.SC * 9 ? most : j.M * j.SC * 9;
  launch_kernel(kernel_wgmma_weights<N>, dim3(ceil_div(most, 256), N), 256, 0, stream, 1, Launch::dependent, jobs);
}

// The copy of weights w into wt for the kernel of problem Pb and tile T.
template <class Pb, class T>
WgmmaWeightsJob wgmma_weights_job(const float* w, float* wt) {
  return {w, wt, Pb::M, Pb::SC, T::CK, Pb::dgrad};
}
template <class Pb, class T>
void launch_wgmma_weights(cudaStream_t stream, const float* w, float* wt) {
  launch_wgmma_weights(stream, WgmmaWeightsJobs<1>{{wgmma_weights_job<Pb, T>(w, wt)}});
}

// --- Tile -------------------------------------------------------------------------------------------------
// Which problems: those of conv_patch_fits with a 3×3 window (P = 1: one zero column each side), whole
// 8-row tiles, M 32 or 64 (one wgmma's width).
template <class G>
constexpr bool conv_wgmma_fits() {
  return conv_patch_fits<G>() && G::K == 3 && G::H % 8 == 0 && (G::Out == 32 || G::Out == 64) &&
         (G::C == 32 || G::C == 64);
}

// The forward of a stride-2 3×3 layer with P = 1 (H, W even; out = y [batch][M][H/2][W/2] from x): output
// row a reads input rows 2a − 1 .. 2a + 1, output column b input columns 2b − 1 .. 2b + 1. The patch is
// staged by column parity: slots 0 .. W/2 of a patch row hold the odd columns −1, 1, .., W − 1 (column −1
// zero), slots W/2 + 1 .. W the even ones 0, 2, .., W − 2. Tap (ky, kx) of 8 neighbouring output pixels
// is then 8 consecutive slots of patch row 2a + ky (kx = 0: from slot b, kx = 1: W/2 + 1 + b, kx = 2:
// b + 1), as a core matrix wants; the next output row is two patch rows on (the descriptor's SBO).
template <class G>
struct ConvWgmmaFwdS2 {
  static constexpr int M = G::Out, SC = G::C, H = G::H, W = G::W, S = 2;
  static constexpr bool has_bias = true, dgrad = false;
};
// Which layers: whole 8 × 8 output tiles, 16-byte input rows of at most 64 columns, steps of 8 channels,
// M one or more 64-column tiles (or 32).
template <class G>
constexpr bool conv_wgmma_s2_fits() {
  return G::S == 2 && G::D == 1 && G::K == 3 && G::P == 1 && G::H % 16 == 0 && G::W % 16 == 0 && G::W <= 64 &&
         G::C % 8 == 0 && (G::Out == 32 || G::Out % 64 == 0) && G::Out <= 128;
}

// TH output rows (a multiple of 8) of one sample, BN of the M channels (M / BN blocks a row tile: grid.y);
// WGS warpgroups, each MT 8×8-pixel tiles; CK source channels a step. Two stages: the patch of the next
// step waits in registers (it is transposed on its way to shared memory), the weights' copies fly during
// the current step's wgmmas. Stride S = Pb::S (1, or 2: ConvWgmmaFwdS2's staging by column parity).
template <class Pb, int TH_ = 8, int WGS_ = 2, int CK_ = 8, int BN_ = Pb::M>
struct ConvWgmmaTile {
  static constexpr int S = Pb::S, OH = Pb::H / S, OW = Pb::W / S;  // the output's rows and columns
  static constexpr int TH = TH_, WGS = WGS_, CK = CK_, threads = 128 * WGS, BN = BN_;
  static constexpr int BM = BN;  // launch_conv_patch_kernel's grid.y: M / BN channel tiles
  // Pixel slots of a patch row: stride 1 the columns with a zero column either side, stride 2 the odd
  // then the even columns (ConvWgmmaFwdS2).
  static constexpr int L = S == 1 ? Pb::W + 2 : Pb::W + 1, PR = S * (TH - 1) + 3, KK = 9, chunks = CK / 4;
  static constexpr int tiles = TH / 8 * (OW / 8), MT = tiles / WGS;
  static constexpr int chunk_floats = ceil_div(PR * L * 4, 32) * 32;  // a 4-channel chunk of the patch
  static constexpr int a_floats = chunks * chunk_floats, b_floats = KK * CK * BN;
  static constexpr int smem_bytes = 2 * (a_floats + b_floats) * 4;
  static constexpr int units = chunks * PR * (Pb::W / 4), unit_passes = ceil_div(units, threads);  // 4×4 blocks
  static constexpr int row_tiles = OH / TH, steps = Pb::SC / CK;
  static constexpr int min_blocks = max_of(1, 4 / WGS);
  static_assert(S == 1 || S == 2, "stride 1 or 2");
  static_assert(CK % 8 == 0 && Pb::SC % CK == 0, "whole k8 slices");
  static_assert(TH % 8 == 0 && OH % TH == 0 && OW % 8 == 0 && tiles % WGS == 0, "whole 8×8 tiles, shared evenly");
  static_assert(Pb::M % BN == 0, "whole channel tiles");
  static_assert(smem_bytes <= 227 * 1024, "the shared memory of one block on sm_90");
};

// --- The kernel -------------------------------------------------------------------------------------------
// Block (blockIdx.x = sample · row_tiles + row tile, blockIdx.y = channel tile). out [batch][M][OH][OW]
// from src [batch][SC][H][W] and wt (kernel_wgmma_weights); aux: bias [M] (forward) or the output of the
// activation below (backward data), as conv_patch.cuh's.
template <class Pb, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_wgmma(const float* __restrict__ wt, const float* __restrict__ aux, const float* __restrict__ src,
                  float* __restrict__ out) {
  wait_for_prior_grids();
  constexpr int W = Pb::W, H = Pb::H, L = T::L, PR = T::PR, BN = T::BN, MT = T::MT, NT = T::threads, CK = T::CK;
  constexpr int S = T::S, OW = T::OW, plane = H * W, out_plane = T::OH * OW, W4 = W / 4;
  float* Ps = conv_mma_smem();            // (2, a_floats): the patch, channel-innermost
  float* Ws = Ps + 2 * T::a_floats;       // (2, b_floats): the weights
  const int n = blockIdx.x / T::row_tiles, y0 = (blockIdx.x % T::row_tiles) * T::TH, m0 = blockIdx.y * BN;
  const float* src_n = src + std::size_t(n) * Pb::SC * plane;

  // The zero columns, in both stages (the patch's stores never write them): stride 1 slots 0 and L − 1,
  // stride 2 slot 0 (column −1).
  for (int line = threadIdx.x; line < 2 * T::chunks * PR; line += NT) {
    float* row = Ps + line / PR * T::chunk_floats + line % PR * L * 4;  // stages × chunks are consecutive
    *reinterpret_cast<float4*>(row) = make_float4(0.f, 0.f, 0.f, 0.f);
    if constexpr (S == 1) *reinterpret_cast<float4*>(row + 4 * (L - 1)) = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  // A step's copy is [tap][chunk][M][4]; this block's BN channels of it, [tap][chunk][BN][4]: one
  // contiguous run where BN = M, else a run of BN · 4 floats per (tap, chunk).
  auto load_weights = [&](int stage, int step) {
    float* Wd = Ws + stage * T::b_floats;
    const float* wsrc = wt + std::size_t(step) * (T::b_floats / BN * Pb::M) + 4 * m0;
#pragma unroll
    for (int i = 0; i < ceil_div(T::b_floats / 4, NT); ++i) {
      const int q = threadIdx.x + i * NT;
      if (T::b_floats / 4 % NT == 0 || q < T::b_floats / 4)
        cp_async_f32x4_l1(Wd + 4 * q, wsrc + 4 * (BN == Pb::M ? q : q / BN * Pb::M + q % BN), true);
    }
  };
  // The patch goes through registers, 4 columns × 4 channels a unit (unit u: column quad u % W4, patch
  // row u / W4 % PR, chunk u / (W4·PR)): four 16-byte loads (one per channel), four 16-byte stores
  // (one per pixel: its 4 channels); rows outside the image are stored as zeros.
  float4 patch[T::unit_passes][4];
  auto fetch = [&](int step) {
#pragma unroll
    for (int p = 0; p < T::unit_passes; ++p) {
      const int u = threadIdx.x + p * NT, xq = u % W4, r = u / W4 % PR, chunk = u / (W4 * PR), y = S * y0 - 1 + r;
      const bool in = (T::units % NT == 0 || u < T::units) && y >= 0 && y < H;
      const float* from = src_n + (std::size_t(step) * CK + 4 * chunk) * plane + y * W + 4 * xq;
#pragma unroll
      for (int c4 = 0; c4 < 4; ++c4)
        patch[p][c4] = in ? *reinterpret_cast<const float4*>(from + c4 * plane) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  auto store_patch = [&](int stage) {
#pragma unroll
    for (int p = 0; p < T::unit_passes; ++p) {
      const int u = threadIdx.x + p * NT, xq = u % W4, r = u / W4 % PR, chunk = u / (W4 * PR);
      if (T::units % NT != 0 && u >= T::units) continue;
      float* to = Ps + stage * T::a_floats + chunk * T::chunk_floats + r * L * 4;
      const float4* v = patch[p];
      // The k-th store writes pixel (k + rot) % 4: the eight lanes of a store phase then cover the eight
      // 16-byte bank groups (in order, pixel k of neighbouring quads would hit the same ones). Stride 2:
      // pixels 0, 1 land on odd groups, 2, 3 on even ones (slots below), so on rows of 8 or more quads
      // lanes 4-7 of a phase take the other pair.
      const int rot = S == 1 ? ((xq >> 1) + (r >> 1)) & 3 : W4 >= 8 ? (xq & 4) >> 1 : 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int j = (k + rot) & 3;
        // Column 4·xq + j's slot: stride 1 one on (the zero column), stride 2 by parity (ConvWgmmaFwdS2).
        const int slot = S == 1 ? 4 * xq + 1 + j : (j & 1) ? 2 * xq + (j + 1) / 2 : OW + 1 + 2 * xq + j / 2;
        auto pick = [j](float4 q) { return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w; };
        *reinterpret_cast<float4*>(to + 4 * slot) = make_float4(pick(v[0]), pick(v[1]), pick(v[2]), pick(v[3]));
      }
    }
  };

  // This thread: warpgroup wg, warp w in it, lane (g, t); its tiles wg·MT ..
  const int wg = threadIdx.x / 128, w = threadIdx.x / 32 % 4, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  float acc[MT][BN / 2];
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const float b0 = Pb::has_bias ? aux[m0 + 8 * j + 2 * t] : 0.f, b1 = Pb::has_bias ? aux[m0 + 8 * j + 2 * t + 1] : 0.f;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) acc[mt][4 * j] = acc[mt][4 * j + 2] = b0, acc[mt][4 * j + 1] = acc[mt][4 * j + 3] = b1;
  }

  // Descriptors of stage 0; a stage, a tap, a k8 slice and a tile only move the start (16-byte units).
  const unsigned long long a_desc0 = wgmma_desc(Ps, T::chunk_floats * 4, S * L * 16);
  const unsigned long long b_desc0 = wgmma_desc(Ws, BN * 16, 128);

  load_weights(0, 0);
  cp_async_commit();
  fetch(0);
  for (int step = 0; step < T::steps; ++step) {
    const int stage = step & 1;
    store_patch(stage);
    cp_async_wait<0>();  // this step's weights
    fence_proxy_async_smem();
    __syncthreads();
    if (step + 1 < T::steps) {
      load_weights(stage ^ 1, step + 1);  // the stage step − 1 used: every warpgroup is done with it
      cp_async_commit();
      fetch(step + 1);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) wgmma_fence_operands(acc[mt]);
    wgmma_fence();
#pragma unroll
    for (int tap = 0; tap < 9; ++tap) {
      const int ky = tap / 3, kx = tap % 3;
#pragma unroll
      for (int j = 0; j < CK / 8; ++j)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const int tile = wg * MT + mt, r0 = tile / (OW / 8) * 8, x0 = tile % (OW / 8) * 8;
          const int slot = S == 1 ? x0 + kx : kx == 1 ? OW + 1 + x0 : x0 + kx / 2;
          const unsigned long long a =
              a_desc0 + (stage * T::a_floats + 2 * j * T::chunk_floats + ((S * r0 + ky) * L + slot) * 4) / 4;
          const unsigned long long b = b_desc0 + (stage * T::b_floats + (tap * T::chunks + 2 * j) * BN * 4) / 4;
          wgmma_tf32<BN>(acc[mt], a, b);
        }
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) wgmma_fence_operands(acc[mt]);
  }

  // Row 16w + g (+ 8) of tile mt is output pixel (r0 + 2w (+ 1), x0 + g); column 8j + 2t (+ 1) channel
  // m0 + 8j + 2t (+ 1).
  const std::size_t at_n = std::size_t(n) * Pb::M * out_plane;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int tile = wg * MT + mt, y = y0 + tile / (OW / 8) * 8 + 2 * w, x = tile % (OW / 8) * 8 + g;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int m = m0 + 8 * j + 2 * t + e;
          const std::size_t at = at_n + std::size_t(m) * out_plane + (y + h) * OW + x;
          const float v = acc[mt][4 * j + 2 * h + e];
          if constexpr (std::is_same_v<Fn, identity_fn>) out[at] = v;
          else if constexpr (!Pb::dgrad) out[at] = Fn::apply(v);
          else out[at] = v * Fn::derivative(aux[at]);
        }
  }
}

// The tile measured fastest on an H200 (scratch runs of the twenty-fourth stop): 8 rows, two warpgroups
// on 32-column images, one on narrower ones, 8 channels a step.
template <class Pb>
using ConvWgmmaRule = ConvWgmmaTile<Pb, 8, Pb::W == 32 ? 2 : 1, 8>;
// The stride-2 forward's tiles (scratch runs on an H200, twenty-ninth stop; docs/conv_kernels.md): 8
// output rows and 8 channels a step (the network's weight copies fix CK for every batch); two warpgroups
// on 16-column outputs, one on 8-column ones; all M channels a block, or 64 of them (ConvWgmmaS2Split)
// where that gives fewer than 120 blocks (64→128 @16, batch 64: 6.4 against 8.7 µs; 256: 14.2 against 17.9
// the other way).
template <class G>
using ConvWgmmaS2Rule = ConvWgmmaTile<ConvWgmmaFwdS2<G>, 8, G::W / 2 >= 16 ? 2 : 1, 8>;
template <class G>
using ConvWgmmaS2Split = ConvWgmmaTile<ConvWgmmaFwdS2<G>, 8, G::W / 2 >= 16 ? 2 : 1, 8, 64>;
template <class G>
bool conv_wgmma_s2_split(int batch) {
  return G::Out > 64 && (long long)batch * ConvWgmmaS2Rule<G>::row_tiles < 120;
}

template <class Pb, class T, class Fn = identity_fn>
void launch_conv_wgmma(cudaStream_t stream, const float* wt, const float* aux, const float* src, float* out,
                       int batch) {
  if (!conv_patch_aligned(wt, src, out))
    throw std::invalid_argument("ctnn: Conv (TF32 wgmma kernel): the weights' copy and the source must be 16-byte "
                                "aligned, the output 8-byte aligned");
  launch_conv_patch_kernel<Pb, T, kernel_conv_wgmma<Pb, T, Fn>>(stream, wt, aux, src, out, batch);
}

// --- The rule ----------------------------------------------------------------------------------------------
// Where a layer fits and the context keeps its weights' copies (a network's, CudaNetwork::set_math), every
// batch but those above 128 on 32-column layers: there the mma.sync kernel is as fast (32→32 @32 on an
// H200: batch 64 9.8 against 11.0 µs, batch 256 36.4 against 35.0; docs/conv_kernels.md). The stride-2
// forward at every batch (faster than the mma.sync stride-2 patch kernel at 64 and 256 on both CIFAR
// layers: docs/conv_kernels.md, twenty-ninth stop).
template <class G>
bool conv_wgmma_chosen(int batch) {
  return conv_wgmma_fits<G>() && (G::W != 32 || batch <= 128);
}

// The TF32 copy (forward or backward-data layout) of the `count` weights at w, where ctx keeps one; null
// elsewhere.
inline const float* wgmma_weights_of(const CudaContext& ctx, const float* w, std::size_t count, bool dgrad) {
  const auto at = reinterpret_cast<std::uintptr_t>(w), from = reinterpret_cast<std::uintptr_t>(ctx.wgmma_params);
  if (!ctx.wgmma_weights || at < from || (at - from) % sizeof(float) != 0 ||
      (at - from) / sizeof(float) + count > ctx.wgmma_floats)
    return nullptr;
  return ctx.wgmma_weights + (dgrad ? ctx.wgmma_floats : 0) + (at - from) / sizeof(float);
}

// The forward (out = y, aux = the bias) or backward data (out = dx, aux = the output of the activation Fn
// below) of layer G on the wgmma kernel, where the rule takes it (a stride-2 layer: the forward only);
// false, having launched nothing, elsewhere.
template <class G, bool Dgrad, class Fn = identity_fn>
bool launch_conv_wgmma_rule(const CudaContext& ctx, const float* w, const float* aux, const float* src, float* out,
                            int batch) {
  if constexpr (!Dgrad && conv_wgmma_s2_fits<G>()) {
    const float* wt = wgmma_weights_of(ctx, w, std::size_t(G::Out) * G::C * 9, false);
    if (!wt || !conv_patch_aligned(wt, src, out)) return false;
    if constexpr (G::Out > 64)
      if (conv_wgmma_s2_split<G>(batch)) {
        launch_conv_wgmma<ConvWgmmaFwdS2<G>, ConvWgmmaS2Split<G>, Fn>(ctx.stream, wt, aux, src, out, batch);
        return true;
      }
    launch_conv_wgmma<ConvWgmmaFwdS2<G>, ConvWgmmaS2Rule<G>, Fn>(ctx.stream, wt, aux, src, out, batch);
    return true;
  } else if constexpr (!conv_wgmma_fits<G>()) {
    return false;
  } else {
    using Pb = std::conditional_t<Dgrad, ConvPatchDgrad<G>, ConvPatchFwd<G>>;
    const float* wt = wgmma_weights_of(ctx, w, std::size_t(G::Out) * G::C * 9, Dgrad);
    if (!wt || !conv_wgmma_chosen<G>(batch) || !conv_patch_aligned(wt, src, out)) return false;
    launch_conv_wgmma<Pb, ConvWgmmaRule<Pb>, Fn>(ctx.stream, wt, aux, src, out, batch);
    return true;
  }
}

}  // namespace ctnn::kernels
