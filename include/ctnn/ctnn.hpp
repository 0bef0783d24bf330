#pragma once
// ctnn: a neural network is a type. Umbrella header.
#include "version.hpp"
#include "core/shape.hpp"
#include "core/options.hpp"
#include "core/layer.hpp"
#include "core/diagnostics.hpp"
#include "layers/conv.hpp"
#include "layers/pool.hpp"
#include "layers/dense.hpp"
#include "layers/activation.hpp"
#include "layers/softmax.hpp"
#include "network/network.hpp"
