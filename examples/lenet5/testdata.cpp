// lenet5_testdata: files for lenet5's command-line tests (cli_test.sh).
//
//   lenet5_testdata png DATA_DIR INDEX OUT.png   MNIST test image INDEX as a PNG; prints its label
//   lenet5_testdata huge OUT.safetensors         LeNet-5 with every weight 3e38 (finite, outputs NaN)
//   lenet5_testdata other OUT.safetensors        the weights of another network
//   lenet5_testdata check-png FILE               decodes a PNG with ctnn's reader; prints WxH
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#define CTNN_STB_IMPLEMENTATION
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
  std::cerr << "usage: lenet5_testdata png DATA_DIR INDEX OUT.png | huge OUT | other OUT | check-png FILE\n";
  return 2;
} catch (const std::exception& e) {
  std::cerr << "lenet5_testdata: " << e.what() << "\n";
  return 1;
}
