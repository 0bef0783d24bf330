// lenet5: LeNet-5 on MNIST or Fashion-MNIST with ctnn, on the GPU or the CPU. docs/cli.md is the
// manual; in short:
//
//   lenet5 train   [--data DIR] [--device cuda|cpu|auto] [--epochs N] [--batch B] [--lr X] ...
//                  [--out FILE] [--metrics FILE.csv] [--report DIR] [--limit N] [--test-limit N]
//   lenet5 eval    --model FILE [--data DIR] [--device ...] [--limit N] [--report DIR]
//   lenet5 predict --model FILE [--top K] [--json] [--show] IMAGE|DIR...
//   lenet5 --version
//
// Results go to stdout, messages to stderr. Every option is checked, and every output path probed,
// before data is read or a device is opened. Exit status: 0 success, 1 failure, 2 usage, 3 data or
// file error, 4 no CUDA device (--device cuda), 5 numeric failure (training diverged, or a model whose
// outputs are not finite).
#include <CLI/CLI.hpp>
#include <unistd.h>  // isatty

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ctnn/io/image.hpp"

#include "backend.hpp"
#include "ctnn/core/error.hpp"
#include "ctnn/io/file.hpp"
#include "ctnn/io/idx.hpp"
#include "ctnn/io/json.hpp"
#include "ctnn/io/printable.hpp"
#include "ctnn/network/model_card.hpp"
#include "ctnn/train/checkpoint.hpp"
#include "ctnn/version.hpp"
#include "report.hpp"

namespace {

using namespace lenet5;
namespace fs = std::filesystem;

constexpr int exit_ok = 0, exit_failure = 1, exit_usage = 2, exit_data = 3, exit_no_device = 4, exit_numeric = 5;

// A command line that parses but asks for something impossible: exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A model whose outputs are not finite: exit status 5 (as ctnn::numeric_error from training).
struct numeric_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- numbers from the command line ----------------------------------------------------------------

// The value as typed, made printable and cut short: "1000000000000...(301 characters)".
std::string brief(const std::string& text) {
  const std::string p = ctnn::io::printable(text, 64);
  if (text.size() <= 24) return p;
  return ctnn::io::printable(text.substr(0, 16), 64) + "...(" + std::to_string(text.size()) + " characters)";
}

// A finite float in [lo, hi]. nan/inf and anything that would round to 0 or to a subnormal float
// are refused, never silently changed.
float parse_float(const std::string& option, const std::string& text, double lo, double hi) {
  char expected[96];
  std::snprintf(expected, sizeof expected, "expected a number from %g to %g", lo, hi);
  const std::string range = expected;
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = text.empty() || std::isspace(static_cast<unsigned char>(text[0])) ? 0 : std::strtod(s, &end);
  if (text.empty() || !end || *end != '\0' || end == s)
    throw usage_error(option + " " + brief(text) + ": not a number; " + range);
  if (std::isnan(v) || (std::isinf(v) && errno != ERANGE))
    throw usage_error(option + " " + brief(text) + ": must be a finite number; " + range);
  if (errno == ERANGE && std::fabs(v) > 1)
    throw usage_error(option + " " + brief(text) + ": out of range; " + range);
  if (v < lo || v > hi) throw usage_error(option + " " + brief(text) + ": out of range; " + range);
  const float f = float(v);
  if (v != 0 && std::fabs(f) < std::numeric_limits<float>::min())
    throw usage_error(option + " " + brief(text) + ": too small to be stored as a float (the smallest is 1.2e-38); " +
                      range + ", or 0");
  return f;
}

// An integer in [lo, hi] (digits only, an optional leading '+').
std::uint64_t parse_uint(const std::string& option, const std::string& text, std::uint64_t lo, std::uint64_t hi) {
  const std::string range = "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  std::string digits = text;
  if (!digits.empty() && digits[0] == '+') digits.erase(0, 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    throw usage_error(option + " " + brief(text) + ": not a whole number; " + range);
  std::uint64_t v = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (r.ec == std::errc::result_out_of_range || v < lo || v > hi)
    throw usage_error(option + " " + brief(text) + ": out of range; " + range);
  return v;
}

// ---- data sets ----------------------------------------------------------------------------------

struct DataKind {
  std::string id;    // "mnist", "fashion-mnist" or "idx"
  std::string name;  // for people
  std::vector<std::string> classes;
  float mean = 0, std = 0;  // the training normalisation (0: compute from the training set)
};

std::vector<std::string> digit_names() {
  std::vector<std::string> n;
  for (int c = 0; c < classes; ++c) n.push_back(std::to_string(c));
  return n;
}
DataKind mnist_kind() { return {"mnist", "MNIST", digit_names(), 0.1307f, 0.3081f}; }
DataKind fashion_kind() {
  return {"fashion-mnist",
          "Fashion-MNIST",
          {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"},
          0.2860f,
          0.3530f};
}

// The rule that tells the two apart (docs/cli.md): the mean intensity of the test images, 0.133 for
// MNIST (dark background, thin strokes) and 0.286 for Fashion-MNIST (large bright garments); at or
// above 0.2 it is Fashion-MNIST.
DataKind detect(const ctnn::Dataset& test) {
  double sum = 0;
  for (std::uint8_t p : test.pixels) sum += p;
  const double mean = test.pixels.empty() ? 0 : sum / (255.0 * double(test.pixels.size()));
  return mean >= 0.2 ? fashion_kind() : mnist_kind();
}

bool has_idx(const fs::path& dir) {
  std::error_code ec;
  for (const char* f : {"t10k-labels-idx1-ubyte", "t10k-labels-idx1-ubyte.gz"})
    if (fs::exists(dir / f, ec)) return true;
  return false;
}

// --data DIR, or the names "mnist" and "fashion-mnist": the places where the IDX files are looked for.
std::string resolve_data(const std::string& data) {
  if (has_idx(data)) return data;
  std::vector<std::string> candidates;
  if (data == "fashion-mnist" || data == "fashion")
    // Debian's dataset-fashion-mnist installs /usr/share/datasets/fashion-mnist/*.gz (checked).
    candidates = {"/usr/share/datasets/fashion-mnist", ".data/fashion-mnist", "data/fashion"};
  else if (data == "mnist")
    candidates = {".data/mnist", "/usr/share/datasets/mnist"};
  for (const std::string& c : candidates)
    if (has_idx(c)) return c;
  return data;  // load_mnist names what is missing
}

ctnn::Dataset load_split(const std::string& dir, const char* split) {
  try {
    return ctnn::io::load_mnist(dir, split);
  } catch (const ctnn::io_error& e) {
    throw ctnn::io_error(std::string(e.what()) + "\n(--data " + ctnn::io::printable(dir) +
                         ": a directory with the IDX files of MNIST or Fashion-MNIST, raw or .gz; "
                         "scripts/fetch_mnist.sh downloads MNIST)");
  }
}

ctnn::Dataset first(const ctnn::Dataset& d, std::size_t n) { return ctnn::subset(d, 0, std::min(n, d.count)); }

// ---- output paths -------------------------------------------------------------------------------

void probe_report_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ctnn::io_error(ctnn::io::printable(dir) + ": cannot create the report directory: " + ec.message());
  if (!fs::is_directory(dir, ec)) throw ctnn::io_error(ctnn::io::printable(dir) + ": not a directory");
  ctnn::io::probe_writable((fs::path(dir) / "confusion.png").string());
}

// ---- devices ------------------------------------------------------------------------------------

struct DeviceArgs {
  std::string device = "auto";
  std::string threads;  // empty: the hardware's
  int thread_count = 1;
};

void check_device_args(DeviceArgs& d) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  // Each thread keeps a copy of the network and its buffers for 256 images (about 30 MB for LeNet-5).
  d.thread_count = d.threads.empty() ? int(std::min(hw, 8u)) : int(parse_uint("--threads", d.threads, 1, 64));
}

std::unique_ptr<Backend> open_backend(const DeviceArgs& d, std::uint64_t seed) {
  if (d.device == "cpu") return make_cpu_backend(seed, d.thread_count);
  try {
    return make_cuda_backend(seed);
  } catch (const no_device& e) {
    if (d.device == "cuda") throw;
    std::cerr << "lenet5: no usable CUDA device (" << e.what() << "); running on the CPU\n";
    return make_cpu_backend(seed, d.thread_count);
  }
}

// ---- progress -----------------------------------------------------------------------------------

// A one-line progress bar on stderr, only when stderr is a terminal.
class Progress {
 public:
  Progress() : enabled_(::isatty(STDERR_FILENO) == 1) {}
  void update(int epoch, int epochs, std::size_t done, std::size_t total) {
    if (!enabled_ || total == 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int width = 30;
    const int filled = int(double(done) / double(total) * width);
    std::fprintf(stderr, "\r  epoch %d/%d [%s%s] %3d%% %zu/%zu", epoch, epochs,
                 std::string(std::size_t(filled), '#').c_str(), std::string(std::size_t(width - filled), '.').c_str(),
                 int(100.0 * double(done) / double(total)), done, total);
    std::fflush(stderr);
  }
  void clear() {
    if (enabled_) std::fprintf(stderr, "\r\033[K"), std::fflush(stderr);
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point last_{};
};

// ---- evaluation shared by train and eval ------------------------------------------------------------

struct Scored {
  std::vector<int> predicted;
  double accuracy = 0, loss = 0, seconds = 0;
};

int argmax(const float* p) { return int(std::max_element(p, p + classes) - p); }

// Throws numeric_failure when an output is not finite, explaining where it starts.
void check_finite(const std::vector<float>& probs, const Model& model, const std::uint8_t* images,
                  const std::string& what) {
  for (std::size_t k = 0; k < probs.size(); ++k)
    if (!std::isfinite(probs[k])) {
      const std::size_t image = k / classes;
      throw numeric_failure("the model's outputs are not finite (NaN or infinite) for " + what + " " +
                            std::to_string(image) + ": " + explain_non_finite(model, images + image * pixels) +
                            ". The model is unusable: its weights are too large (retrain with a lower learning rate "
                            "or more weight decay)");
    }
}

Scored score(Backend& b, const ctnn::Dataset& data, const Model& model) {
  Scored s;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<float> p = b.predict(data.pixels.data(), data.count);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check_finite(p, model, data.pixels.data(), "test image");
  std::size_t right = 0;
  double loss = 0;
  for (std::size_t i = 0; i < data.count; ++i) {
    const float* q = p.data() + i * classes;
    s.predicted.push_back(argmax(q));
    right += s.predicted.back() == int(data.labels[i]);
    loss -= std::log(std::max(double(q[data.labels[i]]), 1e-30));
  }
  s.accuracy = double(right) / double(data.count);
  s.loss = loss / double(data.count);
  return s;
}

void write_report(const std::string& dir, const ctnn::Dataset& test, const Scored& s,
                  const std::vector<std::string>& names, const std::vector<ctnn::EpochStats>* history) {
  const fs::path d(dir);
  std::vector<std::string> written;
  if (history && !history->empty()) {
    write_curves_png((d / "curves.png").string(), *history);
    written.push_back((d / "curves.png").string());
  }
  write_confusion_png((d / "confusion.png").string(), confusion_matrix(test.labels, s.predicted, classes), names);
  written.push_back((d / "confusion.png").string());
  write_misclassified_png((d / "misclassified.png").string(), test, s.predicted, names);
  written.push_back((d / "misclassified.png").string());
  for (const std::string& w : written) std::cerr << "lenet5: wrote " << w << "\n";
}

// ---- train --------------------------------------------------------------------------------------

struct TrainArgs {
  std::string data = ".data/mnist", out = "lenet5.safetensors", metrics, report;
  // The defaults are the recipe measured fastest to 99% (docs/benchmarks.md, benchmarks/lenet5_recipe):
  // batch 256, lr 0.2 (scaled with the batch) after a one-epoch warm-up, cosine per batch, Nesterov momentum, label smoothing.
  // Without --lr the rate scales with the batch: 0.2 · batch / 256 (0.05 at batch 64).
  std::string epochs = "10", batch = "256", lr, momentum = "0.9", weight_decay = "5e-4", seed = "1";
  std::string label_smoothing = "0.1", warmup = "1";
  bool nesterov = true;
  std::string limit, test_limit;
  std::string schedule = "cosine";
  DeviceArgs device;
};

int train(TrainArgs& a) {
  // 1. Every option, before anything is read or opened.
  check_device_args(a.device);
  ctnn::TrainOptions opt;
  opt.epochs = int(parse_uint("--epochs", a.epochs, 1, 10000));
  const int batch_limit = a.device.device == "cpu" ? cpu_max_batch : cuda_max_batch;
  opt.batch = int(parse_uint("--batch", a.batch, 1, std::uint64_t(batch_limit)));
  opt.learning_rate = a.lr.empty() ? 0.2f * float(opt.batch) / 256.f : parse_float("--lr", a.lr, 1e-6, 10);
  const float warmup = parse_float("--warmup", a.warmup, 0, 100);  // epochs, applied once the data is known
  SgdOptions sgd;
  sgd.momentum = parse_float("--momentum", a.momentum, 0, 0.999);
  sgd.nesterov = a.nesterov;
  if (sgd.nesterov && sgd.momentum == 0) throw usage_error("--nesterov needs a momentum above 0 (or --no-nesterov)");
  sgd.weight_decay = parse_float("--weight-decay", a.weight_decay, 0, 1);
  sgd.label_smoothing = parse_float("--label-smoothing", a.label_smoothing, 0, 0.5);
  opt.seed = parse_uint("--seed", a.seed, 0, std::numeric_limits<std::uint64_t>::max());
  const std::size_t limit = a.limit.empty() ? 0 : parse_uint("--limit", a.limit, 1, 100'000'000);
  const std::size_t test_limit = a.test_limit.empty() ? 0 : parse_uint("--test-limit", a.test_limit, 1, 100'000'000);
  // 2. Every output, so that a bad path cannot lose a run.
  ctnn::io::probe_writable(a.out);
  if (!a.metrics.empty()) ctnn::io::probe_writable(a.metrics);
  if (!a.report.empty()) probe_report_dir(a.report);
  // 3. The data.
  const std::string dir = resolve_data(a.data);
  ctnn::Dataset train_set = load_split(dir, "train"), test_set = load_split(dir, "t10k");
  const DataKind kind = detect(test_set);
  if (limit) train_set = first(train_set, limit);
  if (test_limit) test_set = first(test_set, test_limit);
  opt.mean = kind.mean, opt.std = kind.std;
  // The schedule per batch, so that the warm-up ramps over steps, not epochs.
  const auto steps_per_epoch = std::int64_t((train_set.count + std::size_t(opt.batch) - 1) / std::size_t(opt.batch));
  opt.schedule = (a.schedule == "cosine" ? ctnn::Schedule::cosine : ctnn::Schedule::constant).per_batch();
  if (warmup > 0) opt.schedule = opt.schedule.with_warmup(std::max<std::int64_t>(1, std::llround(warmup * steps_per_epoch)));
  // 4. The device.
  std::unique_ptr<Backend> backend = open_backend(a.device, opt.seed);
  if (opt.batch > backend->max_batch())
    throw usage_error("--batch " + a.batch + ": the " + backend->description() + " takes batches up to " +
                      std::to_string(backend->max_batch()));

  ctnn::print_model_card<Net>(std::cout, std::size_t(opt.batch));
  std::cout << "device: " << backend->description() << "\n"
            << "data: " << kind.name << " from " << dir << ": training on " << train_set.count << " images, testing on "
            << test_set.count << "; " << opt.epochs << (opt.epochs == 1 ? " epoch" : " epochs") << ", batch "
            << opt.batch << ", learning rate " << opt.learning_rate << " (" << a.schedule << " per batch"
            << (warmup > 0 ? ", warm-up " + a.warmup + (warmup == 1 ? " epoch" : " epochs") : std::string()) << "), "
            << (sgd.nesterov ? "Nesterov " : "") << "momentum " << sgd.momentum << ", weight decay " << sgd.weight_decay
            << ", label smoothing " << sgd.label_smoothing << ", seed " << opt.seed << "\n"
            << std::flush;

  std::unique_ptr<MetricsCsv> csv;
  if (!a.metrics.empty()) csv = std::make_unique<MetricsCsv>(a.metrics);
  Progress progress;
  int epoch = 1;
  const auto start = std::chrono::steady_clock::now();
  opt.on_batch = [&](std::size_t done, std::size_t total) { progress.update(epoch, opt.epochs, done, total); };
  opt.on_epoch = [&](const ctnn::EpochStats& s) {
    progress.clear();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("epoch %3d/%d  loss %.4f  train %6.2f%%  test %6.2f%%  lr %.4g  %9.0f images/s  %6.2f s  elapsed %7.1f s\n",
                s.epoch, opt.epochs, s.loss, 100 * s.train_accuracy, 100 * s.test_accuracy, s.learning_rate,
                s.images_per_second, s.seconds, elapsed);
    std::fflush(stdout);
    if (csv) csv->add(s);
    epoch = s.epoch + 1;
  };
  const std::vector<ctnn::EpochStats> history = backend->fit(train_set, opt, &test_set, sgd);

  std::map<std::string, std::string> meta = ctnn::class_names_metadata(kind.classes);
  meta["dataset"] = kind.id;
  backend->save_weights(a.out, meta);
  std::cout << "saved " << Net::param_count << " parameters, the normalisation and the class names to " << a.out << "\n";
  if (!a.metrics.empty()) std::cerr << "lenet5: wrote " << a.metrics << "\n";
  if (!a.report.empty()) {
    const Model model = backend->model();
    write_report(a.report, test_set, score(*backend, test_set, model), kind.classes, &history);
  }
  return exit_ok;
}

// ---- eval ---------------------------------------------------------------------------------------

struct EvalArgs {
  std::string model, data = ".data/mnist", report, limit;
  DeviceArgs device;
};

int eval(EvalArgs& a) {
  check_device_args(a.device);
  const std::size_t limit = a.limit.empty() ? 0 : parse_uint("--limit", a.limit, 1, 100'000'000);
  if (!a.report.empty()) probe_report_dir(a.report);
  std::map<std::string, std::string> meta;
  const Model model = load_model(a.model, &meta);  // on the CPU: a bad file needs no device
  std::vector<std::string> names = ctnn::class_names_of(meta);
  const std::string dir = resolve_data(a.data);
  ctnn::Dataset test_set = load_split(dir, "t10k");
  const DataKind kind = detect(test_set);
  if (names.size() != std::size_t(classes)) names = kind.classes;
  const auto trained_on = meta.find("dataset");
  if (trained_on != meta.end() && trained_on->second != kind.id)
    std::cerr << "lenet5: warning: the model was trained on " << ctnn::io::printable(trained_on->second)
              << ", the data in " << dir << " looks like " << kind.name << "\n";
  if (limit) test_set = first(test_set, limit);
  std::unique_ptr<Backend> backend = open_backend(a.device, 1);
  backend->set_model(model);
  const Scored s = score(*backend, test_set, model);
  std::printf("%s: test accuracy %.2f%% (%zu %s images), loss %.4f, %.3f s (%.0f images/s) on %s\n", a.model.c_str(),
              100 * s.accuracy, test_set.count, kind.name.c_str(), s.loss, s.seconds,
              double(test_set.count) / std::max(s.seconds, 1e-9), backend->description().c_str());
  std::fputs(confusion_text(confusion_matrix(test_set.labels, s.predicted, classes), names).c_str(), stdout);
  std::fflush(stdout);
  if (!a.report.empty()) write_report(a.report, test_set, s, names, nullptr);
  return exit_ok;
}

// ---- predict ------------------------------------------------------------------------------------

struct PredictArgs {
  std::string model, top = "1";
  std::vector<std::string> inputs;
  bool json = false, show = false;
  DeviceArgs device;
};

bool image_extension(const fs::path& p) {
  std::string e = p.extension().string();
  for (char& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
  return e == ".png" || e == ".jpg" || e == ".jpeg" || e == ".bmp" || e == ".pgm" || e == ".ppm" || e == ".pnm";
}

// Files as given; directories become their image files (by extension, sorted, not recursive).
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (!fs::is_directory(in, ec)) {
      files.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(in, ec))
      if (entry.is_regular_file(ec) && image_extension(entry.path())) found.push_back(entry.path().string());
    if (ec) throw ctnn::io_error(ctnn::io::printable(in) + ": cannot list the directory: " + ec.message());
    if (found.empty())
      throw ctnn::io_error(ctnn::io::printable(in) + ": no images in the directory (.png .jpg .jpeg .bmp .pgm .ppm .pnm)");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

void show_digit(const ctnn::io::Digit& d) {
  for (int y = 0; y < ctnn::io::digit_side; ++y) {
    std::string row = "    ";
    for (int x = 0; x < ctnn::io::digit_side; ++x) row += " .:o#"[d[std::size_t(y * ctnn::io::digit_side + x)] * 5 / 256];
    std::puts(row.c_str());
  }
}

std::string probability_text(double p) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", p);
  return b;
}

int predict(PredictArgs& a) {
  check_device_args(a.device);
  const int top = int(parse_uint("--top", a.top, 1, classes));
  std::map<std::string, std::string> meta;
  const Model model = load_model(a.model, &meta);  // on the CPU: a bad file needs no device
  std::vector<std::string> names = ctnn::class_names_of(meta);
  if (names.size() != std::size_t(classes)) names = digit_names();
  const std::vector<std::string> files = expand_inputs(a.inputs);

  std::vector<std::string> read, errors(files.size());
  std::vector<std::size_t> index_of_read;
  std::vector<ctnn::io::Digit> digits;
  std::vector<std::uint8_t> input;
  for (std::size_t f = 0; f < files.size(); ++f) {
    try {
      const ctnn::io::Digit d = ctnn::io::load_digit(files[f]);
      input.insert(input.end(), d.begin(), d.end());
      digits.push_back(d);
      index_of_read.push_back(f);
    } catch (const std::exception& e) {
      errors[f] = e.what();
      std::cerr << "lenet5: " << e.what() << "\n";
    }
  }
  std::vector<float> p;
  std::string device;
  if (!digits.empty()) {
    std::unique_ptr<Backend> backend = open_backend(a.device, 1);
    backend->set_model(model);
    device = backend->description();
    p = backend->predict(input.data(), digits.size());
    check_finite(p, model, input.data(), "image");
  }
  // Per read image: classes by probability, highest first (ties: the lower index).
  auto ranking = [&](std::size_t i) {
    std::vector<int> order(classes);
    for (int c = 0; c < classes; ++c) order[std::size_t(c)] = c;
    const float* q = p.data() + i * classes;
    std::sort(order.begin(), order.end(), [&](int x, int y) { return q[x] > q[y] || (q[x] == q[y] && x < y); });
    order.resize(std::size_t(top));
    return order;
  };
  const std::size_t failures = files.size() - digits.size();
  if (a.json) {
    namespace json = ctnn::io::json;
    std::string out = "{\"model\": " + json::quote(a.model) + ", \"device\": " + json::quote(device) + ", \"predictions\": [";
    std::size_t r = 0;
    for (std::size_t f = 0; f < files.size(); ++f) {
      out += f ? ",\n  " : "\n  ";
      out += "{\"file\": " + json::quote(files[f]);
      if (r < index_of_read.size() && index_of_read[r] == f) {
        const std::vector<int> order = ranking(r);
        out += ", \"class\": " + std::to_string(order[0]) + ", \"name\": " + json::quote(names[std::size_t(order[0])]) +
               ", \"probability\": " + probability_text(p[r * classes + std::size_t(order[0])]) + ", \"top\": [";
        for (std::size_t k = 0; k < order.size(); ++k)
          out += std::string(k ? ", " : "") + "{\"class\": " + std::to_string(order[k]) + ", \"name\": " +
                 json::quote(names[std::size_t(order[k])]) +
                 ", \"probability\": " + probability_text(p[r * classes + std::size_t(order[k])]) + "}";
        out += "]}";
        ++r;
      } else {
        out += ", \"error\": " + json::quote(errors[f]) + "}";
      }
    }
    out += "\n]}\n";
    std::fputs(out.c_str(), stdout);
  } else {
    for (std::size_t r = 0; r < index_of_read.size(); ++r) {
      const std::vector<int> order = ranking(r);
      std::string line = files[index_of_read[r]] + ":";
      for (std::size_t k = 0; k < order.size(); ++k) {
        const int c = order[k];
        char pct[32];
        std::snprintf(pct, sizeof pct, "%.2f%%", 100.0 * double(p[r * classes + std::size_t(c)]));
        line += (k ? ", " : " ") + names[std::size_t(c)];
        if (names[std::size_t(c)] != std::to_string(c)) line += " (class " + std::to_string(c) + ")";
        line += std::string(" ") + pct;
      }
      std::puts(line.c_str());
      if (a.show) show_digit(digits[r]);
    }
  }
  std::fflush(stdout);
  if (failures) {
    std::cerr << "lenet5: " << failures << " of " << files.size() << " images could not be read\n";
    return exit_data;
  }
  return exit_ok;
}

void add_device_options(CLI::App* cmd, DeviceArgs& d) {
  cmd->add_option("--device", d.device, "where to run: cuda (the GPU), cpu, or auto (the GPU if one works)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cuda", "cpu", "auto"}));
  cmd->add_option("--threads", d.threads, "CPU threads, 1..64 (default: the machine's cores, at most 8); training results depend on the count");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"LeNet-5 on MNIST or Fashion-MNIST with ctnn, on the GPU or the CPU: train, evaluate, predict.\n"
               "Exit status: 0 ok, 1 failure, 2 usage, 3 data or file error, 4 no CUDA device, 5 numeric failure."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lenet5 " + ctnn::version_string() + " (ctnn " + ctnn::version_string() +
                                        "; backends: CUDA and CPU)");

  TrainArgs t;
  CLI::App* train_cmd = app.add_subcommand("train", "train on MNIST or Fashion-MNIST and save the model (safetensors)");
  train_cmd->add_option("--data", t.data, "directory with the IDX files (raw or .gz), or mnist / fashion-mnist")
      ->capture_default_str();
  add_device_options(train_cmd, t.device);
  train_cmd->add_option("--epochs", t.epochs, "epochs, 1..10000")->capture_default_str();
  train_cmd->add_option("--batch", t.batch, "batch size, 1..1024 (cuda), 1..256 (cpu)")->capture_default_str();
  train_cmd->add_option("--lr", t.lr, "learning rate, 1e-6..10 (SGD; default 0.2 x batch / 256)");
  train_cmd->add_option("--momentum", t.momentum, "SGD momentum, 0..0.999")->capture_default_str();
  train_cmd->add_flag("--nesterov,!--no-nesterov", t.nesterov, "Nesterov momentum (default: on)");
  train_cmd->add_option("--warmup", t.warmup, "epochs of linear learning-rate warm-up, 0..100 (fractions allowed)")
      ->capture_default_str();
  train_cmd->add_option("--label-smoothing", t.label_smoothing, "label smoothing of the cross-entropy, 0..0.5")
      ->capture_default_str();
  train_cmd->add_option("--schedule", t.schedule, "learning-rate schedule, stepped per batch")
      ->capture_default_str()
      ->check(CLI::IsMember({"cosine", "constant"}));
  train_cmd->add_option("--weight-decay", t.weight_decay, "L2 weight decay added to the gradient, 0..1")
      ->capture_default_str();
  train_cmd->add_option("--seed", t.seed, "seed of the initial weights and of the shuffling")->capture_default_str();
  train_cmd->add_option("--limit", t.limit, "train on the first N training images only");
  train_cmd->add_option("--test-limit", t.test_limit, "test on the first N test images only");
  train_cmd->add_option("--out", t.out, "where to save the trained model (safetensors)")->capture_default_str();
  train_cmd->add_option("--metrics", t.metrics, "write per-epoch metrics to this CSV file");
  train_cmd->add_option("--report", t.report, "write curves.png, confusion.png and misclassified.png here");

  EvalArgs e;
  CLI::App* eval_cmd = app.add_subcommand("eval", "report a saved model's accuracy and confusion matrix on the test set");
  eval_cmd->add_option("--model", e.model, "model file (safetensors, from lenet5 train)")->required();
  eval_cmd->add_option("--data", e.data, "directory with the IDX files (raw or .gz), or mnist / fashion-mnist")
      ->capture_default_str();
  add_device_options(eval_cmd, e.device);
  eval_cmd->add_option("--limit", e.limit, "evaluate the first N test images only");
  eval_cmd->add_option("--report", e.report, "write confusion.png and misclassified.png here");

  PredictArgs p;
  CLI::App* predict_cmd = app.add_subcommand("predict", "classify images (digits, or garments for a Fashion-MNIST model)");
  predict_cmd->add_option("--model", p.model, "model file (safetensors, from lenet5 train)")->required();
  add_device_options(predict_cmd, p.device);
  predict_cmd->add_option("--top", p.top, "show the K most likely classes, 1..10")->capture_default_str();
  predict_cmd->add_flag("--json", p.json, "print one JSON document instead of text");
  predict_cmd->add_flag("--show", p.show, "also print each image as the network sees it (28x28)");
  predict_cmd->add_option("images", p.inputs, "PNG, JPEG, BMP or PGM/PPM images, or directories of them")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    app.exit(err);  // help and version to stdout, errors to stderr
    return err.get_exit_code() == 0 ? exit_ok : exit_usage;
  }

  try {
    if (*train_cmd) return train(t);
    if (*eval_cmd) return eval(e);
    return predict(p);
  } catch (const usage_error& err) {
    std::cerr << "lenet5: " << err.what() << "\n";
    return exit_usage;
  } catch (const no_device& err) {
    std::cerr << "lenet5: no usable CUDA device: " << err.what() << "\n(--device cpu or --device auto run on the CPU)\n";
    return exit_no_device;
  } catch (const ctnn::io_error& err) {
    std::cerr << "lenet5: " << err.what() << "\n";
    return exit_data;
  } catch (const ctnn::numeric_error& err) {
    std::cerr << "lenet5: numeric failure: " << err.what() << "\n";
    return exit_numeric;
  } catch (const numeric_failure& err) {
    std::cerr << "lenet5: numeric failure: " << err.what() << "\n";
    return exit_numeric;
  } catch (const std::exception& err) {
    std::cerr << "lenet5: error: " << err.what() << "\n";
  }
  return exit_failure;
}
