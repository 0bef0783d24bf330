#pragma once
// Dense forward as one cuBLASLt matmul whose epilogue adds the bias, and applies ReLU when asked:
// y [batch][N] = act(x [batch][I] · Wᵀ + b) with no bias-fill kernel before the product and no
// activation kernel after it (issue 9: bias and activation as epilogues of the dense kernel).
//
// Layouts as in dense.cuh: with column-major matrices, D (N × batch, ld N) = Wcᵀ (I × N, ld I,
// transposed) · Xc (I × batch, ld I); the bias has D's row count, N, and is broadcast over its
// columns. cuBLASLt's heuristic is asked once per (shape, batch, math, epilogue, pointer alignment)
// and its answer kept with the descriptors in a thread-local cache: the heuristic costs host time that
// an eager forward should not pay on every call. No workspace and no split-K reduction is allowed, so
// each problem always runs the same single kernel: results are reproducible bit for bit.
#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "../core/cuda_context.hpp"

namespace ctnn {
namespace kernels {

enum class DenseEpilogue { bias, relu_bias };

namespace detail {

// The descriptors of one problem and the algorithm the heuristic chose for it.
struct LtDensePlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo{};
  LtDensePlan() = default;
  LtDensePlan(const LtDensePlan&) = delete;
  LtDensePlan& operator=(const LtDensePlan&) = delete;
  ~LtDensePlan() {
    if (y) cublasLtMatrixLayoutDestroy(y);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (w) cublasLtMatrixLayoutDestroy(w);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// The largest power of two (at most 256) dividing every address: the alignment the algorithm may assume.
inline std::uint32_t common_alignment(const void* a, const void* b, const void* c, const void* d) {
  const std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) |
                              reinterpret_cast<std::uintptr_t>(c) | reinterpret_cast<std::uintptr_t>(d) | 256u;
  return std::uint32_t(bits & (~bits + 1));
}

// The plan for the problem, made on first use; null when cuBLASLt offers no algorithm for it.
inline const LtDensePlan* lt_dense_plan(cublasLtHandle_t lt, int n, int i, int batch, Math math,
                                        DenseEpilogue epilogue, std::uint32_t align) {
  int device = 0;
  CTNN_CUDA_CHECK(cudaGetDevice(&device));
  // (The algorithm depends on the device, not on the handle.)
  using Key = std::tuple<int, int, int, int, int, int, std::uint32_t>;
  thread_local std::map<Key, std::unique_ptr<LtDensePlan>> cache;
  const Key key{device, n, i, batch, int(math), int(epilogue), align};
  if (const auto at = cache.find(key); at != cache.end()) return at->second.get();

  auto p = std::make_unique<LtDensePlan>();
  const cublasComputeType_t compute = math == Math::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CTNN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, compute, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  const cublasLtEpilogue_t epi = epilogue == DenseEpilogue::relu_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  CTNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
  CTNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
  CTNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  CTNN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->w, CUDA_R_32F, std::uint64_t(i), std::uint64_t(n), i));
  CTNN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->x, CUDA_R_32F, std::uint64_t(i), std::uint64_t(batch), i));
  CTNN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->y, CUDA_R_32F, std::uint64_t(n), std::uint64_t(batch), n));

  cublasLtMatmulPreference_t pref = nullptr;
  CTNN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t no_workspace = 0;
  const std::uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &no_workspace, sizeof no_workspace);
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction,
                                                  sizeof no_reduction);
  for (const auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (status == CUBLAS_STATUS_SUCCESS) status = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align);
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->w, p->x, p->y, p->y, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // No algorithm (CUBLAS_STATUS_NOT_SUPPORTED, or none found): remembered as null, the caller falls back.
  if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED) CTNN_CUBLAS_CHECK(status);
  if (status != CUBLAS_STATUS_SUCCESS || found < 1) p.reset();
  else p->algo = result.algo;
  return cache.emplace(key, std::move(p)).first->second.get();
}

}  // namespace detail

// y = act(x·Wᵀ + b) for `batch` rows of I inputs and N outputs, enqueued on ctx.stream through
// ctx.blas_lt; false (nothing enqueued) when the context has no cuBLASLt handle or cuBLASLt has no
// algorithm for the problem, so that the caller computes it another way.
inline bool lt_dense_forward(const CudaContext& ctx, int n, int i, int batch, const float* w, const float* b,
                             const float* x, float* y, DenseEpilogue epilogue) {
  if (ctx.blas_lt == nullptr || batch < 1) return false;
  const detail::LtDensePlan* p = detail::lt_dense_plan(ctx.blas_lt, n, i, batch, ctx.math, epilogue,
                                                       detail::common_alignment(w, b, x, y));
  if (p == nullptr) return false;
  // The bias pointer is set on each call; the descriptor is the cache's, used by this thread only.
  CTNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b));
  const float one = 1.f, zero = 0.f;
  CTNN_CUBLAS_CHECK(cublasLtMatmul(ctx.blas_lt, p->op, &one, w, p->w, x, p->x, &zero, y, p->y, y, p->y, &p->algo,
                                   nullptr, 0, ctx.stream));
  return true;
}

}  // namespace kernels
}  // namespace ctnn
