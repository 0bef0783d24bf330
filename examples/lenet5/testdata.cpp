// lenet5_testdata: files for lenet5's command-line tests (cli_test.sh).
//
//   lenet5_testdata png DATA_DIR INDEX OUT.png   MNIST test image INDEX as a PNG; prints its label
//   lenet5_testdata huge OUT.safetensors         LeNet-5 with every weight 3e38 (finite, outputs NaN)
//   lenet5_testdata other OUT.safetensors        the weights of another network
//   lenet5_testdata check-png FILE               decodes a PNG with ctnn's reader; prints WxH
//   lenet5_testdata fake-fashion DIR             a small learnable IDX data set as bright as
//                                                Fashion-MNIST (class k: a bright band at row 2k)
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "ctnn/io/image.hpp"

#include "ctnn/ctnn.hpp"
#include "ctnn/io/idx.hpp"
#include "ctnn/train/host_trainer.hpp"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb/stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace {

void put_be32(std::ofstream& f, std::uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  f.write(b, 4);
}

// count images of class i % 10: gray 90 (mean intensity above 0.2, as Fashion-MNIST), a band of
// 4 rows of 250 at row 2 + 2k, and deterministic noise.
void write_fake(const std::string& dir, const std::string& split, std::uint32_t count) {
  std::ofstream images(dir + "/" + split + "-images-idx3-ubyte", std::ios::binary);
  std::ofstream labels(dir + "/" + split + "-labels-idx1-ubyte", std::ios::binary);
  put_be32(images, 0x803), put_be32(images, count), put_be32(images, 28), put_be32(images, 28);
  put_be32(labels, 0x801), put_be32(labels, count);
  std::uint32_t noise = 12345 + count;
  for (std::uint32_t i = 0; i < count; ++i) {
    const int k = int(i * 7 % 10);
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        noise = noise * 1664525u + 1013904223u;
        const int band = y >= 2 + 2 * k && y < 6 + 2 * k;
        images.put(char(std::uint8_t((band ? 250 : 90) - int(noise >> 28))));
      }
    labels.put(char(k));
  }
  if (!images || !labels) throw std::runtime_error("cannot write the IDX files in " + dir);
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 4 && a[0] == "png") {
    const ctnn::Dataset test = ctnn::io::load_mnist(a[1], "t10k");
    const std::size_t i = std::stoul(a[2]);
    // A dark digit on white paper, as a scan would be, 3x larger than MNIST's.
    std::vector<unsigned char> img(84 * 84);
    for (int y = 0; y < 84; ++y)
      for (int x = 0; x < 84; ++x) img[std::size_t(y * 84 + x)] = 255 - test.pixels[i * 784 + std::size_t(y / 3 * 28 + x / 3)];
    if (!stbi_write_png(a[3].c_str(), 84, 84, 1, img.data(), 84)) throw std::runtime_error("cannot write " + a[3]);
    std::cout << int(test.labels[i]) << "\n";
    return 0;
  }
  if (a.size() == 2 && a[0] == "huge") {
    ctnn::Trainer<ctnn::models::LeNet5, ctnn::host, 1> t;
    t.set_parameters(std::vector<float>(t.parameters().size(), 3e38f));
    t.save_weights(a[1]);
    return 0;
  }
  if (a.size() == 2 && a[0] == "other") {
    using Other = ctnn::Network<ctnn::Seq<ctnn::Conv<4, 5>, ctnn::ReLU, ctnn::Pool<2>, ctnn::Dense<10>, ctnn::Softmax>,
                                ctnn::Input<1, 28, 28>>;
    ctnn::Trainer<Other, ctnn::host, 1> t;
    t.save_weights(a[1]);
    return 0;
  }
  if (a.size() == 2 && a[0] == "check-png") {
    const ctnn::io::GrayImage g = ctnn::io::load_gray_image(a[1]);
    std::cout << g.width << "x" << g.height << "\n";
    return 0;
  }
  if (a.size() == 2 && a[0] == "fake-fashion") {
    write_fake(a[1], "train", 600);
    write_fake(a[1], "t10k", 200);
    return 0;
  }
  std::cerr << "usage: lenet5_testdata png DATA_DIR INDEX OUT.png | huge OUT | other OUT | check-png FILE | fake-fashion DIR\n";
  return 2;
} catch (const std::exception& e) {
  std::cerr << "lenet5_testdata: " << e.what() << "\n";
  return 1;
}
