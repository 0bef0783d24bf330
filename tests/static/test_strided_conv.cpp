// Compile-time facts about strided convolutions, including a stride that does not divide the input
// (the last partial window is dropped, as PyTorch does). Compiling is the test.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/plan.hpp>

using namespace ctnn;

using Layers = Seq<
    Conv<16, 3, Stride<2>, Pad<1>>, ReLU,  // (32 + 2 − 3) / 2 + 1 = 16
    Conv<32, 3, Stride<2>, Pad<1>>, ReLU,  // (16 + 2 − 3) / 2 + 1 = 8
    Conv<64, 3, Stride<3>>,                // (8 − 3) / 3 + 1 = 2 (floor; row 8 is never read)
    Dense<10>>;
using Net = Network<Layers, Input<3, 32, 32>>;

static_assert(Conv<16, 3, Stride<2>, Pad<1>>::stride == 2 && Conv<16, 3, Stride<2>, Pad<1>>::pad == 1);
static_assert(Conv<16, 3, Stride<2>, Pad<1>>::dilation == 1);  // default
static_assert(std::is_same_v<Net::shape_at<0>, Shape<16, 16, 16>>);
static_assert(std::is_same_v<Net::shape_at<2>, Shape<32, 8, 8>>);
static_assert(std::is_same_v<Net::shape_at<4>, Shape<64, 2, 2>>);
static_assert(std::is_same_v<Net::output_shape, Shape<10>>);

// Where output (oy, ky) reads: oy·stride − pad + ky. Output 0 starts in the padding.
static_assert(Net::bound_at<0>::in_y(0, 0) == -1 && Net::bound_at<0>::in_y(15, 2) == 31);
static_assert(Net::bound_at<4>::in_x(1, 2) == 5);  // the last column read is 5 < 7

// Parameters: 16·3·9 + 16 = 448; 32·16·9 + 32 = 4'640; 64·32·9 + 64 = 18'496; 256·10 + 10 = 2'570.
static_assert(Net::param_count == 448 + 4'640 + 18'496 + 2'570);
static_assert(Net::param_count == 26'154);
// FLOPs of the strided convs count outputs only: 2·16·16·16·27 and 2·64·2·2·288.
static_assert(Net::bound_at<0>::flops == 221'184 && Net::bound_at<4>::flops == 147'456);

using Plan = BufferPlan<Net>;
// Workspace per sample: max(27·256, 144·64, 288·4) = 9'216 floats (conv2's im2col).
static_assert(Plan::act_size[1] == 4'096 && Plan::act_size[5] == 256);

int main() { return 0; }
