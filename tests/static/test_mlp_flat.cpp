// Compile-time facts about a multilayer perceptron on a flat Input<784>: Dense straight after the
// input, Sigmoid and Tanh activations. Compiling is the test.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/plan.hpp>

using namespace ctnn;

using Mlp = Seq<Dense<256>, Sigmoid, Dense<128>, Tanh, Dense<10>, Softmax>;
using Net = Network<Mlp, Input<784>>;

static_assert(std::is_same_v<Net::input_shape, Shape<784>>);
static_assert(std::is_same_v<Net::shape_at<0>, Shape<256>>);
static_assert(std::is_same_v<Net::shape_at<1>, Shape<256>>);  // activations keep the shape
static_assert(std::is_same_v<Net::shape_at<3>, Shape<128>>);
static_assert(std::is_same_v<Net::output_shape, Shape<10>>);
static_assert(std::is_same_v<Net::layer_at<1>, Sigmoid> && std::is_same_v<Net::layer_at<3>, Tanh>);

// Parameters: 784·256 + 256 = 200'960; 256·128 + 128 = 32'896; 128·10 + 10 = 1'290.
static_assert(std::is_same_v<Net::bound_at<0>::weight_shape, Shape<256, 784>>);
static_assert(std::is_same_v<Net::bound_at<0>::bias_shape, Shape<256>>);
static_assert(Net::bound_at<1>::weight_count == 0);
static_assert(Net::param_count == 235'146);
// FLOPs: 2·(200'704 + 32'768 + 1'280) for the dense layers, 256 + 128 activations, 30 softmax.
static_assert(Net::flops_per_sample == 469'504 + 384 + 30);

using Plan = BufferPlan<Net>;
static_assert(Plan::weight_offset[0] == 0 && Plan::bias_offset[0] == 200'704);
static_assert(Plan::weight_offset[2] == 200'960 && Plan::bias_offset[2] == 233'728);
static_assert(Plan::weight_offset[4] == 233'856 && Plan::bias_offset[4] == 235'136);
static_assert(Plan::param_floats == 235'200);
static_assert(Plan::act_size[0] == 784 && Plan::act_size[6] == 10);
// 784 → 832, 256, 256, 128, 128, 10 → 64, 10 → 64.
static_assert(Plan::activation_floats(1) == 1'728);
static_assert(Plan::activation_floats(3) == 4'800);

int main() { return 0; }
