#pragma once
// IDX file loader (the MNIST format): unsigned-byte images of rank 3 and labels of rank 1,
// raw or gzip-compressed (detected by the magic bytes 1f 8b, not by the file name).
// Every failure throws ctnn::io_error naming the file and what was expected vs found.
// For gzip files, byte offsets refer to the decompressed data.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <zlib.h>

#include "ctnn/core/dataset.hpp"
#include "ctnn/core/error.hpp"
#include "file.hpp"
#include "printable.hpp"

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

inline std::string hex_byte(std::uint8_t b) {
    char buf[5];
    std::snprintf(buf, sizeof buf, "0x%02x", b);
    return buf;
}

inline io_error fail(const std::string& where, const std::string& what) {
    return io_error(where + ": " + what);
}

// The bytes of an IDX file, from disk or memory, inflated on the fly when they are gzip (magic
// 1f 8b). Reading is incremental, so the header is checked before the payload is inflated and a
// gzip bomb costs no more than the payload its header declares.
class IdxStream {
  public:
    explicit IdxStream(const std::string& path) : file_(std::make_unique<InputFile>(path)), name_(printable(path)) {
        size_ = file_->size();
        start();
    }
    IdxStream(const std::uint8_t* data, std::size_t size, std::string name)
        : memory_(data), size_(size), name_(std::move(name)) {
        start();
    }
    IdxStream(const IdxStream&) = delete;
    IdxStream& operator=(const IdxStream&) = delete;
    ~IdxStream() {
        if (gzip_) inflateEnd(&zs_);
    }

    bool gzip() const { return gzip_; }
    const std::string& name() const { return name_; }  // printable
    std::uint64_t raw_size() const { return size_; }

    // Reads up to n bytes; fewer only at the end of the data. Throws io_error for a corrupt or
    // truncated gzip stream.
    std::size_t read(std::uint8_t* dst, std::size_t n) {
        if (!gzip_) {
            const std::size_t k = std::size_t(std::min<std::uint64_t>(n, size_ - pos_));
            raw(pos_, dst, k);
            pos_ += k;
            return k;
        }
        std::size_t have = 0;
        while (have < n && !done_) {
            if (zs_.avail_in == 0 && pos_ < size_) {
                const std::size_t k = std::size_t(std::min<std::uint64_t>(in_.size(), size_ - pos_));
                raw(pos_, in_.data(), k);
                pos_ += k;
                zs_.next_in = in_.data();
                zs_.avail_in = static_cast<uInt>(k);
            }
            const std::size_t chunk = std::min<std::size_t>(n - have, std::size_t{1} << 30);
            zs_.next_out = dst + have;
            zs_.avail_out = static_cast<uInt>(chunk);
            const int rc = inflate(&zs_, Z_NO_FLUSH);
            have += chunk - zs_.avail_out;
            const std::string at = " at compressed byte offset " + std::to_string(pos_ - zs_.avail_in);
            if (rc == Z_STREAM_END) {
                if (zs_.avail_in == 0 && pos_ == size_) done_ = true;
                else inflateReset(&zs_);  // another gzip member follows
            } else if (rc == Z_BUF_ERROR && zs_.avail_in == 0 && pos_ == size_) {
                throw fail(name_, "gzip stream truncated: input ended" + at + " before the end of the stream (" +
                                      std::to_string(zs_.total_out) + " bytes decompressed in this member; zlib: " +
                                      zError(rc) + ")");
            } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                throw fail(name_, "gzip stream corrupt" + at + " (zlib: " + (zs_.msg ? zs_.msg : zError(rc)) + ")");
            }
        }
        return have;
    }

    // Reads and discards up to `limit` bytes; returns how many there were.
    std::uint64_t skip(std::uint64_t limit) {
        std::vector<std::uint8_t> sink(1 << 16);
        std::uint64_t total = 0;
        while (total < limit) {
            const std::size_t k = read(sink.data(), std::size_t(std::min<std::uint64_t>(sink.size(), limit - total)));
            if (k == 0) break;
            total += k;
        }
        return total;
    }

  private:
    std::unique_ptr<InputFile> file_;
    const std::uint8_t* memory_ = nullptr;
    std::uint64_t size_ = 0, pos_ = 0;  // raw bytes: total and consumed
    std::string name_;
    bool gzip_ = false, done_ = false;
    z_stream zs_{};
    std::vector<std::uint8_t> in_;

    void raw(std::uint64_t at, std::uint8_t* dst, std::size_t n) {
        if (file_) file_->read(at, dst, n);
        else if (n) std::memcpy(dst, memory_ + at, n);
    }

    void start() {
        std::uint8_t magic[2] = {0, 0};
        if (size_ >= 2) raw(0, magic, 2);
        if (magic[0] != 0x1f || magic[1] != 0x8b) return;
        if (inflateInit2(&zs_, 15 + 16) != Z_OK)  // 15 + 16: zlib window, gzip wrapper only
            throw fail(name_, "zlib inflateInit2 failed");
        gzip_ = true;
        in_.resize(1 << 16);
    }
};

// Reads the IDX header (unsigned bytes, given rank) and exactly the payload it declares into
// `payload`. Returns the dimensions. Byte offsets in messages refer to the decompressed data.
inline std::vector<std::size_t> read_idx(IdxStream& in, std::uint8_t rank, const char* kind,
                                         const char* payload_name, std::vector<std::uint8_t>& payload) {
    const std::string where = in.name() + (in.gzip() ? " (decompressed)" : "");
    std::uint8_t head[4 + 4 * 255];
    const std::size_t n = in.read(head, 4);
    if (n < 4)
        throw fail(where, "file is " + std::to_string(n) + " bytes, shorter than the 4-byte IDX magic");
    if (head[0] != 0 || head[1] != 0)
        throw fail(where, "bad IDX magic at byte offset 0: expected first two bytes 0x00 0x00, found " +
                              hex_byte(head[0]) + " " + hex_byte(head[1]));
    if (head[2] != 0x08)
        throw fail(where, "unsupported data type byte at offset 2: expected 0x08 (unsigned byte), found " +
                              hex_byte(head[2]));
    if (head[3] != rank)
        throw fail(where, "wrong rank byte at offset 3: expected " + std::to_string(rank) + " (" + kind +
                              "), found " + std::to_string(head[3]));
    const std::size_t header = 4 + 4 * std::size_t{rank};
    const std::size_t got = 4 + in.read(head + 4, header - 4);
    if (got < header)
        throw fail(where, "header truncated: expected a " + std::to_string(header) + "-byte header (magic + " +
                              std::to_string(rank) + " dimensions), found only " + std::to_string(got) + " bytes");
    std::vector<std::size_t> dims(rank);
    std::uint64_t product = 1;
    std::string shape;
    for (std::size_t i = 0; i < rank; ++i) {
        const std::uint8_t* p = &head[4 + 4 * i];  // big-endian uint32
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
    auto mismatch = [&](std::uint64_t found, const std::string& more) {
        return fail(where, "expected " + std::to_string(product) + " bytes of " + payload_name + " after the " +
                               std::to_string(header) + "-byte header, found " + more + std::to_string(found) +
                               (found < product ? " (file truncated"
                                                : " (" + more + std::to_string(found - product) + " trailing bytes") +
                               "; dimensions " + shape + ")");
    };
    // A raw file's size is known: check it before reading anything more.
    if (!in.gzip() && in.raw_size() - header != product) throw mismatch(in.raw_size() - header, "");
    // Grow the buffer as data arrives (at most the declared payload), so a short stream costs little.
    payload.clear();
    std::size_t have = 0;
    while (have < product) {
        payload.resize(std::size_t(std::min<std::uint64_t>(product, std::max<std::uint64_t>(2 * have, 1 << 20))));
        const std::size_t k = in.read(payload.data() + have, payload.size() - have);
        have += k;
        if (k == 0) break;
    }
    if (have < product) throw mismatch(have, "");
    // Count what follows, up to 1 MiB (inflating, not storing).
    constexpr std::uint64_t count_up_to = std::uint64_t{1} << 20;
    const std::uint64_t extra = in.skip(count_up_to);
    if (extra > 0) throw mismatch(product + extra, extra == count_up_to ? "more than " : "");
    return dims;
}

inline std::vector<std::size_t> read_idx(const std::string& path, std::uint8_t rank, const char* kind,
                                         const char* payload_name, std::vector<std::uint8_t>& payload) {
    IdxStream in(path);
    return read_idx(in, rank, kind, payload_name, payload);
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
        throw io_error("image/label count mismatch: " + printable(images_path) + " has " + std::to_string(im.count) +
                       " images but " + printable(labels_path) + " has " + std::to_string(lb.count) + " labels");
    for (std::size_t i = 0; i < lb.count; ++i)
        if (lb.labels[i] >= num_classes)
            throw detail::fail(printable(labels_path), "label at index " + std::to_string(i) + " (byte offset " +
                                                std::to_string(8 + i) + ") is " + std::to_string(lb.labels[i]) +
                                                ", expected < " + std::to_string(num_classes) + " (num_classes)");
    return Dataset{im.count, im.rows, im.cols, std::move(im.pixels), std::move(lb.labels), {}};
}

// Loads MNIST split "train" or "t10k" from `dir`, accepting raw or .gz files.
inline Dataset load_mnist(const std::string& dir, std::string_view split) {
    if (split != "train" && split != "t10k")
        throw std::invalid_argument("ctnn::io::load_mnist: split must be \"train\" or \"t10k\", got \"" +
                                    printable(split) + "\"");
    auto find = [&](const char* suffix) {
        const std::string raw = (std::filesystem::path(dir) / (std::string(split) + suffix)).string();
        std::error_code ec;
        if (std::filesystem::exists(raw, ec)) return raw;
        if (std::filesystem::exists(raw + ".gz", ec)) return raw + ".gz";
        throw io_error("MNIST " + std::string(split) + " file not found: tried " + printable(raw) + " and " +
                       printable(raw) + ".gz; run scripts/fetch_mnist.sh to download MNIST");
    };
    const std::string images = find("-images-idx3-ubyte");
    const std::string labels = find("-labels-idx1-ubyte");
    return load_idx_dataset(images, labels, 10);
}

}  // namespace ctnn::io
