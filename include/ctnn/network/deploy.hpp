#pragma once
// Deployment: Deploy<Net> is Net for inference, with every BatchNorm that directly follows a Conv or
// Dense folded into it and every Dropout removed (inside Residual blocks too); a BatchNorm elsewhere
// stays (its evaluation form). fold_batchnorm<Net>(params, state) gives Deploy<Net>'s parameters and
// state from Net's (BufferPlan layouts, as Trainer::parameters() / layer_state() return them):
//
//   BN in evaluation:  y = (z − running_mean)·s + bias_bn,  s = weight_bn / sqrt(running_var + eps)
//   folded:            W'[o] = W[o]·s[o]   (row o of the Conv/Dense weight: output channel o)
//                      b'[o] = (b[o] − running_mean[o])·s[o] + bias_bn[o]
//
// computed in double and rounded once to float. Deploy<Net>'s evaluation-mode predictions equal
// Net's up to float rounding (tests/host/test_deploy.cpp: probabilities within 2e-6, same classes).
#include <array>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../layers/batchnorm.hpp"
#include "../layers/conv.hpp"
#include "../layers/dense.hpp"
#include "../layers/dropout.hpp"
#include "plan.hpp"
#include "residual.hpp"

namespace ctnn {

namespace detail {
template <class... Ts> struct type_list {};

template <class L> inline constexpr bool foldable_v = false;  // a BatchNorm right after it folds into it
template <int Out, int K, class... O> inline constexpr bool foldable_v<Conv<Out, K, O...>> = true;
template <int N> inline constexpr bool foldable_v<Dense<N>> = true;
template <class L> inline constexpr bool dropout_v = false;
template <float P> inline constexpr bool dropout_v<Dropout<P>> = true;

template <class Done, class... Rest> struct deploy_list;
template <class L> struct deploy_layer { using type = L; };
template <class... Ls> struct deploy_layer<Residual<Seq<Ls...>>> {
  using type = Residual<typename deploy_list<type_list<>, Ls...>::type>;
};

template <class... Done>
struct deploy_list<type_list<Done...>> { using type = Seq<Done...>; };
template <class... Done, class A, class... Rest>
struct deploy_list<type_list<Done...>, A, Rest...> {
  using kept = deploy_list<type_list<Done..., typename deploy_layer<A>::type>, Rest...>;
  using type = typename std::conditional_t<dropout_v<A>, deploy_list<type_list<Done...>, Rest...>, kept>::type;
};
template <class... Done, class A, class... Rest>
  requires foldable_v<A>
struct deploy_list<type_list<Done...>, A, BatchNorm, Rest...> {
  using type = typename deploy_list<type_list<Done..., A>, Rest...>::type;
};

// The rule is in a function: clang drops the members of a class whose static_assert failed, and
// Deploy<X> would then add errors of its own.
template <class Net> constexpr bool deploy_of_network() {
  static_assert(always_false_v<Net>, "ctnn: Deploy takes a Network<Seq<...>, Input<...>>");
  return false;
}
template <class Net> struct deploy_network {
  using type = std::conditional_t<deploy_of_network<Net>(), Net, Net>;  // Net, after the check
};
template <class... Ls, class In>
struct deploy_network<Network<Seq<Ls...>, In>> {
  using type = Network<typename deploy_list<type_list<>, Ls...>::type, In>;
};
}  // namespace detail

// Net for inference: BatchNorm folded into the Conv or Dense before it, Dropout removed.
template <class Net>
using Deploy = typename detail::deploy_network<Net>::type;

namespace detail {
enum class DeployAction { keep, fold, drop };  // fold: a BatchNorm folded into the layer before it

template <class Net>
constexpr auto deploy_actions() {
  struct Table {
    std::array<DeployAction, Net::layer_count> action{};
    std::array<std::size_t, Net::layer_count> index{};  // in Deploy<Net>, for kept layers
  } t;
  std::array<bool, Net::layer_count> foldable{}, batchnorm{}, dropout{};
  Net::for_each_layer([&](auto i) {
    using L = typename Net::template layer_at<decltype(i)::value>;
    foldable[i] = foldable_v<L>, batchnorm[i] = std::is_same_v<L, BatchNorm>, dropout[i] = dropout_v<L>;
  });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < Net::layer_count; ++i) {
    t.action[i] = dropout[i] ? DeployAction::drop
                  : (batchnorm[i] && i > 0 && foldable[i - 1]) ? DeployAction::fold
                                                               : DeployAction::keep;
    t.index[i] = kept;
    if (t.action[i] == DeployAction::keep) ++kept;
  }
  return t;
}

// Where layer i's state starts: the buffer plan's offsets at the top, one tensor after another inside
// a Residual block (network/residual.hpp).
template <class Net, bool Top>
constexpr std::size_t deploy_state_at(std::size_t i) {
  if constexpr (Top) {
    return BufferPlan<Net>::state_offset[i];
  } else {
    std::size_t at = 0;
    Net::for_each_layer([&](auto k) {
      constexpr std::size_t j = decltype(k)::value;
      if (j < i) at += state_count_of<typename Net::template bound_at<j>>();
    });
    return at;
  }
}

template <class Net, bool Top>
void fold_network(const float* p, const float* s, float* dp, float* ds) {
  using Dep = Deploy<Net>;
  using Plan = BufferPlan<Net>;
  using DPlan = BufferPlan<Dep>;
  static constexpr auto table = deploy_actions<Net>();
  Net::for_each_layer([&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    if constexpr (table.action[i] == DeployAction::keep) {
      constexpr std::size_t n = table.index[i];
      using B = typename Net::template bound_at<i>;
      const float* w = p + Plan::weight_offset[i];
      const float* b = p + Plan::bias_offset[i];
      float* dw = dp + DPlan::weight_offset[n];
      float* db = dp + DPlan::bias_offset[n];
      const std::size_t sa = deploy_state_at<Net, Top>(i), dsa = deploy_state_at<Dep, Top>(n);
      if constexpr (requires { typename B::Inner; }) {
        fold_network<typename B::Inner, false>(w, s + sa, dw, ds + dsa);
      } else {
        constexpr std::size_t next = (i + 1) % Net::layer_count;  // (i + 1 when it exists)
        constexpr bool fold_next = (next > i) && table.action[next] == DeployAction::fold;
        if constexpr (fold_next) {
          using BN = typename Net::template bound_at<i + 1>;
          constexpr std::size_t C = std::size_t(BN::C), row = B::weight_count / C;
          static_assert(B::weight_count % C == 0 && B::bias_count == C, "a folded layer has one row per channel");
          const float* g = p + Plan::weight_offset[i + 1];
          const float* beta = p + Plan::bias_offset[i + 1];
          const float* mean = s + deploy_state_at<Net, Top>(i + 1);
          const float* var = mean + C;
          for (std::size_t o = 0; o < C; ++o) {
            const double scale = double(g[o]) / std::sqrt(double(var[o]) + BatchNorm::eps);
            for (std::size_t k = 0; k < row; ++k) dw[o * row + k] = float(double(w[o * row + k]) * scale);
            db[o] = float((double(b[o]) - double(mean[o])) * scale + double(beta[o]));
          }
        } else {
          std::copy(w, w + B::weight_count, dw);
          std::copy(b, b + B::bias_count, db);
          std::copy(s + sa, s + sa + state_count_of<B>(), ds + dsa);
        }
      }
    }
  });
}
}  // namespace detail

// Deploy<Net>'s parameters and layer state (BufferPlan<Deploy<Net>> layouts).
struct DeployedParameters {
  std::vector<float> params, state;
};

template <class Net>
DeployedParameters fold_batchnorm(const std::vector<float>& params, const std::vector<float>& state) {
  if constexpr (!is_network_v<Net>) {
    static_assert(is_network_v<Net>, "ctnn: fold_batchnorm takes a Network<Seq<...>, Input<...>>");
    return {};  // after the one error, nothing else is instantiated
  } else {
    using Plan = BufferPlan<Net>;
    using DPlan = BufferPlan<Deploy<Net>>;
    if (params.size() != Plan::param_floats || state.size() != Plan::state_floats)
      throw std::invalid_argument("ctnn: fold_batchnorm got " + std::to_string(params.size()) + " parameters and " +
                                  std::to_string(state.size()) + " state floats, expected " +
                                  std::to_string(Plan::param_floats) + " and " + std::to_string(Plan::state_floats) +
                                  " (BufferPlan::param_floats, state_floats)");
    DeployedParameters out{std::vector<float>(DPlan::param_floats, 0.f), std::vector<float>(DPlan::state_floats, 0.f)};
    detail::fold_network<Net, true>(params.data(), state.data(), out.params.data(), out.state.data());
    return out;
  }
}

}  // namespace ctnn
