// Dense on the device (kernels/dense.cuh: cuBLAS FP32 products, bias and gradient-reduction kernels;
// kernels/dense_lt.cuh: the forward as one cuBLASLt product with the bias, or bias and ReLU, in its
// epilogue) against the host reference Dense::bind<In>::forward/backward on fresh random inputs,
// outputs poisoned first: y (with and without cuBLASLt, with and without ReLU, from 4-byte aligned
// pointers too), dx, dW and db through both ways of computing dW/db (ctnn's reduction, the default,
// and cuBLAS), and second runs that must reproduce the same bits.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <ctnn/kernels/dense.cuh>
#include <ctnn/layers/dense.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

struct Blas {
  cublasHandle_t h = nullptr;
  cublasLtHandle_t lt = nullptr;
  explicit Blas(cudaStream_t s) {
    CTNN_CUBLAS_CHECK(cublasCreate(&h));
    CTNN_CUBLAS_CHECK(cublasSetStream(h, s));
    CTNN_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // FP32, no TF32
    CTNN_CUBLAS_CHECK(cublasLtCreate(&lt));
  }
  ~Blas() {
    cublasLtDestroy(lt);
    cublasDestroy(h);
  }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
};

template <int N, class In>
void test_dense(Tally& t, const char* name, std::initializer_list<int> batches, std::uint64_t seed) {
  using L = Dense<N>;
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  const int max_batch = std::max(batches);
  std::printf("== %s: %d -> %d; workspace %zu floats at batch %d\n", name, B::I, N,
              Dev::workspace_floats(max_batch), max_batch);
  Stream stream;
  Blas blas(stream.s);
  // (A large layer's own workspace leaves out the reduction's partials: its batches of several chunks
  // take cuBLAS. Both paths are checked below, so the buffer holds either.)
  DeviceBuffer<float> ws(std::max(Dev::workspace_floats(max_batch), Dev::Wg::workspace_floats(max_batch)));
  const CudaContext ctx{stream.s, blas.h, ws.ptr, ws.n};
  const std::vector<float> w = random_vector(B::weight_count, seed), b = random_vector(B::bias_count, seed + 1);
  DeviceBuffer<float> d_w(w), d_b(b), d_dw(B::weight_count), d_db(B::bias_count);
  char what[160];
  auto label = [&](int batch, const char* q) {
    std::snprintf(what, sizeof what, "%s batch %d %s", name, batch, q);
    return what;
  };
  for (const int batch : batches) {
    const std::size_t nx = std::size_t(batch) * B::in_size, ny = std::size_t(batch) * N;
    const std::vector<float> x = random_vector(nx, seed + 2 + batch), dy = random_vector(ny, seed + 3 + 5 * batch);
    std::vector<float> y_ref(ny), dx_ref(nx), dw_ref(B::weight_count), db_ref(N);
    B::forward(w.data(), b.data(), x.data(), y_ref.data(), batch);
    B::backward(w.data(), x.data(), y_ref.data(), dy.data(), dx_ref.data(), dw_ref.data(), db_ref.data(), batch);

    DeviceBuffer<float> d_x(x), d_dy(dy), d_y(ny), d_dx(nx);
    std::vector<float> relu_ref(y_ref);
    for (float& v : relu_ref) v = relu_fn::apply(v);
    // The forward into d_y (poisoned first) through a context, with or without ReLU.
    auto forward = [&](const CudaContext& c, bool relu) {
      d_y.poison();
      if (relu) Dev::forward_relu(c, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
      else Dev::forward(c, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
      stream.sync();
      return d_y.download();
    };
    const std::vector<float> y_first = forward(ctx, false);
    const bool split = Dev::Split::splits(batch) > 1;
    t(close_sum(y_first, y_ref, label(batch, split ? "forward (split-K)" : "forward")));
    if (split) {  // deterministic; and with ReLU; and without the workspace (one product instead)
      t(same_bits(forward(ctx, false), y_first, label(batch, "forward (split-K), second run")));
      t(close_sum(forward(ctx, true), relu_ref, label(batch, "forward_relu (split-K)")));
      const CudaContext no_ws{stream.s, blas.h, nullptr, 0};
      t(close_sum(forward(no_ws, false), y_ref, label(batch, "forward without a workspace (unsplit)")));
    }

    // The forward through cuBLASLt (bias epilogue; bias and ReLU), from the buffers' 256-byte aligned
    // pointers and from x and y one float in (4-byte alignment: the plan must not assume more), and
    // without cuBLASLt (forward_relu: the product, then the ReLU kernel).
    const CudaContext lt_ctx{stream.s, blas.h, ws.ptr, ws.n, nullptr, Math::fp32, nullptr, 0, blas.lt};
    std::vector<float> x_shifted(nx + 1);
    std::copy(x.begin(), x.end(), x_shifted.begin() + 1);
    DeviceBuffer<float> d_x1(x_shifted), d_y1(ny + 1);
    for (const bool shifted : {false, true}) {
      const float* xp = shifted ? d_x1.ptr + 1 : d_x.ptr;
      float* yp = shifted ? d_y1.ptr + 1 : d_y.ptr;
      auto result = [&] {
        stream.sync();
        std::vector<float> all = shifted ? d_y1.download() : d_y.download();
        return shifted ? std::vector<float>(all.begin() + 1, all.end()) : all;
      };
      char q[96];
      d_y.poison(), d_y1.poison();
      Dev::forward(lt_ctx, d_w.ptr, d_b.ptr, xp, yp, batch);
      const std::vector<float> y_lt = result();
      std::snprintf(q, sizeof q, "forward, cuBLASLt bias epilogue%s", shifted ? ", 4-byte aligned" : "");
      t(close_sum(y_lt, y_ref, label(batch, q)));
      d_y.poison(), d_y1.poison();
      Dev::forward(lt_ctx, d_w.ptr, d_b.ptr, xp, yp, batch);
      std::snprintf(q, sizeof q, "forward, cuBLASLt bias epilogue%s, second run", shifted ? ", 4-byte aligned" : "");
      t(same_bits(result(), y_lt, label(batch, q)));
      for (const bool lt : {true, false}) {
        d_y.poison(), d_y1.poison();
        Dev::forward_relu(lt ? lt_ctx : ctx, d_w.ptr, d_b.ptr, xp, yp, batch);
        std::snprintf(q, sizeof q, "forward_relu, %s%s", lt ? "cuBLASLt bias+ReLU epilogue" : "cuBLAS + ReLU kernel",
                      shifted ? ", 4-byte aligned" : "");
        t(close_sum(result(), relu_ref, label(batch, q)));
      }
    }

    auto check_backward = [&](auto how, const char* how_name) {
      constexpr DenseGrad How = decltype(how)::value;
      char q[96];
      d_dx.poison(), d_dw.poison(), d_db.poison(), ws.poison();
      Dev::template backward_with<How>(ctx, d_w.ptr, d_x.ptr, d_y.ptr, d_dy.ptr, d_dx.ptr, d_dw.ptr, d_db.ptr,
                                       batch);
      stream.sync();
      const std::vector<float> dx = d_dx.download(), dw = d_dw.download(), db = d_db.download();
      std::snprintf(q, sizeof q, "backward (%s) dx", how_name), t(close_sum(dx, dx_ref, label(batch, q)));
      std::snprintf(q, sizeof q, "backward (%s) dW", how_name), t(close_sum(dw, dw_ref, label(batch, q)));
      std::snprintf(q, sizeof q, "backward (%s) db", how_name), t(close_sum(db, db_ref, label(batch, q)));

      d_dx.poison(), d_dw.poison(), d_db.poison(), ws.poison();
      Dev::template backward_with<How>(ctx, d_w.ptr, d_x.ptr, d_y.ptr, d_dy.ptr, d_dx.ptr, d_dw.ptr, d_db.ptr,
                                       batch);
      stream.sync();
      std::snprintf(q, sizeof q, "backward (%s) dx, second run", how_name);
      t(same_bits(d_dx.download(), dx, label(batch, q)));
      std::snprintf(q, sizeof q, "backward (%s) dW, second run", how_name);
      t(same_bits(d_dw.download(), dw, label(batch, q)));
      std::snprintf(q, sizeof q, "backward (%s) db, second run", how_name);
      t(same_bits(d_db.download(), db, label(batch, q)));
    };
    check_backward(std::integral_constant<DenseGrad, DenseGrad::reduction>{}, "reduction");
    check_backward(std::integral_constant<DenseGrad, DenseGrad::cublas>{}, "cuBLAS");
    {  // the rule (backward), within the layer's own workspace
      const CudaContext own{stream.s, blas.h, ws.ptr, Dev::workspace_floats(max_batch)};
      d_dx.poison(), d_dw.poison(), d_db.poison();
      Dev::backward(own, d_w.ptr, d_x.ptr, d_y.ptr, d_dy.ptr, d_dx.ptr, d_dw.ptr, d_db.ptr, batch);
      stream.sync();
      t(close_sum(d_dx.download(), dx_ref, label(batch, "backward (rule) dx")));
      t(close_sum(d_dw.download(), dw_ref, label(batch, "backward (rule) dW")));
      t(close_sum(d_db.download(), db_ref, label(batch, "backward (rule) db")));
      const std::vector<float> dx = d_dx.download(), dw = d_dw.download(), db = d_db.download();
      // Its two halves apart (a network runs the weights on a second stream): the same bits.
      d_dx.poison(), d_dw.poison(), d_db.poison();
      Dev::backward_weights(own, d_x.ptr, d_dy.ptr, d_dw.ptr, d_db.ptr, batch);
      Dev::backward_data(own, d_w.ptr, d_dy.ptr, d_dx.ptr, batch);
      stream.sync();
      t(same_bits(d_dx.download(), dx, label(batch, "backward_data = backward (rule) dx")));
      t(same_bits(d_dw.download(), dw, label(batch, "backward_weights = backward (rule) dW")));
      t(same_bits(d_db.download(), db, label(batch, "backward_weights = backward (rule) db")));
    }
  }

  // A workspace one float short of the backward's need is refused before anything is launched.
  if (Dev::Wg::workspace_floats(max_batch) > 0) {
    const CudaContext small{stream.s, blas.h, ws.ptr, Dev::Wg::workspace_floats(max_batch) - 1};
    bool threw = false;
    try {
      Dev::template backward_with<DenseGrad::reduction>(small, d_w.ptr, nullptr, nullptr, nullptr, nullptr, d_dw.ptr,
                                                        d_db.ptr, max_batch);
    } catch (const std::invalid_argument& e) {
      threw = true;
      std::printf("ok   %s: short workspace refused: %s\n", name, e.what());
    }
    if (!threw) std::printf("FAIL %s: a short workspace was accepted\n", name);
    t(threw);
  }
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    // LeNet-5's three (the first flattens 16x5x5), and a tiny odd one.
    test_dense<120, Shape<16, 5, 5>>(t, "LeNet-5 fc1", {1, 37, 256}, 41);
    test_dense<84, Shape<120>>(t, "LeNet-5 fc2", {1, 37, 256}, 42);
    test_dense<10, Shape<84>>(t, "LeNet-5 fc3", {1, 37, 256}, 43);
    test_dense<3, Shape<7>>(t, "7 -> 3", {1, 37, 256}, 44);
    // Many reduction chunks (a partial last one), more than 32 units (two column-sum blocks), and
    // an input longer than one column tile (I + 1 = 129 > 128).
    test_dense<40, Shape<9>>(t, "9 -> 40", {1, 64, 65, 1000}, 45);
    test_dense<17, Shape<128>>(t, "128 -> 17", {1, 37, 200}, 46);
    // The CIFAR heads (benchmarks/cifar_nets.hpp): long inputs, few outputs, so the forward splits I
    // (16 and 8 chunks at batch 256; at batch 1000 the 2048 -> 10 head's output is still only 16 tiles).
    test_dense<256, Shape<64, 8, 8>>(t, "CIFAR vgg head 4096 -> 256", {1, 37, 256}, 47);
    test_dense<10, Shape<128, 4, 4>>(t, "CIFAR strided head 2048 -> 10", {1, 256, 1000}, 48);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
