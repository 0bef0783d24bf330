#pragma once
// IDX file loader (the MNIST format): unsigned-byte images of rank 3 and labels of rank 1,
// raw or gzip-compressed (detected by the magic bytes 1f 8b, not by the file name).
// Every failure throws ctnn::io_error naming the file and what was expected vs found.
// For gzip files, byte offsets refer to the decompressed data.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <zlib.h>

#include "ctnn/core/dataset.hpp"
#include "ctnn/core/error.hpp"

namespace ctnn::io {

struct IdxImages {
    std::string path;
    std::size_t count = 0, rows = 0, cols = 0;
    std::vector<std::uint8_t> pixels;  // count * rows * cols, row-major
};

struct IdxLabels {
    std::string path;
    std::size_t count = 0;
    std::vector<std::uint8_t> labels;
};

// The data set type lives in core/dataset.hpp; io::Dataset is its name where the loaders made it.
using Dataset = ctnn::Dataset;

namespace detail {

// Refuse payloads above 1 GiB: a corrupt header must not make us allocate (or inflate) forever.
inline constexpr std::size_t max_payload_bytes = std::size_t{1} << 30;
inline constexpr std::size_t max_file_bytes = max_payload_bytes + 4 + 4 * 3;

inline std::string hex_byte(std::uint8_t b) {
    char buf[5];
    std::snprintf(buf, sizeof buf, "0x%02x", b);
    return buf;
}

inline io_error fail(const std::string& where, const std::string& what) {
    return io_error(where + ": " + what);
}

inline std::vector<std::uint8_t> read_raw(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw fail(path, "cannot open: no such file");
    if (!std::filesystem::is_regular_file(path, ec)) throw fail(path, "cannot open: not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw fail(path, "cannot open file for reading (permission denied?)");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    in.seekg(0, std::ios::beg);
    if (size < 0) throw fail(path, "cannot determine file size");
    if (static_cast<std::size_t>(size) > max_file_bytes)
        throw fail(path, "file is " + std::to_string(size) + " bytes, larger than the 1 GiB limit");
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    if (!in.read(reinterpret_cast<char*>(bytes.data()), size))
        throw fail(path, "read error after " + std::to_string(in.gcount()) + " of " +
                             std::to_string(size) + " bytes");
    return bytes;
}

// Inflates a whole gzip file held in memory, growing the output buffer as needed.
inline std::vector<std::uint8_t> gunzip(std::vector<std::uint8_t>& in, const std::string& path) {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 16) != Z_OK)  // 15 + 16: zlib window, gzip wrapper only
        throw fail(path, "zlib inflateInit2 failed");
    zs.next_in = in.data();
    zs.avail_in = static_cast<uInt>(in.size());  // in.size() <= max_file_bytes fits in uInt
    std::vector<std::uint8_t> out(std::min(std::max<std::size_t>(in.size() * 4, 1 << 16),
                                           max_file_bytes + 1));
    std::size_t have = 0;
    for (;;) {
        if (have == out.size()) out.resize(std::min(out.size() * 2, max_file_bytes + 1));
        zs.next_out = out.data() + have;
        zs.avail_out = static_cast<uInt>(out.size() - have);
        const int rc = inflate(&zs, Z_NO_FLUSH);
        have = out.size() - zs.avail_out;
        const std::string at = " at compressed byte offset " + std::to_string(in.size() - zs.avail_in);
        std::string err;
        if (have > max_file_bytes) err = "decompressed data exceeds the 1 GiB limit";
        else if (rc == Z_STREAM_END && zs.avail_in == 0) break;
        else if (rc == Z_STREAM_END) inflateReset(&zs);  // another gzip member follows
        else if (rc == Z_BUF_ERROR && zs.avail_in == 0)  // no input left, stream not finished
            err = "gzip stream truncated: input ended" + at + " before the end of the stream (" +
                  std::to_string(have) + " bytes decompressed; zlib: " + zError(rc) + ")";
        else if (rc != Z_OK)
            err = "gzip stream corrupt" + at + " (zlib: " + (zs.msg ? zs.msg : zError(rc)) + ")";
        if (!err.empty()) {
            inflateEnd(&zs);
            throw fail(path, err);
        }
    }
    inflateEnd(&zs);
    out.resize(have);
    return out;
}

// Reads the file, checks the IDX header (unsigned bytes, given rank) and payload length.
// Returns the dimensions; `bytes` is left holding only the payload.
inline std::vector<std::size_t> read_idx(const std::string& path, std::uint8_t rank,
                                         const char* kind, const char* payload_name,
                                         std::vector<std::uint8_t>& bytes) {
    bytes = read_raw(path);
    std::string where = path;
    if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
        bytes = gunzip(bytes, path);
        where += " (decompressed)";
    }
    const std::size_t n = bytes.size();
    if (n < 4)
        throw fail(where, "file is " + std::to_string(n) + " bytes, shorter than the 4-byte IDX magic");
    if (bytes[0] != 0 || bytes[1] != 0)
        throw fail(where, "bad IDX magic at byte offset 0: expected first two bytes 0x00 0x00, found " +
                              hex_byte(bytes[0]) + " " + hex_byte(bytes[1]));
    if (bytes[2] != 0x08)
        throw fail(where, "unsupported data type byte at offset 2: expected 0x08 (unsigned byte), found " +
                              hex_byte(bytes[2]));
    if (bytes[3] != rank)
        throw fail(where, "wrong rank byte at offset 3: expected " + std::to_string(rank) + " (" + kind +
                              "), found " + std::to_string(bytes[3]));
    const std::size_t header = 4 + 4 * std::size_t{rank};
    if (n < header)
        throw fail(where, "header truncated: expected a " + std::to_string(header) + "-byte header (magic + " +
                              std::to_string(rank) + " dimensions), found only " + std::to_string(n) + " bytes");
    std::vector<std::size_t> dims(rank);
    std::uint64_t product = 1;
    std::string shape;
    for (std::size_t i = 0; i < rank; ++i) {
        const std::uint8_t* p = &bytes[4 + 4 * i];  // big-endian uint32
        dims[i] = std::size_t{p[0]} << 24 | std::size_t{p[1]} << 16 | std::size_t{p[2]} << 8 | p[3];
        shape += (i ? " x " : "") + std::to_string(dims[i]);
        if (dims[i] == 0)
            throw fail(where, "dimension " + std::to_string(i) + " (byte offset " + std::to_string(4 + 4 * i) +
                                  ") is zero; expected every dimension > 0");
        // Each dim < 2^32 and product is <= 2^30 before this step, so 64 bits cannot overflow.
        product *= dims[i];
        if (product > max_payload_bytes)
            throw fail(where, "dimensions " + shape + "... exceed the 1 GiB payload limit");
    }
    const std::uint64_t found = n - header;
    if (found != product)
        throw fail(where, "expected " + std::to_string(product) + " bytes of " + payload_name + " after the " +
                              std::to_string(header) + "-byte header, found " + std::to_string(found) +
                              (found < product ? " (file truncated"
                                               : " (" + std::to_string(found - product) + " trailing bytes") +
                              "; dimensions " + shape + ")");
    bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
    return dims;
}

}  // namespace detail

inline IdxImages load_idx_images(const std::string& path) {
    IdxImages r;
    r.path = path;
    const auto d = detail::read_idx(path, 3, "images", "pixel data", r.pixels);
    r.count = d[0], r.rows = d[1], r.cols = d[2];
    return r;
}

inline IdxLabels load_idx_labels(const std::string& path) {
    IdxLabels r;
    r.path = path;
    r.count = detail::read_idx(path, 1, "labels", "label data", r.labels)[0];
    return r;
}

// Loads matching image and label files; every label must be < num_classes.
inline Dataset load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                                int num_classes = 10) {
    if (num_classes < 1 || num_classes > 256)
        throw std::invalid_argument("ctnn::io::load_idx_dataset: num_classes must be in [1, 256], got " +
                                    std::to_string(num_classes));
    IdxImages im = load_idx_images(images_path);
    IdxLabels lb = load_idx_labels(labels_path);
    if (im.count != lb.count)
        throw io_error("image/label count mismatch: " + images_path + " has " + std::to_string(im.count) +
                       " images but " + labels_path + " has " + std::to_string(lb.count) + " labels");
    for (std::size_t i = 0; i < lb.count; ++i)
        if (lb.labels[i] >= num_classes)
            throw detail::fail(labels_path, "label at index " + std::to_string(i) + " (byte offset " +
                                                std::to_string(8 + i) + ") is " + std::to_string(lb.labels[i]) +
                                                ", expected < " + std::to_string(num_classes) + " (num_classes)");
    return Dataset{im.count, im.rows, im.cols, std::move(im.pixels), std::move(lb.labels)};
}

// Loads MNIST split "train" or "t10k" from `dir`, accepting raw or .gz files.
inline Dataset load_mnist(const std::string& dir, std::string_view split) {
    if (split != "train" && split != "t10k")
        throw std::invalid_argument("ctnn::io::load_mnist: split must be \"train\" or \"t10k\", got \"" +
                                    std::string(split) + "\"");
    auto find = [&](const char* suffix) {
        const std::string raw = (std::filesystem::path(dir) / (std::string(split) + suffix)).string();
        std::error_code ec;
        if (std::filesystem::exists(raw, ec)) return raw;
        if (std::filesystem::exists(raw + ".gz", ec)) return raw + ".gz";
        throw io_error("MNIST " + std::string(split) + " file not found: tried " + raw + " and " + raw +
                       ".gz; run scripts/fetch_mnist.sh to download MNIST");
    };
    const std::string images = find("-images-idx3-ubyte");
    const std::string labels = find("-labels-idx1-ubyte");
    return load_idx_dataset(images, labels, 10);
}

}  // namespace ctnn::io
