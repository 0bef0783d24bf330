#pragma once
// What lenet5 writes besides its messages: the per-epoch CSV (--metrics), the confusion matrix as
// text, and the PNG report (--report DIR): curves.png (loss and accuracy per epoch), confusion.png
// (the confusion matrix as a heat map) and misclassified.png (test images the model gets wrong, with
// predicted and true labels). PNGs are drawn by the binary itself (stb_image_write, stb_easy_font).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ctnn/core/dataset.hpp"
#include "ctnn/train/trainer.hpp"

namespace lenet5 {

// rows: true class, columns: predicted class.
using Confusion = std::vector<std::vector<std::size_t>>;
Confusion confusion_matrix(const std::vector<std::uint8_t>& truth, const std::vector<int>& predicted, int classes);
// The matrix with a header row, per-class recall, and a key of the class names.
std::string confusion_text(const Confusion& m, const std::vector<std::string>& names);

// The CSV of --metrics: a header, then one row per epoch, flushed at once so that a run that dies
// keeps its rows. Columns: epoch,loss,train_accuracy,test_accuracy,test_loss,learning_rate,seconds.
class MetricsCsv {
 public:
  explicit MetricsCsv(const std::string& path);  // throws ctnn::io_error when it cannot be written
  ~MetricsCsv();
  MetricsCsv(const MetricsCsv&) = delete;
  MetricsCsv& operator=(const MetricsCsv&) = delete;
  void add(const ctnn::EpochStats& s);
  static const char* header();

 private:
  std::FILE* file_;
  std::string path_;
};

// The PNGs; each throws ctnn::io_error when the file cannot be written.
void write_curves_png(const std::string& path, const std::vector<ctnn::EpochStats>& history);
void write_confusion_png(const std::string& path, const Confusion& m, const std::vector<std::string>& names);
// Up to `limit` misclassified images of `data` (in data order) in a grid, each with "p:<predicted>
// t:<true>"; returns how many it shows.
std::size_t write_misclassified_png(const std::string& path, const ctnn::Dataset& data, const std::vector<int>& predicted,
                                    const std::vector<std::string>& names, std::size_t limit = 100);

}  // namespace lenet5
