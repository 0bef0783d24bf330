// The model card of LeNet-5: labels, shapes, parameter counts and FLOPs per layer, and the totals,
// against numbers worked out by hand.
#include <catch2/catch.hpp>

#include <ctnn/ctnn.hpp>
#include <ctnn/network/model_card.hpp>

#include <sstream>
#include <string>

namespace {

using LeNet = ctnn::models::LeNet5;

std::string card(std::size_t batch) {
  std::ostringstream out;
  ctnn::print_model_card<LeNet>(out, batch);
  return out.str();
}

// The table row of layer `index`, with runs of spaces squeezed to one.
std::string row(const std::string& text, int index) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string first, squeezed;
    if (!(words >> first) || first != std::to_string(index)) continue;
    squeezed = first;
    for (std::string word; words >> word;) squeezed += " " + word;
    return squeezed;
  }
  return "(no row " + std::to_string(index) + ")";
}

}  // namespace

TEST_CASE("layer labels show settings only where they differ from the defaults", "[model_card]") {
  CHECK(ctnn::Conv<6, 5, ctnn::Pad<2>>::label() == "Conv 6@5x5 pad 2");
  CHECK(ctnn::Conv<16, 5>::label() == "Conv 16@5x5");
  CHECK(ctnn::Conv<16, 3, ctnn::Stride<2>, ctnn::Pad<1>>::label() == "Conv 16@3x3 stride 2 pad 1");
  CHECK(ctnn::Conv<8, 3, ctnn::Dilation<2>>::label() == "Conv 8@3x3 dilation 2");
  CHECK(ctnn::Conv<8, 3, ctnn::Stride<1>, ctnn::Pad<0>, ctnn::Dilation<1>>::label() == "Conv 8@3x3");
  CHECK(ctnn::Pool<2>::label() == "MaxPool 2x2");
  CHECK(ctnn::MaxPool<3, ctnn::Stride<2>>::label() == "MaxPool 3x3 stride 2");
  CHECK(ctnn::AvgPool<3, ctnn::Stride<1>, ctnn::Pad<1>>::label() == "AvgPool 3x3 stride 1 pad 1");
  CHECK(ctnn::AvgPool<2, ctnn::Stride<2>>::label() == "AvgPool 2x2");
  CHECK(ctnn::Dense<120>::label() == "Dense 120");
  CHECK(ctnn::ReLU::label() == "ReLU");
  CHECK(ctnn::Sigmoid::label() == "Sigmoid");
  CHECK(ctnn::Tanh::label() == "Tanh");
  CHECK(ctnn::Softmax::label() == "Softmax");
}

TEST_CASE("model card units", "[model_card]") {
  CHECK(ctnn::detail::grouped(0) == "0");
  CHECK(ctnn::detail::grouped(999) == "999");
  CHECK(ctnn::detail::grouped(1000) == "1,000");
  CHECK(ctnn::detail::grouped(61706) == "61,706");
  CHECK(ctnn::detail::grouped(13645312) == "13,645,312");
  CHECK(ctnn::detail::human_bytes(1023) == "1023 B");
  CHECK(ctnn::detail::human_bytes(1024) == "1.00 KiB");
  CHECK(ctnn::detail::human_bytes(246824) == "241.04 KiB");
  CHECK(ctnn::detail::human_bytes(3 * 1024 * 1024) == "3.00 MiB");
  CHECK(ctnn::detail::human_bytes(std::size_t(5) << 30) == "5.00 GiB");
}

TEST_CASE("LeNet-5 model card: one row per layer", "[model_card]") {
  const std::string text = card(64);
  INFO(text);
  CHECK(text.find("12 layers, input 1x28x28, output 10") != std::string::npos);
  // index, label, output shape, parameters (weights + biases), forward MFLOP per sample
  CHECK(row(text, 0) == "0 Conv 6@5x5 pad 2 6x28x28 156 0.235");    // 6·25 + 6; 2·6·784·25
  CHECK(row(text, 1) == "1 ReLU 6x28x28 0 0.005");                   // 4'704
  CHECK(row(text, 2) == "2 MaxPool 2x2 6x14x14 0 0.005");            // 1'176 outputs · 4
  CHECK(row(text, 3) == "3 Conv 16@5x5 16x10x10 2,416 0.480");       // 16·150 + 16; 2·16·100·150
  CHECK(row(text, 5) == "5 MaxPool 2x2 16x5x5 0 0.002");
  CHECK(row(text, 6) == "6 Dense 120 120 48,120 0.096");             // 400·120 + 120; 2·400·120
  CHECK(row(text, 8) == "8 Dense 84 84 10,164 0.020");               // 120·84 + 84
  CHECK(row(text, 10) == "10 Dense 10 10 850 0.002");                // 84·10 + 10
  CHECK(row(text, 11) == "11 Softmax 10 0 0.000");
  CHECK(row(text, 12) == "(no row 12)");
}

TEST_CASE("LeNet-5 model card: totals", "[model_card]") {
  const std::string text = card(64);
  INFO(text);
  // 61'706 parameters · 4 bytes = 246'824 B.
  CHECK(text.find("parameters       61,706 (241.04 KiB, 246,824 B as float)") != std::string::npos);
  // 235'200 + 4'704 + 4'704 + 480'000 + 1'600 + 1'600 + 96'000 + 120 + 20'160 + 84 + 1'680 + 30
  CHECK(text.find("forward FLOPs    845,882 per sample (0.846 MFLOP)") != std::string::npos);
  CHECK(text.find("batch 64\n") != std::string::npos);
  // Activations, batch 64 (every size a multiple of 64 floats already):
  // 64·(784 + 2·4'704 + 1'176 + 2·1'600 + 400 + 2·120 + 2·84 + 2·10) = 985'344 floats.
  CHECK(text.find("activations    3.76 MiB (3,941,376 B)") != std::string::npos);
  // Training: 2 · 62'080 padded parameter floats + 2 · 985'344 = 2'094'848 floats (no layer state, nothing
  // saved for backward).
  CHECK(ctnn::BufferPlan<LeNet>::param_floats == 62'080);
  CHECK(text.find("training       7.99 MiB (8,379,392 B)") != std::string::npos);
}

TEST_CASE("the model card's memory lines follow the batch", "[model_card]") {
  using Plan = ctnn::BufferPlan<LeNet>;
  const std::string text = card(1);
  INFO(text);
  CHECK(text.find("batch 1\n") != std::string::npos);
  // Each activation rounds up to 64 floats: 832 + 2·4'736 + 1'216 + 2·1'600 + 448 + 4·128 + 2·64.
  CHECK(Plan::activation_floats(1) == 15'808);
  CHECK(text.find("activations    61.75 KiB (63,232 B)") != std::string::npos);
  // 2·62'080 + 2·15'808 = 155'776 floats.
  CHECK(text.find("training       608.50 KiB (623,104 B)") != std::string::npos);
}
