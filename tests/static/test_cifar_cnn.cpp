// Compile-time facts about a small VGG-style CNN on RGB 32x32 input (CIFAR-10 sized): padded 3x3
// convolutions, max and average pooling. Compiling is the test.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/plan.hpp>

using namespace ctnn;

using Cifar = Seq<
    Conv<32, 3, Pad<1>>, ReLU,           //  0,1: 32x32x32
    Conv<32, 3, Pad<1>>, ReLU, Pool<2>,  //  2,3: 32x32x32   4: 32x16x16
    Conv<64, 3, Pad<1>>, ReLU,           //  5,6: 64x16x16
    AvgPool<2>,                          //  7:   64x8x8
    Dense<128>, ReLU,                    //  8,9: 128 (flattens 64·8·8 = 4096)
    Dense<10>, Softmax>;                 // 10,11
using Net = Network<Cifar, Input<3, 32, 32>>;

static_assert(Net::layer_count == 12);
static_assert(std::is_same_v<Net::input_shape, Shape<3, 32, 32>>);
static_assert(std::is_same_v<Net::shape_at<0>, Shape<32, 32, 32>>);  // pad 1 keeps 32x32
static_assert(std::is_same_v<Net::shape_at<2>, Shape<32, 32, 32>>);
static_assert(std::is_same_v<Net::shape_at<4>, Shape<32, 16, 16>>);
static_assert(std::is_same_v<Net::shape_at<5>, Shape<64, 16, 16>>);
static_assert(std::is_same_v<Net::shape_at<7>, Shape<64, 8, 8>>);
static_assert(std::is_same_v<Net::shape_at<8>, Shape<128>>);
static_assert(std::is_same_v<Net::output_shape, Shape<10>>);

// Parameters: conv0 32·3·3·3 + 32 = 896; conv2 32·32·9 + 32 = 9'248; conv5 64·32·9 + 64 = 18'496;
// dense8 4096·128 + 128 = 524'416; dense10 128·10 + 10 = 1'290. Sum 554'346.
static_assert(std::is_same_v<Net::bound_at<0>::weight_shape, Shape<32, 3, 3, 3>>);
static_assert(std::is_same_v<Net::bound_at<5>::weight_shape, Shape<64, 32, 3, 3>>);
static_assert(std::is_same_v<Net::bound_at<8>::weight_shape, Shape<128, 4096>>);
static_assert(Net::bound_at<2>::weight_count + Net::bound_at<2>::bias_count == 9'248);
static_assert(Net::bound_at<4>::weight_count == 0 && Net::bound_at<7>::bias_count == 0);
static_assert(Net::param_count == 554'346);

// FLOPs: conv 2·Out·OH·OW·C·K·K: 1'769'472 + 18'874'368 + 9'437'184; dense 2·N·In: 1'048'576 + 2'560;
// one per element for ReLU (32'768 ·2 + 16'384 + 128), K·K per output for pooling (32'768 + 16'384),
// 3 per element for Softmax (30). Sum 31'263'390.
static_assert(Net::bound_at<2>::flops == 18'874'368);
static_assert(Net::flops_per_sample == 31'263'390);

// Buffer plan: every tensor starts on a 64-float boundary. conv0's 864 weights round up to 896.
using Plan = BufferPlan<Net>;
static_assert(Plan::weight_offset[0] == 0 && Plan::bias_offset[0] == 896);
static_assert(Plan::weight_offset[2] == 960 && Plan::bias_offset[2] == 960 + 9'216);
static_assert(Plan::weight_offset[8] == 28'736 && Plan::bias_offset[8] == 28'736 + 524'288);
static_assert(Plan::param_floats == 554'496);  // >= 554'346, padded
static_assert(Plan::act_size[0] == 3'072 && Plan::act_size[5] == 8'192 && Plan::act_size[12] == 10);
// Activations per sample: 3'072 + 4·32'768 + 8'192 + 2·16'384 + 4'096 + 2·128 + 2·64 (10 → 64).
static_assert(Plan::activation_floats(1) == 179'584);
static_assert(Plan::activation_floats(8) == 1'435'904);
// Workspace: the largest im2col matrix, conv2's (32·3·3) x (32·32) = 294'912 floats per sample.
static_assert(Plan::training_floats(1) == 2 * 554'496 + 2 * 179'584);  // no layer state, nothing saved
static_assert(Plan::state_floats == 0 && Plan::saved_floats(64) == 0);

int main() { return 0; }
