#pragma once
// ctnn: a neural network is a type. Umbrella header: everything a user of the host API needs except
// image decoding (<ctnn/io/image.hpp>, which needs stb).
// The CUDA backend (Trainer<Net, ctnn::cuda, ...>, CudaNetwork) comes with it when the including file
// is compiled by nvcc; <ctnn/train/cuda_trainer.hpp> is its own header.
#include "version.hpp"
#include "core/dataset.hpp"
#include "core/diagnostics.hpp"
#include "core/layer.hpp"
#include "core/normalize.hpp"
#include "core/options.hpp"
#include "core/shape.hpp"
#include "layers/activation.hpp"
#include "layers/batchnorm.hpp"
#include "layers/conv.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/global_avg_pool.hpp"
#include "layers/leaky_relu.hpp"
#include "layers/pool.hpp"
#include "layers/softmax.hpp"
#include "network/network.hpp"
#include "network/plan.hpp"
#include "network/residual.hpp"
#include "network/deploy.hpp"
#include "network/model_card.hpp"
#include "models/lenet5.hpp"
#include "io/idx.hpp"
#include "io/safetensors.hpp"
#include "train/host_trainer.hpp"
#ifdef __CUDACC__
#include "train/cuda_trainer.hpp"  // nvcc only
#include "network/resident_predictor.hpp"  // nvcc only
#endif
