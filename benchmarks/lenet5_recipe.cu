// lenet5_recipe: how fast LeNet-5 reaches 99% test accuracy on MNIST with a given training recipe.
//
//   lenet5_recipe [--data DIR] [--seeds 1,2,3] [--net lenet5|vgg] RECIPE...
//   RECIPE = optimizer:batch:lr:epochs[:key=value...]
//     optimizer   sgd | nesterov | adam | adamw
//     keys        wd=L (weight decay)  warmup=N (linear warm-up, in epochs; fractional: per batch)
//                 smooth=E (label smoothing)  sched=cosine|constant|onecycle  math=fp32|tf32
//
// For each recipe and seed it trains a fresh Trainer<Net, cuda, 1024> (the data resident on the GPU)
// and prints, per seed: the final test accuracy, the seconds of training (the sum of EpochStats::seconds:
// evaluation excluded) and the training seconds at the end of the first epoch whose test accuracy is
// >= 99% ("-" if none). A divergence (ctnn::numeric_error) is reported as such. Times are the GPU
// machine's; compare only within one run. Any IDX data of 28×28 images and 10 classes will do
// (Fashion-MNIST too). --net vgg trains a VGG-style network instead of LeNet-5 (MnistVgg below): its
// 3×3 convolutions of 32 and 64 channels run through the implicit-GEMM kernels, which math=tf32 puts
// on the tensor cores, whereas LeNet-5's direct convolutions and fused dense chain stay FP32 in
// either math.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/io/idx.hpp"
#include "ctnn/train/cuda_trainer.hpp"

namespace {

constexpr int max_batch = 1024;

// benchmarks/cifar_nets.hpp's Vgg on one 28×28 channel: two 3×3 convolutions per stage (1→32→32,
// pool, 32→64→64, pool), then Dense<256> and Dense<10>.
using MnistVgg = ctnn::Network<ctnn::Seq<ctnn::Conv<32, 3, ctnn::Pad<1>>, ctnn::ReLU, ctnn::Conv<32, 3, ctnn::Pad<1>>,
                                         ctnn::ReLU, ctnn::Pool<2>, ctnn::Conv<64, 3, ctnn::Pad<1>>, ctnn::ReLU,
                                         ctnn::Conv<64, 3, ctnn::Pad<1>>, ctnn::ReLU, ctnn::Pool<2>, ctnn::Dense<256>,
                                         ctnn::ReLU, ctnn::Dense<10>, ctnn::Softmax>,
                               ctnn::Input<1, 28, 28>>;

struct Recipe {
  std::string text, optimizer = "sgd";
  int batch = 64, epochs = 15;
  float lr = 0.05f, wd = 0.f, smooth = 0.f, warmup = 0.f;
  std::string sched = "cosine";
  ctnn::Math math = ctnn::Math::fp32;
};

Recipe parse(const std::string& text) {
  Recipe r;
  r.text = text;
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string p; std::getline(in, p, ':');) parts.push_back(p);
  if (parts.size() < 4) throw CLI::ValidationError("recipe", "'" + text + "' is not optimizer:batch:lr:epochs[:k=v...]");
  r.optimizer = parts[0];
  r.batch = std::stoi(parts[1]);
  r.lr = std::stof(parts[2]);
  r.epochs = std::stoi(parts[3]);
  for (std::size_t i = 4; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    if (eq == std::string::npos) throw CLI::ValidationError("recipe", "'" + parts[i] + "' is not key=value");
    const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    if (key == "wd") r.wd = std::stof(value);
    else if (key == "smooth") r.smooth = std::stof(value);
    else if (key == "warmup") r.warmup = std::stof(value);
    else if (key == "sched") r.sched = value;
    else if (key == "math") r.math = value == "tf32" ? ctnn::Math::tf32 : ctnn::Math::fp32;
    else throw CLI::ValidationError("recipe", "unknown key '" + key + "'");
  }
  if (r.batch < 1 || r.batch > max_batch) throw CLI::ValidationError("recipe", "batch outside 1..1024");
  return r;
}

ctnn::Schedule schedule_of(const Recipe& r, std::int64_t steps_per_epoch) {
  ctnn::Schedule s = r.sched == "constant" ? ctnn::Schedule::constant
                     : r.sched == "onecycle" ? ctnn::Schedule::one_cycle().per_batch()
                                             : ctnn::Schedule::cosine.per_batch();
  if (r.warmup > 0) s = s.per_batch().with_warmup(std::int64_t(r.warmup * float(steps_per_epoch)));
  return s;
}

template <class Net, class Opt>
void run(const Recipe& r, std::uint64_t seed, const ctnn::Dataset& train, const ctnn::Dataset& test) {
  ctnn::Trainer<Net, ctnn::cuda, max_batch, Opt> trainer(seed);
  if constexpr (std::is_same_v<Opt, ctnn::Sgd>) {
    trainer.optimizer.weight_decay = r.wd;
    trainer.optimizer.nesterov = r.optimizer == "nesterov";
  } else {
    trainer.optimizer.weight_decay = r.wd;
  }
  trainer.loss.label_smoothing = r.smooth;
  trainer.set_math(r.math);
  ctnn::TrainOptions o;
  o.epochs = r.epochs;
  o.batch = r.batch;
  o.learning_rate = r.lr;
  o.seed = seed;
  o.schedule = schedule_of(r, std::int64_t((train.count + std::size_t(r.batch) - 1) / std::size_t(r.batch)));
  double seconds = 0, reached = -1, accuracy = 0;
  o.on_epoch = [&](const ctnn::EpochStats& s) {
    seconds += s.seconds;
    accuracy = s.test_accuracy;
    if (reached < 0 && s.test_accuracy >= 0.99) reached = seconds;
  };
  try {
    trainer.fit(train, o, &test);
    char at[32] = "-";
    if (reached >= 0) std::snprintf(at, sizeof at, "%.3f", reached);
    std::printf("%-44s seed %llu  acc %6.2f%%  train %6.3f s  99%% at %s s\n", r.text.c_str(),
                (unsigned long long)seed, 100 * accuracy, seconds, at);
  } catch (const ctnn::numeric_error& e) {
    std::printf("%-44s seed %llu  DIVERGED: %s\n", r.text.c_str(), (unsigned long long)seed, e.what());
  }
  std::fflush(stdout);
}

template <class Net>
void run_with(const Recipe& r, std::uint64_t seed, const ctnn::Dataset& train, const ctnn::Dataset& test) {
  if (r.optimizer == "sgd" || r.optimizer == "nesterov") run<Net, ctnn::Sgd>(r, seed, train, test);
  else if (r.optimizer == "adam") run<Net, ctnn::Adam>(r, seed, train, test);
  else if (r.optimizer == "adamw") run<Net, ctnn::AdamW>(r, seed, train, test);
  else throw CLI::ValidationError("recipe", "unknown optimizer '" + r.optimizer + "'");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"How fast LeNet-5 reaches 99% on MNIST with a given recipe"};
  std::string data = ".data/mnist", net = "lenet5";
  std::vector<std::uint64_t> seeds{1, 2, 3};
  std::vector<std::string> recipes;
  app.add_option("--data", data, "MNIST (or Fashion-MNIST) directory, IDX files raw or .gz")->capture_default_str();
  // One comma-separated word, so that the recipes after it are not taken for seeds.
  app.add_option("--seeds", seeds, "seeds, comma-separated")->delimiter(',')->allow_extra_args(false);
  app.add_option("--net", net, "the network trained")->check(CLI::IsMember({"lenet5", "vgg"}))->capture_default_str();
  app.add_option("recipes", recipes, "optimizer:batch:lr:epochs[:key=value...]")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    const ctnn::Dataset train = ctnn::io::load_mnist(data, "train"), test = ctnn::io::load_mnist(data, "t10k");
    for (const std::string& text : recipes) {
      const Recipe r = parse(text);
      for (const std::uint64_t seed : seeds) {
        if (net == "vgg") run_with<MnistVgg>(r, seed, train, test);
        else run_with<ctnn::models::LeNet5>(r, seed, train, test);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lenet5_recipe: %s\n", e.what());
    return 1;
  }
  return 0;
}
