#pragma once
// LeakyReLU on the device: the element-wise activation kernels (kernels/activation.cuh) with the host
// reference's own math (leaky_relu_fn in layers/leaky_relu.hpp).
#include "../layers/leaky_relu.hpp"
#include "activation.cuh"

namespace ctnn {

template <float Slope, class In>
struct cuda_layer<LeakyReLU<Slope>, In> : cuda_activation<leaky_relu_fn<Slope>, In> {};

}  // namespace ctnn
