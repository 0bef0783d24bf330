// Compile-time facts about pooling options: stride (default: the window), padding, overlapping
// windows, MaxPool as another spelling of Pool. Compiling is the test.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/plan.hpp>

using namespace ctnn;

static_assert(std::is_same_v<MaxPool<2>, Pool<2>>);
static_assert(Pool<3>::stride == 3 && Pool<3>::pad == 0);  // default stride is the window
static_assert(AvgPool<3, Stride<1>, Pad<1>>::stride == 1 && AvgPool<3, Stride<1>, Pad<1>>::pad == 1);
static_assert(Pool<2>::kind == PoolKind::max && AvgPool<2>::kind == PoolKind::average);

using Layers = Seq<
    Pool<3, Stride<2>>,             // overlapping: (15 − 3) / 2 + 1 = 7
    AvgPool<3, Stride<1>, Pad<1>>,  // same size: (7 + 2 − 3) / 1 + 1 = 7
    MaxPool<2, Pad<1>>,             // stride 2: (7 + 2 − 2) / 2 + 1 = 4
    AvgPool<4>,                     // global average: 1x1
    Dense<3>>;
using Net = Network<Layers, Input<4, 15, 15>>;

static_assert(std::is_same_v<Net::shape_at<0>, Shape<4, 7, 7>>);
static_assert(std::is_same_v<Net::shape_at<1>, Shape<4, 7, 7>>);
static_assert(std::is_same_v<Net::shape_at<2>, Shape<4, 4, 4>>);
static_assert(std::is_same_v<Net::shape_at<3>, Shape<4, 1, 1>>);
static_assert(std::is_same_v<Net::output_shape, Shape<3>>);

// Pooling has no parameters; only the Dense does: 4·3 + 3.
static_assert(Net::bound_at<0>::weight_count == 0 && Net::bound_at<3>::bias_count == 0);
static_assert(Net::param_count == 15);
// FLOPs: K·K per output, 196·9 + 196·9 + 64·4 + 4·16, then the dense 2·3·4.
static_assert(Net::flops_per_sample == 1'764 + 1'764 + 256 + 64 + 24);

using Plan = BufferPlan<Net>;
// Layers without parameters take no room: the dense weight is first, its bias one block later.
static_assert(Plan::weight_offset[0] == 0 && Plan::weight_offset[4] == 0 && Plan::bias_offset[4] == 64);
static_assert(Plan::param_floats == 128);
static_assert(Plan::act_size[0] == 900 && Plan::act_size[1] == 196 && Plan::act_size[3] == 64);
// Activations for a batch of 2: 1'800 → 1'856, 392 → 448 (twice), 128, 8 → 64, 6 → 64.
static_assert(Plan::activation_floats(2) == 1'856 + 448 + 448 + 128 + 64 + 64);

int main() { return 0; }
