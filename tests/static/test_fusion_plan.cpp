// Compile-time facts about FusionPlan (network/fusion.hpp): which neighbouring layers form a conv group,
// a dense chain or stay alone, for LeNet-5 and for networks of other shapes. Compiling is the test.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/fusion.hpp>

using namespace ctnn;

template <class Net>
using Plan = FusionPlan<Net>;

constexpr bool same(FusedGroup g, GroupKind kind, std::size_t first, std::size_t last) {
  return g.kind == kind && g.first == first && g.last == last;
}

// LeNet-5: two conv groups (Conv, ReLU, Pool) and one chain (three Dense with their ReLUs, the Softmax).
using L5 = Plan<models::LeNet5>;
static_assert(L5::group_count == 3);
static_assert(same(L5::groups[0], GroupKind::conv, 0, 2));
static_assert(same(L5::groups[1], GroupKind::conv, 3, 5));
static_assert(same(L5::groups[2], GroupKind::dense_chain, 6, 11));
static_assert(L5::group_of(0) == 0 && L5::group_of(4) == 1 && L5::group_of(10) == 2 && L5::group_of(11) == 2);

// BatchNorm between a Conv and its activation blocks the fusion: the Conv stands alone (a conv group of
// one layer), BatchNorm and ReLU run as layers.
using Bn = Plan<Network<Seq<Conv<8, 3, Pad<1>>, BatchNorm, ReLU, Dense<10>>, Input<3, 8, 8>>>;
static_assert(Bn::group_count == 4);
static_assert(same(Bn::groups[0], GroupKind::conv, 0, 0));
static_assert(same(Bn::groups[1], GroupKind::layer, 1, 1));
static_assert(same(Bn::groups[2], GroupKind::layer, 2, 2));
static_assert(same(Bn::groups[3], GroupKind::dense_chain, 3, 3));

// A chain without a Softmax, ending in a Dense; Sigmoid and LeakyReLU are activations like ReLU.
using Mlp = Plan<Network<Seq<Dense<32>, Sigmoid, Dense<16>, LeakyReLU<0.1f>, Dense<4>>, Input<20>>>;
static_assert(Mlp::group_count == 1 && same(Mlp::groups[0], GroupKind::dense_chain, 0, 4));

// Overlapping or padded pooling does not fuse (its windows share inputs); a tiling AvgPool does; Tanh
// after a Conv does.
using Rgb = Plan<Network<Seq<Conv<8, 5, Stride<2>, Pad<2>>, Tanh, AvgPool<2>,
                             Conv<12, 3, Pad<2>, Dilation<2>>, ReLU, Pool<3, Stride<2>, Pad<1>>,
                             Dense<32>, Sigmoid, Dense<10>, Softmax>,
                         Input<3, 32, 32>>>;
static_assert(Rgb::group_count == 4);
static_assert(same(Rgb::groups[0], GroupKind::conv, 0, 2));
static_assert(same(Rgb::groups[1], GroupKind::conv, 3, 4));
static_assert(same(Rgb::groups[2], GroupKind::layer, 5, 5));
static_assert(same(Rgb::groups[3], GroupKind::dense_chain, 6, 9));

// Conv followed directly by a tiling pooling (no activation); an activation at the start stays alone;
// Dropout splits a chain in two.
using Mixed = Plan<Network<Seq<ReLU, Conv<4, 3>, Pool<2>, Dense<16>, ReLU, Dropout<0.5f>, Dense<8>, Tanh,
                               Dense<3>, Softmax>,
                           Input<2, 10, 10>>>;
static_assert(Mixed::group_count == 5);
static_assert(same(Mixed::groups[0], GroupKind::layer, 0, 0));
static_assert(same(Mixed::groups[1], GroupKind::conv, 1, 2));
static_assert(same(Mixed::groups[2], GroupKind::dense_chain, 3, 4));
static_assert(same(Mixed::groups[3], GroupKind::layer, 5, 5));
static_assert(same(Mixed::groups[4], GroupKind::dense_chain, 6, 9));

// A wide Dense (2^18 weights or more) forms a group of its own with its activation: a CIFAR head (4096 ->
// 256), and one inside a chain (64 -> 4096: 2^18), which ends the chain before it.
using Head = Plan<Network<Seq<Conv<16, 3, Pad<1>>, ReLU, Pool<2>, Dense<256>, ReLU, Dense<10>, Softmax>,
                          Input<4, 32, 32>>>;
static_assert(Head::group_count == 3);
static_assert(same(Head::groups[0], GroupKind::conv, 0, 2));
static_assert(same(Head::groups[1], GroupKind::dense_chain, 3, 4));
static_assert(same(Head::groups[2], GroupKind::dense_chain, 5, 6));
using MidWide = Plan<Network<Seq<Dense<64>, ReLU, Dense<4096>, Dense<10>>, Input<40>>>;
static_assert(MidWide::group_count == 3);
static_assert(same(MidWide::groups[0], GroupKind::dense_chain, 0, 1));
static_assert(same(MidWide::groups[1], GroupKind::dense_chain, 2, 2));
static_assert(same(MidWide::groups[2], GroupKind::dense_chain, 3, 3));

// The traits behind the rules.
static_assert(std::is_same_v<activation_fn_t<ReLU>, relu_fn> && std::is_same_v<activation_fn_t<Tanh>, tanh_fn>);
static_assert(std::is_same_v<activation_fn_t<LeakyReLU<0.2f>>, leaky_relu_fn<0.2f>>);
static_assert(!is_activation_layer_v<Softmax> && !is_activation_layer_v<Pool<2>> && !is_activation_layer_v<Dense<3>>);
static_assert(is_tiling_pool<Pool<2>>() && is_tiling_pool<AvgPool<3>>() && !is_tiling_pool<Pool<3, Stride<2>>>() &&
              !is_tiling_pool<Pool<2, Pad<1>>>() && !is_tiling_pool<ReLU>());

int main() { return 0; }
