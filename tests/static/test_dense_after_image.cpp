// Compile-time facts about a Dense layer straight after a C×H×W input: it flattens in C, H, W order,
// so its weight is [N][C·H·W]. Compiling is the test.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/plan.hpp>

using namespace ctnn;

using Net = Network<Seq<Dense<5>, ReLU, Dense<2>, Softmax>, Input<3, 8, 8>>;

static_assert(std::is_same_v<Net::input_shape, Shape<3, 8, 8>>);
static_assert(std::is_same_v<Net::shape_at<0>, Shape<5>>);
static_assert(std::is_same_v<Net::bound_at<0>::input_shape, Shape<3, 8, 8>>);
static_assert(std::is_same_v<Net::bound_at<0>::weight_shape, Shape<5, 192>>);
static_assert(Net::bound_at<0>::in_size == 192 && Net::bound_at<0>::out_size == 5);
static_assert(Net::param_count == 5 * 192 + 5 + 2 * 5 + 2);

using Plan = BufferPlan<Net>;
static_assert(Plan::act_size[0] == 192 && Plan::act_size[1] == 5);
static_assert(Plan::weight_offset[2] == 960 + 64 && Plan::param_floats == 960 + 64 + 64 + 64);

int main() { return 0; }
