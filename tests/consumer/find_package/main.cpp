// Declares LeNet-5 against an installed ctnn and prints its model card.
#include <ctnn/ctnn.hpp>
#include <ctnn/network/model_card.hpp>

#include <iostream>

using LeNet5 = ctnn::Seq<
    ctnn::Conv<6, 5, ctnn::Pad<2>>, ctnn::ReLU, ctnn::Pool<2>,
    ctnn::Conv<16, 5>,              ctnn::ReLU, ctnn::Pool<2>,
    ctnn::Dense<120>, ctnn::ReLU,
    ctnn::Dense<84>,  ctnn::ReLU,
    ctnn::Dense<10>,  ctnn::Softmax>;
using Net = ctnn::Network<LeNet5, ctnn::Input<1, 28, 28>>;
static_assert(Net::param_count == 61'706);

int main() {
  std::cout << "ctnn " << ctnn::version_major << "." << ctnn::version_minor << "."
            << ctnn::version_patch << ": LeNet-5 has " << Net::param_count << " parameters\n";
  ctnn::print_model_card<Net>(std::cout, 64);
  return 0;
}
