#pragma once
// print_model_card<Net>(out, batch): what a network is and what it costs, as a plain-text table.
//
//    #  layer             output    params  MFLOP
//    0  Conv 6@5x5 pad 2  6x28x28      156  0.235
//   ...
//
//   parameters       61,706 (241.04 KiB, 246,824 B as float)
//   forward FLOPs    845,882 per sample (0.846 MFLOP)
//   batch 64
//     activations    3.76 MiB (3,941,376 B)
//   ...
//
// MFLOP is the layer's forward FLOPs per sample, in millions. The memory lines are BufferPlan's, for
// the given batch: activations (input and every layer's output), and what training keeps besides the
// optimizer's state (parameters, gradients, layer state, activations and their gradients, saved buffers).
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "plan.hpp"

namespace ctnn {

namespace detail {
// "6x28x28" for Shape<6, 28, 28>.
template <class S>
std::string shape_text() {
  std::string s = "invalid";
  if constexpr (is_shape_v<S>) {
    s.clear();
    for (std::size_t i = 0; i < S::rank; ++i) {
      if (i) s += 'x';
      s += std::to_string(S::dims[i]);
    }
  }
  return s;
}

// 61706 -> "61,706".
inline std::string grouped(std::size_t n) {
  std::string digits = std::to_string(n), s;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

// x with `decimals` digits after the point.
inline std::string fixed(double x, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, x);
  return buffer;
}

// 246824 -> "241.04 KiB"; binary units, two decimals; plain bytes below 1 KiB.
inline std::string human_bytes(std::size_t bytes) {
  static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = double(bytes) / 1024;
  std::size_t unit = 0;
  for (; value >= 1024 && unit + 1 < sizeof units / sizeof units[0]; ++unit) value /= 1024;
  return fixed(value, 2) + " " + units[unit];
}

// "241.04 KiB (246,824 B)"
inline std::string bytes_text(std::size_t bytes) {
  return human_bytes(bytes) + " (" + grouped(bytes) + " B)";
}

// One row per layer of Net, numbered prefix + position; a block's layers (Residual: the bound layer has
// an Inner network) follow its own row, numbered "<i>.<j>" and indented.
template <class Net>
void card_rows(std::vector<std::vector<std::string>>& rows, const std::string& prefix, const std::string& indent) {
  Net::for_each_layer([&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    using B = typename Net::template bound_at<i>;
    rows.push_back({prefix + std::to_string(i), indent + Net::template layer_at<i>::label(),
                    shape_text<typename Net::template shape_at<i>>(), grouped(bound_param_count<B>()),
                    fixed(double(B::flops) / 1e6, 3)});
    if constexpr (requires { typename B::Inner; })
      card_rows<typename B::Inner>(rows, prefix + std::to_string(i) + ".", indent + "  ");
  });
}

// A network whose rules failed has been reported already: print nothing, add no error.
template <class Net>
inline constexpr bool card_printable_v = false;
template <class SeqT, class InputT>
inline constexpr bool card_printable_v<Network<SeqT, InputT>> = Network<SeqT, InputT>::valid;
}  // namespace detail

template <class Net>
void print_model_card(std::ostream& out, std::size_t batch) {
  static_assert(is_network_v<Net>, "ctnn: print_model_card takes a Network<Seq<...>, Input<...>>");
  if constexpr (detail::card_printable_v<Net>) {
    using Plan = BufferPlan<Net>;

    // The table, as text first, so that every column is as wide as its widest entry.
    std::vector<std::vector<std::string>> rows{{"#", "layer", "output", "params", "MFLOP"}};
    detail::card_rows<Net>(rows, "", "");
    constexpr std::size_t columns = 5;
    constexpr bool right_aligned[columns] = {true, false, false, true, true};
    std::size_t width[columns] = {};
    for (const auto& row : rows)
      for (std::size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], row[c].size());

    out << "ctnn model card: " << Net::layer_count << " layers, input "
        << detail::shape_text<typename Net::input_shape>() << ", output "
        << detail::shape_text<typename Net::output_shape>() << "\n\n";
    for (const auto& row : rows) {
      std::string line;
      for (std::size_t c = 0; c < columns; ++c) {
        const std::string pad(width[c] - row[c].size(), ' ');
        line += "  ";
        line += right_aligned[c] ? pad + row[c] : row[c] + pad;
      }
      line.erase(line.find_last_not_of(' ') + 1);
      out << line << '\n';
    }

    out << '\n'
        << "parameters       " << detail::grouped(Net::param_count) << " ("
        << detail::human_bytes(Plan::param_bytes) << ", " << detail::grouped(Plan::param_bytes)
        << " B as float)\n"
        << "forward FLOPs    " << detail::grouped(Net::flops_per_sample) << " per sample ("
        << detail::fixed(double(Net::flops_per_sample) / 1e6, 3) << " MFLOP)\n"
        << "batch " << batch << '\n'
        << "  activations    " << detail::bytes_text(Plan::activation_bytes(batch)) << '\n'
        << "  training       " << detail::bytes_text(Plan::training_floats(batch) * sizeof(float))
        << ": parameters, gradients, layer state, activations and their gradients, saved buffers "
           "(plus the optimizer's state)\n";
  }
}

}  // namespace ctnn
