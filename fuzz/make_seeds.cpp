// Writes the seed corpora under fuzz/corpus/<target>/: small valid files of each format (and a few
// near misses) for the fuzzers to mutate. Run by hand when the formats change:
//   g++ -std=c++20 -I include -I tests/host fuzz/make_seeds.cpp -lz -o /tmp/make_seeds && /tmp/make_seeds
//   fuzz/corpus
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb/stb_image_write.h>

#include <ctnn/io/safetensors.hpp>

#include "image_writers.hpp"

namespace fs = std::filesystem;
using ctnn_test::Bytes;

static fs::path root;
static void put(const std::string& target, const std::string& name, const Bytes& b) {
  fs::create_directories(root / target);
  std::ofstream(root / target / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}
static Bytes gz(const Bytes& b) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&zs, uLong(b.size())) + 32);
  zs.next_in = const_cast<std::uint8_t*>(b.data());
  zs.avail_in = uInt(b.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}
static Bytes idx(const std::vector<std::uint32_t>& dims, std::uint8_t fill) {
  Bytes b{0, 0, 8, std::uint8_t(dims.size())};
  std::size_t n = 1;
  for (const auto d : dims) ctnn_test::put_be32(b, d), n *= d;
  for (std::size_t k = 0; k < n; ++k) b.push_back(std::uint8_t(fill + k * 7));
  return b;
}
static Bytes gradient(int n) {
  Bytes b(static_cast<std::size_t>(n), 0);
  for (int k = 0; k < n; ++k) b[std::size_t(k)] = std::uint8_t(k * 37);
  return b;
}

int main(int argc, char** argv) {
  root = argc > 1 ? argv[1] : "fuzz/corpus";
  // IDX.
  put("idx_raw", "images_3x4x5", idx({3, 4, 5}, 1));
  put("idx_raw", "labels_10", idx({10}, 0));
  put("idx_gzip", "images_3x4x5.gz", gz(idx({3, 4, 5}, 1)));
  put("idx_gzip", "labels_10.gz", gz(idx({10}, 0)));
  const Bytes whole = idx({2, 2, 2}, 3);  // as two gzip members, split inside the header
  Bytes two = gz(Bytes(whole.begin(), whole.begin() + 10)), tail = gz(Bytes(whole.begin() + 10, whole.end()));
  two.insert(two.end(), tail.begin(), tail.end());
  put("idx_gzip", "two_members.gz", two);
  // JSON and safetensors.
  auto text = [](const std::string& s) { return Bytes(s.begin(), s.end()); };
  put("json", "header",
      text(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})"));
  put("json", "all_kinds",
      text(
          R"( {"a": [1, -2, 0, 9223372036854775807], "b": {"c": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}, "t": true, "f": false, "n": null, "e": {}, "l": []} )"));
  const std::string tmp = (fs::temp_directory_path() / "ctnn_seed.safetensors").string();
  std::string root_target = "safetensors";
  auto st = [&](const std::string& name, const std::vector<ctnn::io::Tensor>& t,
                const std::map<std::string, std::string>& m) {
    ctnn::io::write_safetensors(tmp, t, m);
    std::ifstream in(tmp, std::ios::binary);
    put(root_target, name, Bytes(std::istreambuf_iterator<char>(in), {}));
  };
  std::vector<float> w0(18), b0 = {0.5f, -0.5f}, w2(54), b2 = {1, 2, 3};
  for (int k = 0; k < 18; ++k) w0[std::size_t(k)] = 0.01f * float(k);
  for (int k = 0; k < 54; ++k) w2[std::size_t(k)] = -0.001f * float(k);
  st("tiny_network",
     {ctnn::io::Tensor::from_floats("layers.0.weight", {2, 1, 3, 3}, w0),
      ctnn::io::Tensor::from_floats("layers.0.bias", {2}, b0),
      ctnn::io::Tensor::from_floats("layers.2.weight", {3, 18}, w2),
      ctnn::io::Tensor::from_floats("layers.2.bias", {3}, b2)},
     {{"format", "ctnn"}});
  st("checkpoint",
     {ctnn::io::Tensor::from_floats("m", {2, 2}, std::vector<float>{1, 2, 3, 4}),
      ctnn::io::Tensor::from_int64s("step", {1}, std::vector<std::int64_t>{42})},
     {{"epoch", "3"}});
  // Weight files with the metadata the trainer writes and reads (train/checkpoint.hpp).
  root_target = "checkpoint";
  st("weights_class_names",
     {ctnn::io::Tensor::from_floats("layers.0.weight", {2, 1, 3, 3}, w0),
      ctnn::io::Tensor::from_floats("layers.0.bias", {2}, b0)},
     {{"format", "ctnn"}, {"class_names", R"(["zero", "one", "tw\u00f6", "\"three\""])"}, {"mean", "0.1307"}});
  st("weights_no_names", {ctnn::io::Tensor::from_floats("layers.0.bias", {2}, b0)}, {{"format", "ctnn-checkpoint"}});
  fs::remove(tmp);
  // PNG: each colour type, a few depths, palette with tRNS.
  put("png", "gray8.png", ctnn_test::png(5, 4, 0, 8, gradient(20)));
  put("png", "gray1.png", ctnn_test::png(9, 3, 0, 1, gradient(6)));
  put("png", "gray16_key.png", ctnn_test::png(3, 2, 0, 16, gradient(12), {}, Bytes{0, 37}));
  put("png", "rgb8.png", ctnn_test::png(4, 3, 2, 8, gradient(36)));
  put("png", "palette4.png",
      ctnn_test::png(6, 2, 3, 4, Bytes{0x01, 0x23, 0x45, 0x67, 0x89, 0xab}, gradient(48), Bytes{0, 128, 255}));
  put("png", "ga16.png", ctnn_test::png(2, 2, 4, 16, gradient(16)));
  put("png", "rgba8.png", ctnn_test::png(3, 3, 6, 8, gradient(36), {}, {}, 7));
  std::vector<std::uint32_t> rgb16(7 * 5 * 3);
  for (std::size_t k = 0; k < rgb16.size(); ++k) rgb16[k] = std::uint32_t(k * 2039 % 65536);
  put("png", "rgb16_adam7.png", ctnn_test::png_from_samples(7, 5, 2, 16, rgb16, true));
  put("png", "gray2_adam7.png", ctnn_test::png_from_samples(10, 9, 0, 2, std::vector<std::uint32_t>(90, 2), true));
  // BMP.
  put("bmp", "rgb24.bmp", ctnn_test::bmp(5, 3, 24, false, gradient(45)));
  put("bmp", "rgb24_topdown.bmp", ctnn_test::bmp(5, 3, 24, true, gradient(45)));
  put("bmp", "pal8.bmp", ctnn_test::bmp(6, 2, 8, false, Bytes{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, gradient(16)));
  put("bmp", "pal1.bmp",
      ctnn_test::bmp(9, 2, 1, true, Bytes{0xa5, 0x80, 0x5a, 0x00}, Bytes{0, 0, 0, 0, 255, 255, 255, 0}));
  put("bmp", "bitfields565.bmp", ctnn_test::bmp(3, 2, 16, false, gradient(12), {}, 3, {0xf800, 0x07e0, 0x001f}));
  put("bmp", "rgb32.bmp", ctnn_test::bmp(2, 2, 32, false, gradient(16)));
  // PNM.
  put("pnm", "gray.pgm", ctnn_test::pnm(1, 4, 3, 255, {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 255}, "seed"));
  put("pnm", "gray16.pgm", ctnn_test::pnm(1, 2, 2, 1000, {0, 999, 1000, 500}));
  put("pnm", "rgb15.ppm", ctnn_test::pnm(3, 2, 1, 15, {0, 5, 10, 15, 1, 2}));
  // JPEG (baseline, from stb_image_write): gray and colour.
  auto jpg = [](int w, int h, int comp, int quality) {
    Bytes pixels(std::size_t(w * h * comp));
    for (std::size_t k = 0; k < pixels.size(); ++k) pixels[k] = std::uint8_t(k * 13 % 251);
    Bytes out;
    stbi_write_jpg_to_func(ctnn_test::append_bytes, &out, w, h, comp, pixels.data(), quality);
    return out;
  };
  put("jpeg", "gray.jpg", jpg(16, 8, 1, 90));
  put("jpeg", "rgb.jpg", jpg(24, 16, 3, 50));
  put("jpeg", "rgb_q100.jpg", jpg(9, 9, 3, 100));
  // Four more JPEG seeds come from libjpeg-turbo's cjpeg (Debian: libjpeg-turbo-progs), which writes
  // what stb_image_write cannot, from 16x16 (33x17) PGM/PPM noise: gray_restart.jpg
  // (cjpeg -restart 1B), two_scans_restart.jpg (-scans with "0,1;" and "2;", -restart 2B),
  // sampling_4x1.jpg (-sample 4x1), rgb_coded.jpg (-rgb).
  return 0;
}
