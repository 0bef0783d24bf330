// Compile-time facts about dilated convolutions: a K×K kernel with dilation D spans D·(K−1)+1 pixels.
// Compiling is the test.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/plan.hpp>

using namespace ctnn;

using Layers = Seq<
    Conv<8, 3, Dilation<2>>, ReLU,             // span 5: 28 − 5 + 1 = 24
    Conv<8, 3, Dilation<2>, Pad<2>>, ReLU,     // span 5, pad 2: same size, 24
    Conv<16, 3, Dilation<3>, Stride<2>>, ReLU, // span 7: (24 − 7) / 2 + 1 = 9
    Conv<4, 3, Dilation<4>>,                   // span 9 on 9x9: exactly fits, 1x1
    Dense<10>>;
using Net = Network<Layers, Input<1, 28, 28>>;

static_assert(Conv<8, 3, Dilation<2>>::dilation == 2 && Conv<8, 3, Dilation<2>>::pad == 0);
static_assert(std::is_same_v<Net::shape_at<0>, Shape<8, 24, 24>>);
static_assert(std::is_same_v<Net::shape_at<2>, Shape<8, 24, 24>>);
static_assert(std::is_same_v<Net::shape_at<4>, Shape<16, 9, 9>>);
static_assert(std::is_same_v<Net::shape_at<6>, Shape<4, 1, 1>>);
static_assert(std::is_same_v<Net::output_shape, Shape<10>>);

// Taps are D apart: kernel tap ky of output oy reads row oy·S − P + ky·D.
static_assert(Net::bound_at<0>::in_y(0, 2) == 4);
static_assert(Net::bound_at<2>::in_y(0, 0) == -2 && Net::bound_at<2>::in_y(23, 2) == 25);
static_assert(Net::bound_at<4>::in_x(8, 2) == 22);  // 8·2 + 2·3: inside the 24 columns

// Dilation changes no parameter count: 8·1·9 + 8 = 80; 8·8·9 + 8 = 584; 16·8·9 + 16 = 1'168;
// 4·16·9 + 4 = 580; dense 4·10 + 10 = 50.
static_assert(std::is_same_v<Net::bound_at<2>::weight_shape, Shape<8, 8, 3, 3>>);
static_assert(Net::param_count == 80 + 584 + 1'168 + 580 + 50);

using Plan = BufferPlan<Net>;
// Workspace per sample: max(9·576, 72·576, 72·81, 144·1) = 41'472 floats (layer 2's im2col).
static_assert(Plan::act_size[7] == 4);

int main() { return 0; }
