// Compile-time facts about LeNet-5 as the README spells it (and ctnn::models::LeNet5 is): shapes,
// parameter count, buffer plan. Compiling is the test.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/plan.hpp>

using LeNet5 = ctnn::Seq<
    ctnn::Conv<6, 5, ctnn::Pad<2>>, ctnn::ReLU, ctnn::Pool<2>,
    ctnn::Conv<16, 5>,              ctnn::ReLU, ctnn::Pool<2>,
    ctnn::Dense<120>, ctnn::ReLU,
    ctnn::Dense<84>,  ctnn::ReLU,
    ctnn::Dense<10>,  ctnn::Softmax>;
using Net = ctnn::Network<LeNet5, ctnn::Input<1, 28, 28>>;
// The README's spelling above is the one declaration everything else uses.
static_assert(std::is_same_v<Net, ctnn::models::LeNet5>);

static_assert(std::is_same_v<Net::input_shape, ctnn::Shape<1, 28, 28>>);
static_assert(std::is_same_v<Net::output_shape, ctnn::Shape<10>>);
static_assert(Net::param_count == 61'706);
static_assert(Net::layer_count == 12);
static_assert(std::is_same_v<Net::shape_at<0>, ctnn::Shape<6, 28, 28>>);
static_assert(std::is_same_v<Net::shape_at<2>, ctnn::Shape<6, 14, 14>>);
static_assert(std::is_same_v<Net::shape_at<3>, ctnn::Shape<16, 10, 10>>);
static_assert(std::is_same_v<Net::shape_at<5>, ctnn::Shape<16, 5, 5>>);
static_assert(std::is_same_v<Net::shape_at<6>, ctnn::Shape<120>>);
static_assert(std::is_same_v<Net::bound_at<0>::weight_shape, ctnn::Shape<6, 1, 5, 5>>);
static_assert(std::is_same_v<Net::bound_at<6>::weight_shape, ctnn::Shape<120, 400>>);
// conv1 2·6·28·28·25 + conv2 2·16·10·10·150 + dense 2·(400·120 + 120·84 + 84·10) + cheap layers
static_assert(Net::flops_per_sample > 2 * (6 * 28 * 28 * 25 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 840));

using Plan = ctnn::BufferPlan<Net>;
static_assert(Plan::param_floats >= Net::param_count && Plan::param_floats % ctnn::arena_alignment == 0);
static_assert(Plan::weight_offset[0] == 0 && Plan::bias_offset[0] == 192);
static_assert(Plan::act_size[0] == 784 && Plan::act_size[12] == 10);
static_assert(Plan::activation_floats(1) < Plan::activation_floats(2));

int main() { return 0; }
