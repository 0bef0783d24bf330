// A program that uses an installed ctnn the way an application would: it declares LeNet-5, prints its
// parameter count and model card, and reads files through ctnn's loaders, so that the link needs
// zlib (a gzip IDX file) exactly as the installed package describes it, and decodes an image.
// Built by the find_package consumer (CMake) and the pkg_config consumer (pkg-config flags).
#include <ctnn/ctnn.hpp>
#include <ctnn/io/idx.hpp>
#include <ctnn/io/image.hpp>
#include <ctnn/network/model_card.hpp>

#include <zlib.h>

#include <cstdio>
#include <iostream>
#include <string>

using LeNet5 = ctnn::Seq<
    ctnn::Conv<6, 5, ctnn::Pad<2>>, ctnn::ReLU, ctnn::Pool<2>,
    ctnn::Conv<16, 5>,              ctnn::ReLU, ctnn::Pool<2>,
    ctnn::Dense<120>, ctnn::ReLU,
    ctnn::Dense<84>,  ctnn::ReLU,
    ctnn::Dense<10>,  ctnn::Softmax>;
using Net = ctnn::Network<LeNet5, ctnn::Input<1, 28, 28>>;
static_assert(Net::param_count == 61'706);

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  std::cout << "ctnn " << ctnn::version_major << "." << ctnn::version_minor << "."
            << ctnn::version_patch << ": LeNet-5 has " << Net::param_count << " parameters\n";
  ctnn::print_model_card<Net>(std::cout, 64);

  // Three labels in a gzip-compressed IDX file: magic 0x00000801, count 3, then the bytes.
  const std::string labels_path = dir + "/labels.idx1.gz";
  const unsigned char idx[] = {0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 1};
  gzFile gz = gzopen(labels_path.c_str(), "wb");
  if (!gz || gzwrite(gz, idx, sizeof idx) != static_cast<int>(sizeof idx) || gzclose(gz) != Z_OK) {
    std::cerr << "cannot write " << labels_path << "\n";
    return 1;
  }
  const ctnn::io::IdxLabels labels = ctnn::io::load_idx_labels(labels_path);
  std::cout << "labels:";
  for (unsigned l : labels.labels) std::cout << " " << l;
  std::cout << "\n";

  // A 3x2 binary PGM.
  const std::string image_path = dir + "/image.pgm";
  if (std::FILE* f = std::fopen(image_path.c_str(), "wb")) {
    std::fputs("P5 3 2 255\n", f);
    const unsigned char pixels[] = {0, 50, 100, 150, 200, 250};
    std::fwrite(pixels, 1, sizeof pixels, f);
    std::fclose(f);
  }
  const ctnn::io::GrayImage image = ctnn::io::load_gray_image(image_path);
  std::cout << "image: " << image.width << "x" << image.height << ", last pixel "
            << unsigned(image.pixels.back()) << "\n";
  return 0;
}
