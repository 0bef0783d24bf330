#pragma once
// Residual<Seq<Layers...>>: output = input + f(input), f the block's layers, which must keep the
// input's shape (a compile-time `ctnn:` error otherwise). A Residual is one layer of the outer Seq
// whose bound form (bind<In>) runs an inner Network<Seq<Layers...>, Input<In>> (network/, not
// layers/, because it is made of a network):
//
//   parameters  the inner network's parameter array (BufferPlan<Inner> layout, each tensor aligned)
//               as the block's `weight`; no bias. param_count counts the inner tensors only.
//               In files: layers.<i>.<j>.weight / .bias (param_tensors()), j the position in the block.
//   state       the inner layers' state tensors one after another, named "<j>.<name>", so that files
//               say layers.<i>.<j>.running_mean.
//   saved       the inner activations (every inner layer's output, f(input) last) and the inner
//               layers' saved buffers, each aligned; written by every forward (evaluation too: it is
//               the block's scratch) and read by backward.
//   random      inner layer j's stream is derived from the block's: on the device the key is
//               rng_key ^ salt(j) (the layer then combines it with the step, step_key); on the host,
//               which receives step_key(key, step), the same stream is mix64(unmix64(rng_key) ^ salt(j))
//               (mix64 is a bijection). Keys of nested blocks combine by xor, so blocks nested in
//               mirrored positions (j, k) and (k, j) of one outer block share a stream.
//
// The device implementation (cuda_layer) runs each inner layer's own cuda_layer, with two ping-pong
// buffers for the inner activation gradients at the front of the workspace.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/layer.hpp"
#include "../core/random.hpp"
#include "init.hpp"
#include "plan.hpp"

namespace ctnn {

template <class S>
struct Residual : layer_tag {
  // A layer whose one rule fails, in check (where at_layer names its position) rather than in the
  // class: clang would drop the members of a class whose static_assert failed, and add errors.
  static constexpr const char* name = "Residual";
  static std::string label() { return name; }
  template <class In>
  static constexpr bool check() {
    static_assert(detail::always_false_v<S>, "ctnn: a Residual block is declared as Residual<Seq<Layers...>>");
    return false;
  }
};

// One parameter tensor of a composite layer, relative to the layer's weight: "0.weight", ...
struct SubTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t offset;  // floats from the layer's weight pointer
  std::size_t count;
};

namespace detail {
template <class S> struct input_of { using type = void; };
template <int... D> struct input_of<Shape<D...>> { using type = Input<D...>; };

// The inverse of mix64 (core/random.hpp), step by step.
constexpr std::uint64_t unxorshift(std::uint64_t y, int k) {
  std::uint64_t z = y;
  for (int s = k; s < 64; s += k) z ^= y >> s;
  return z;
}
constexpr std::uint64_t odd_inverse(std::uint64_t a) {  // a·x ≡ 1 (mod 2^64), Newton's iteration
  std::uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}
constexpr std::uint64_t unmix64(std::uint64_t z) {
  z = unxorshift(z, 31);
  z *= odd_inverse(0x94D049BB133111EBull);
  z = unxorshift(z, 27);
  z *= odd_inverse(0xBF58476D1CE4E5B9ull);
  return unxorshift(z, 30);
}
static_assert(unmix64(mix64(0x0123456789ABCDEFull)) == 0x0123456789ABCDEFull);
static_assert(unmix64(mix64(1)) == 1 && unmix64(mix64(~0ull)) == ~0ull);

constexpr std::uint64_t residual_salt(std::size_t j) { return mix64((j + 1) * golden_gamma); }
// The key that inner layer j receives, on each backend (see the top of this file).
constexpr std::uint64_t residual_host_key(std::uint64_t stepped_key, std::size_t j) {
  return mix64(unmix64(stepped_key) ^ residual_salt(j));
}
constexpr std::uint64_t residual_device_key(std::uint64_t layer_key, std::size_t j) {
  return layer_key ^ residual_salt(j);
}
static_assert(residual_host_key(step_key(12345, 678), 2) == step_key(residual_device_key(12345, 2), 678));

template <class Inner, class... Ls>
constexpr bool residual_rules() {
  constexpr bool ok = Inner::valid;  // an inner rule has failed and been reported: say nothing more
  constexpr bool keeps = !ok || std::is_same_v<typename Inner::output_shape, typename Inner::input_shape>;
  static_assert(keeps,
                "ctnn: a Residual block must keep the shape of its input (output = input + f(input)), "
                "but its layers change it");
  return ok && keeps;
}
}  // namespace detail

template <class... Ls>
struct Residual<Seq<Ls...>> : layer_tag {
  static constexpr const char* name = "Residual";
  // "Residual[Conv 8@3x3 pad 1 -> ReLU]"
  static std::string label() {
    std::string s = "Residual[";
    bool first = true;
    ((s += (first ? "" : " -> ") + Ls::label(), first = false), ...);
    return s + "]";
  }

  template <class In>
  static constexpr bool check() {
    if constexpr (sizeof...(Ls) == 0) {
      static_assert(sizeof...(Ls) > 0, "ctnn: a Residual block needs at least one layer");
      return false;
    } else {
      return detail::residual_rules<Network<Seq<Ls...>, typename detail::input_of<In>::type>, Ls...>();
    }
  }

  template <class In>
  struct bind {
    using Inner = Network<Seq<Ls...>, typename detail::input_of<In>::type>;
    using IP = BufferPlan<Inner>;
    static constexpr std::size_t J = sizeof...(Ls);
    template <std::size_t j> using inner_at = typename Inner::template bound_at<j>;

    using input_shape = In;
    using output_shape = In;
    using weight_shape = std::conditional_t<IP::param_floats == 0, Shape<>, Shape<int(IP::param_floats)>>;
    using bias_shape = Shape<>;
    static constexpr std::size_t in_size = In::size, out_size = In::size;
    static constexpr std::size_t weight_count = IP::param_floats, bias_count = 0;
    static constexpr std::size_t param_count = Inner::param_count;  // without the inner alignment padding
    static constexpr std::size_t flops = Inner::flops_per_sample + In::size;

   private:
    template <std::size_t... j>
    static constexpr auto state_tables(std::index_sequence<j...>) {
      struct Tables {
        std::array<std::size_t, J> offset{};  // of inner layer j's state, from the block's
        std::size_t floats = 0, tensors = 0;
      } t;
      ((t.offset[j] = t.floats, t.floats += state_count_of<inner_at<j>>(),
        t.tensors += state_tensors_of<inner_at<j>>().size()),
       ...);
      return t;
    }
    static constexpr auto tables_ = state_tables(std::make_index_sequence<J>{});
    static constexpr std::size_t name_chars = 128;
    template <std::size_t... j>
    static constexpr auto state_names(std::index_sequence<j...>) {
      std::array<std::array<char, name_chars>, tables_.tensors> names{};
      std::size_t t = 0;
      auto add = [&](std::size_t index, const auto& tensors) {
        for (const StateTensor& s : tensors) {
          std::size_t at = 0;
          char digits[24]{};
          std::size_t d = 0;
          for (std::size_t v = index;; v /= 10) {
            digits[d++] = char('0' + v % 10);
            if (v < 10) break;
          }
          while (d) names[t][at++] = digits[--d];
          names[t][at++] = '.';
          for (const char* c = s.name; *c && at + 1 < name_chars; ++c) names[t][at++] = *c;
          ++t;
        }
      };
      (add(j, state_tensors_of<inner_at<j>>()), ...);
      return names;
    }
    static constexpr auto names_ = state_names(std::make_index_sequence<J>{});
    template <std::size_t... j>
    static constexpr auto state_list(std::index_sequence<j...>) {
      std::array<StateTensor, tables_.tensors> list{};
      std::size_t t = 0;
      auto add = [&](const auto& tensors) {
        for (const StateTensor& s : tensors) {
          list[t] = StateTensor{names_[t].data(), s.count, s.integer};
          ++t;
        }
      };
      (add(state_tensors_of<inner_at<j>>()), ...);
      return list;
    }

    // Saved buffer, per sample: the inner activations 1..J, then the inner layers' saved buffers, each
    // with room for its alignment.
    template <std::size_t... j>
    static constexpr std::size_t saved_floats(std::index_sequence<j...>) {
      std::size_t n = 0;
      for (std::size_t k = 1; k <= J; ++k) n += IP::act_size[k] + arena_alignment;
      ((n += saved_size_of<inner_at<j>>() ? saved_size_of<inner_at<j>>() + arena_alignment : 0), ...);
      return n;
    }

   public:
    static constexpr std::array<std::size_t, J> state_offset = tables_.offset;
    static constexpr auto state = state_list(std::make_index_sequence<J>{});
    static constexpr std::size_t saved_size = saved_floats(std::make_index_sequence<J>{});
    static constexpr std::size_t max_act = *std::max_element(IP::act_size.begin(), IP::act_size.end());

    // Offset in the saved buffer of inner activation k (1..J: the output of inner layer k-1).
    static constexpr std::size_t act_at(std::size_t k, int batch) {
      std::size_t at = 0;
      for (std::size_t m = 1; m < k; ++m) at += align_floats(IP::act_size[m] * std::size_t(batch));
      return at;
    }
    // Offset in the saved buffer of inner layer j's own saved buffer.
    static constexpr std::size_t inner_saved_at(std::size_t j, int batch) {
      std::size_t at = act_at(J + 1, batch);
      for (std::size_t m = 0; m < j; ++m) at += align_floats(IP::saved_size[m] * std::size_t(batch));
      return at;
    }

    // layers.<i>.<j>.weight, .bias (and deeper for nested blocks), relative to the block's weight.
    static std::vector<SubTensor> param_tensors() {
      std::vector<SubTensor> out;
      Inner::for_each_layer([&](auto index) {
        constexpr std::size_t j = decltype(index)::value;
        using Bj = inner_at<j>;
        const std::string prefix = std::to_string(j) + ".";
        if constexpr (requires { Bj::param_tensors(); }) {
          for (SubTensor t : Bj::param_tensors())
            out.push_back({prefix + t.name, t.shape, IP::weight_offset[j] + t.offset, t.count});
        } else {
          auto dims = [](auto shape) {
            using S = decltype(shape);
            std::vector<std::int64_t> d;
            for (std::size_t k = 0; k < S::rank; ++k) d.push_back(S::dims[k]);
            return d;
          };
          if constexpr (Bj::weight_count > 0)
            out.push_back(
                {prefix + "weight", dims(typename Bj::weight_shape{}), IP::weight_offset[j], Bj::weight_count});
          if constexpr (Bj::bias_count > 0)
            out.push_back({prefix + "bias", dims(typename Bj::bias_shape{}), IP::bias_offset[j], Bj::bias_count});
        }
      });
      return out;
    }

    // The inner network's own initialisation (init_parameters<Inner>), from a seed drawn from rng.
    template <class T>
    static void init(T* w, T*, T* st, Random& rng) {
      std::vector<T> p(IP::param_floats), s(IP::state_floats);
      init_parameters<Inner>(p.data(), s.data(), rng.next_u64());
      std::copy(p.begin(), p.end(), w);
      for (std::size_t j = 0; j < J; ++j)
        std::copy_n(s.begin() + std::ptrdiff_t(IP::state_offset[j]), IP::state_count[j], st + state_offset[j]);
    }

    // The arguments of inner layer j's forward, given the block's.
    template <std::size_t j, class T>
    static ForwardArgs<T> inner_forward_args(const ForwardArgs<T>& a) {
      ForwardArgs<T> f;
      f.w = a.w + IP::weight_offset[j];
      f.b = a.w + IP::bias_offset[j];
      f.state = state_count_of<inner_at<j>>() ? a.state + state_offset[j] : nullptr;
      f.x = j == 0 ? a.x : a.saved + act_at(j, a.batch);
      f.y = a.saved + act_at(j + 1, a.batch);
      f.saved = saved_size_of<inner_at<j>>() ? a.saved + inner_saved_at(j, a.batch) : nullptr;
      f.batch = a.batch;
      f.mode = a.mode;
      f.first_sample = a.first_sample;
      return f;
    }
    // Inner layer j's backward arguments; dy and dx are set by the caller.
    template <std::size_t j, class T>
    static BackwardArgs<T> inner_backward_args(const BackwardArgs<T>& a) {
      using Bj = inner_at<j>;
      BackwardArgs<T> g;
      g.w = a.w + IP::weight_offset[j];
      g.state = state_count_of<Bj>() ? a.state + state_offset[j] : nullptr;
      g.x = j == 0 ? a.x : a.saved + act_at(j, a.batch);
      g.y = a.saved + act_at(j + 1, a.batch);
      g.saved = saved_size_of<Bj>() ? a.saved + inner_saved_at(j, a.batch) : nullptr;
      g.dw = Bj::weight_count ? a.dw + IP::weight_offset[j] : nullptr;
      g.db = Bj::bias_count ? a.dw + IP::bias_offset[j] : nullptr;
      g.batch = a.batch;
      return g;
    }

    template <class T>
    static void forward(const ForwardArgs<T>& a) {
      Inner::for_each_layer([&](auto index) {
        constexpr std::size_t j = decltype(index)::value;
        ForwardArgs<T> f = inner_forward_args<j>(a);
        f.rng_key = detail::residual_host_key(a.rng_key, j);
        layer_forward<inner_at<j>>(f);
      });
      const T* fx = a.saved + act_at(J, a.batch);
      for (std::size_t i = 0; i < std::size_t(a.batch) * in_size; ++i) a.y[i] = a.x[i] + fx[i];
    }

    template <class T>
    static void backward(const BackwardArgs<T>& a) {
      std::vector<T> grads[2];
      for (auto& g : grads) g.resize(max_act * std::size_t(a.batch));
      const T* dy = a.dy;
      [&]<std::size_t... k>(std::index_sequence<k...>) {
        ((backward_inner<J - 1 - k>(a, dy, grads)), ...);
      }(std::make_index_sequence<J>{});
      if (a.dx)
        for (std::size_t i = 0; i < std::size_t(a.batch) * in_size; ++i) a.dx[i] += a.dy[i];
    }

   private:
    template <std::size_t j, class T>
    static void backward_inner(const BackwardArgs<T>& a, const T*& dy, std::vector<T> (&grads)[2]) {
      BackwardArgs<T> g = inner_backward_args<j>(a);
      g.dy = dy;
      g.dx = j > 0 ? grads[j % 2].data() : a.dx;
      layer_backward<inner_at<j>>(g);
      dy = g.dx;
    }
  };
};

}  // namespace ctnn

#ifdef __CUDACC__
#include "../kernels/residual.cuh"  // nvcc only

namespace ctnn {

// The block on the device: each inner layer's own cuda_layer, then y = x + f(x); backward through
// the inner layers (activation gradients ping-pong in the front of the workspace; the inner layers get
// the rest), then dx += dy.
template <class... Ls, class In>
struct cuda_layer<Residual<Seq<Ls...>>, In> {
  using B = typename Residual<Seq<Ls...>>::template bind<In>;
  using Inner = typename B::Inner;
  static constexpr std::size_t J = B::J;
  template <std::size_t j>
  using K = cuda_layer<typename Inner::template layer_at<j>, typename Inner::template input_at<j>>;

  static constexpr std::size_t ping_pong(int batch) { return align_floats(B::max_act * std::size_t(batch)); }
  static constexpr std::size_t workspace_floats(int max_batch) {
    std::size_t inner = 0;
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      ((inner = std::max(inner, std::size_t(K<j>::workspace_floats(max_batch)))), ...);
    }(std::make_index_sequence<J>{});
    return 2 * ping_pong(max_batch) + inner;
  }
  static CudaContext inner_context(const CudaContext& ctx, int batch) {
    CudaContext c = ctx;
    const std::size_t front = 2 * ping_pong(batch);
    kernels::check_workspace(ctx, front, "Residual", batch);
    c.workspace = ctx.workspace + front;
    c.workspace_floats = ctx.workspace_floats - front;
    c.wgmma_weights = nullptr;  // the network keeps the wgmma copies of its own layers' weights, not of these
    return c;
  }

  static void forward(const CudaContext& ctx, const ForwardArgs<float>& a) {
    kernels::check_batch(a.batch, "Residual");
    const CudaContext c = inner_context(ctx, a.batch);
    Inner::for_each_layer([&](auto index) {
      constexpr std::size_t j = decltype(index)::value;
      ForwardArgs<float> f = B::template inner_forward_args<j>(a);
      f.rng_key = detail::residual_device_key(a.rng_key, j);
      cuda_layer_forward<K<j>>(c, f);
    });
    kernels::residual_add(ctx.stream, a.x, a.saved + B::act_at(J, a.batch), a.y, std::size_t(a.batch) * B::in_size);
  }

  static void backward(const CudaContext& ctx, const BackwardArgs<float>& a) {
    kernels::check_batch(a.batch, "Residual");
    const CudaContext c = inner_context(ctx, a.batch);
    float* grads[2] = {ctx.workspace, ctx.workspace + ping_pong(a.batch)};
    const float* dy = a.dy;
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      (([&] {
         constexpr std::size_t j = J - 1 - k;
         BackwardArgs<float> g = B::template inner_backward_args<j>(a);
         g.dy = dy;
         g.dx = j > 0 ? grads[j % 2] : a.dx;
         cuda_layer_backward<K<j>>(c, g);
         dy = g.dx;
       }()),
       ...);
    }(std::make_index_sequence<J>{});
    if (a.dx) kernels::residual_accumulate(ctx.stream, a.dy, a.dx, std::size_t(a.batch) * B::in_size);
  }
};

}  // namespace ctnn
#endif
