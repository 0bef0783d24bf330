// Tests for the IDX loader: good raw and gzip files round-trip exactly; every kind of bad file
// is rejected with a ctnn::io_error naming the file and what was expected vs found.
#include <catch2/catch.hpp>

#include "temp_dir.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "ctnn/io/idx.hpp"

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;
using Catch::Contains;

namespace {


// IDX bytes: magic 00 00 <type> <rank>, big-endian uint32 dims, then the payload.
Bytes idx(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& payload) {
    Bytes b{0, 0, type, static_cast<std::uint8_t>(dims.size())};
    for (auto d : dims)
        for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
}

Bytes random_bytes(std::size_t n, int lo, int hi, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> dist(lo, hi);
    Bytes b(n);
    for (auto& x : b) x = static_cast<std::uint8_t>(dist(rng));
    return b;
}

void write_raw(const std::string& path, const Bytes& b) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    REQUIRE(out.good());
}

void write_gz(const std::string& path, const Bytes& b) {
    gzFile f = gzopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
    REQUIRE(gzclose(f) == Z_OK);
}

Bytes read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
}

constexpr std::uint32_t N = 7, R = 5, C = 4;
const Bytes pixels = random_bytes(N * R * C, 1, 255, 42);  // non-zero, so a zeroed buffer can't pass
const Bytes labels = random_bytes(N, 0, 9, 7);
const Bytes good_images = idx(0x08, {N, R, C}, pixels);
const Bytes good_labels = idx(0x08, {N}, labels);

}  // namespace

// Both the exception type and the message text matter.
#define REQUIRE_IO_ERROR(expr, matcher)              \
    do {                                             \
        REQUIRE_THROWS_AS(expr, ctnn::io_error);     \
        REQUIRE_THROWS_WITH(expr, matcher);          \
    } while (0)

TEST_CASE("IDX raw files round-trip exactly", "[io][idx]") {
    ctnn_test::TempDir t{"ctnn_test_idx"};
    write_raw(t / "img", good_images);
    write_raw(t / "lbl", good_labels);

    const auto im = ctnn::io::load_idx_images(t / "img");
    CHECK(im.path == t / "img");
    CHECK(im.count == N);
    CHECK(im.rows == R);
    CHECK(im.cols == C);
    CHECK(im.pixels == pixels);

    const auto lb = ctnn::io::load_idx_labels(t / "lbl");
    CHECK(lb.count == N);
    CHECK(lb.labels == labels);

    const auto ds = ctnn::io::load_idx_dataset(t / "img", t / "lbl");
    CHECK(ds.count == N);
    CHECK(ds.rows == R);
    CHECK(ds.cols == C);
    CHECK(ds.pixels == pixels);
    CHECK(ds.labels == labels);
}

TEST_CASE("IDX gzip files round-trip exactly, detected by magic not extension", "[io][idx]") {
    ctnn_test::TempDir t{"ctnn_test_idx"};
    write_gz(t / "img.gz", good_images);
    write_gz(t / "lbl_no_ext", good_labels);  // gzip without .gz suffix
    write_raw(t / "raw.gz", good_images);      // raw despite .gz suffix
    REQUIRE(read_all(t / "img.gz").at(0) == 0x1f);

    const auto ds = ctnn::io::load_idx_dataset(t / "img.gz", t / "lbl_no_ext");
    CHECK(ds.count == N);
    CHECK(ds.rows == R);
    CHECK(ds.cols == C);
    CHECK(ds.pixels == pixels);
    CHECK(ds.labels == labels);
    CHECK(ctnn::io::load_idx_images(t / "raw.gz").pixels == pixels);
}

TEST_CASE("load_mnist finds raw or .gz files and explains when they are missing", "[io][idx]") {
    ctnn_test::TempDir t{"ctnn_test_idx"};
    write_gz(t / "t10k-images-idx3-ubyte.gz", good_images);
    write_raw(t / "t10k-labels-idx1-ubyte", good_labels);
    const auto ds = ctnn::io::load_mnist(t.path.string(), "t10k");
    CHECK(ds.pixels == pixels);
    CHECK(ds.labels == labels);

    const std::string tried = t / "train-images-idx3-ubyte";
    REQUIRE_IO_ERROR(ctnn::io::load_mnist(t.path.string(), "train"),
                     Contains(tried + " and " + tried + ".gz") && Contains("scripts/fetch_mnist.sh"));
    REQUIRE_THROWS_AS(ctnn::io::load_mnist(t.path.string(), "test"), std::invalid_argument);
}

TEST_CASE("IDX loader rejects bad files with precise messages", "[io][idx]") {
    ctnn_test::TempDir t{"ctnn_test_idx"};
    using ctnn::io::load_idx_images;
    using ctnn::io::load_idx_labels;

    SECTION("missing file") {
        REQUIRE_IO_ERROR(load_idx_images(t / "nope"), Contains(t / "nope") && Contains("no such file"));
    }
    SECTION("shorter than the magic") {
        write_raw(t / "tiny", {0, 0, 8});
        REQUIRE_IO_ERROR(load_idx_images(t / "tiny"),
                         Contains(t / "tiny") && Contains("file is 3 bytes, shorter than the 4-byte IDX magic"));
    }
    SECTION("bad magic") {
        Bytes b = good_images;
        b[0] = 0x12;
        b[1] = 0x34;
        write_raw(t / "magic", b);
        REQUIRE_IO_ERROR(load_idx_images(t / "magic"),
                         Contains(t / "magic") && Contains("byte offset 0") &&
                             Contains("expected first two bytes 0x00 0x00, found 0x12 0x34"));
    }
    SECTION("wrong data type byte") {
        write_raw(t / "type", idx(0x0D, {N, R, C}, pixels));  // 0x0D = float
        REQUIRE_IO_ERROR(load_idx_images(t / "type"),
                         Contains(t / "type") && Contains("offset 2") &&
                             Contains("expected 0x08 (unsigned byte), found 0x0d"));
    }
    SECTION("wrong rank") {
        write_raw(t / "rank", good_labels);
        REQUIRE_IO_ERROR(load_idx_images(t / "rank"),
                         Contains(t / "rank") && Contains("offset 3: expected 3 (images), found 1"));
        write_raw(t / "rank2", good_images);
        REQUIRE_IO_ERROR(load_idx_labels(t / "rank2"),
                         Contains(t / "rank2") && Contains("expected 1 (labels), found 3"));
    }
    SECTION("zero dimension") {
        write_raw(t / "zero", idx(0x08, {N, 0, C}, {}));
        REQUIRE_IO_ERROR(load_idx_images(t / "zero"),
                         Contains(t / "zero") && Contains("dimension 1 (byte offset 8) is zero"));
    }
    SECTION("absurd dimensions") {
        write_raw(t / "huge", idx(0x08, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, pixels));
        REQUIRE_IO_ERROR(load_idx_images(t / "huge"), Contains(t / "huge") && Contains("exceed the 1 GiB"));
    }
    SECTION("truncated header") {
        Bytes b(good_images.begin(), good_images.begin() + 10);
        write_raw(t / "hdr", b);
        REQUIRE_IO_ERROR(load_idx_images(t / "hdr"),
                         Contains(t / "hdr") && Contains("header truncated: expected a 16-byte header") &&
                             Contains("found only 10 bytes"));
    }
    SECTION("truncated payload") {
        Bytes b(good_images.begin(), good_images.end() - 3);
        write_raw(t / "short", b);
        REQUIRE_IO_ERROR(load_idx_images(t / "short"),
                         Contains(t / "short") &&
                             Contains("expected 140 bytes of pixel data after the 16-byte header") &&
                             Contains("found 137 (file truncated; dimensions 7 x 5 x 4)"));
    }
    SECTION("trailing bytes") {
        Bytes b = good_labels;
        b.push_back(1);
        b.push_back(2);
        write_raw(t / "trail", b);
        REQUIRE_IO_ERROR(load_idx_labels(t / "trail"),
                         Contains(t / "trail") &&
                             Contains("expected 7 bytes of label data after the 8-byte header, found 9") &&
                             Contains("2 trailing bytes"));
    }
    SECTION("payload error in a gzip file refers to decompressed data") {
        write_gz(t / "short.gz", Bytes(good_images.begin(), good_images.end() - 1));
        REQUIRE_IO_ERROR(load_idx_images(t / "short.gz"),
                         Contains(t / "short.gz" + " (decompressed)") && Contains("found 139 (file truncated"));
    }
    SECTION("truncated gzip") {
        write_gz(t / "full.gz", good_images);
        Bytes gz = read_all(t / "full.gz");
        gz.resize(gz.size() / 2);
        write_raw(t / "cut.gz", gz);
        REQUIRE_IO_ERROR(load_idx_images(t / "cut.gz"),
                         Contains(t / "cut.gz") && Contains("gzip stream truncated"));
    }
    SECTION("corrupt gzip") {
        write_gz(t / "full.gz", good_images);
        Bytes gz = read_all(t / "full.gz");
        gz[3] = 0xE0;  // reserved FLG bits must be zero
        write_raw(t / "bad.gz", gz);
        REQUIRE_IO_ERROR(load_idx_images(t / "bad.gz"),
                         Contains(t / "bad.gz") && Contains("gzip stream corrupt") && Contains("zlib: "));
    }
    SECTION("image and label counts disagree") {
        write_raw(t / "img", good_images);
        write_raw(t / "lbl", idx(0x08, {N - 1}, Bytes(labels.begin(), labels.end() - 1)));
        REQUIRE_IO_ERROR(ctnn::io::load_idx_dataset(t / "img", t / "lbl"),
                         Contains(t / "img" + " has 7 images") && Contains(t / "lbl" + " has 6 labels"));
    }
    SECTION("label out of range") {
        Bytes lb = labels;
        lb[4] = 10;
        write_raw(t / "img", good_images);
        write_raw(t / "lbl", idx(0x08, {N}, lb));
        REQUIRE_IO_ERROR(ctnn::io::load_idx_dataset(t / "img", t / "lbl"),
                         Contains(t / "lbl") && Contains("label at index 4 (byte offset 12) is 10") &&
                             Contains("expected < 10"));
        // The same file is fine with more classes.
        CHECK(ctnn::io::load_idx_dataset(t / "img", t / "lbl", 11).labels == lb);
    }
}

namespace {

// A gzip file of `head` followed by `zeros` zero bytes, written in chunks (a compression bomb).
void write_gz_bomb(const std::string& path, const Bytes& head, std::size_t zeros) {
    gzFile f = gzopen(path.c_str(), "wb1");
    REQUIRE(f != nullptr);
    REQUIRE(gzwrite(f, head.data(), static_cast<unsigned>(head.size())) == static_cast<int>(head.size()));
    const Bytes chunk(1 << 20, 0);
    for (std::size_t left = zeros; left > 0;) {
        const unsigned k = static_cast<unsigned>(std::min(left, chunk.size()));
        REQUIRE(gzwrite(f, chunk.data(), k) == static_cast<int>(k));
        left -= k;
    }
    REQUIRE(gzclose(f) == Z_OK);
}

// Peak resident memory (KiB) of a child process running f; the child exits 0 when f returns true.
template <class F>
std::pair<long, int> child_peak_kib(F&& f) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(f() ? 0 : 1);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    rusage ru{};
    getrusage(RUSAGE_CHILDREN, &ru);
    return {ru.ru_maxrss, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

}  // namespace

// Issue 10, item 7: a gzip file was inflated completely before its header was checked, so a 1-2 MB
// file cost 2 GiB. Now the header comes first and only the declared payload is kept.
TEST_CASE("IDX gzip: a compression bomb costs only the payload its header declares", "[io][idx]") {
    ctnn_test::TempDir t{"ctnn_test_idx"};
    write_gz_bomb(t / "bomb.gz", good_labels, std::size_t{300} << 20);  // 300 MiB of zeros after the labels
    rusage self{};
    getrusage(RUSAGE_SELF, &self);
    const auto [peak, rc] = child_peak_kib([&] {
        try {
            ctnn::io::load_idx_labels(t / "bomb.gz");
        } catch (const ctnn::io_error& e) {
            return std::string(e.what()).find("expected 7 bytes of label data after the 8-byte header, found more "
                                              "than 1048583 (more than 1048576 trailing bytes") != std::string::npos;
        }
        return false;
    });
    CHECK(rc == 0);
    CHECK(peak < self.ru_maxrss + 64 * 1024);  // the old loader held all 300 MiB

    // A header that declares more than the stream holds: the buffer grows with the data, not the claim.
    write_gz_bomb(t / "claims.gz", idx(0x08, {60000, 28, 28}, {}), 1000);
    REQUIRE_IO_ERROR(ctnn::io::load_idx_images(t / "claims.gz"),
                     Contains("expected 47040000 bytes of pixel data after the 16-byte header, found 1000 (file truncated"));
    // Two gzip members in one file are one stream (as gzip -c a b > ab makes).
    Bytes two;
    write_gz(t / "a.gz", Bytes(good_images.begin(), good_images.begin() + 20));
    write_gz(t / "b.gz", Bytes(good_images.begin() + 20, good_images.end()));
    two = read_all(t / "a.gz");
    const Bytes b = read_all(t / "b.gz");
    two.insert(two.end(), b.begin(), b.end());
    write_raw(t / "two.gz", two);
    CHECK(ctnn::io::load_idx_images(t / "two.gz").pixels == pixels);
}

TEST_CASE("IDX: control characters in a file name are escaped in messages", "[io][idx]") {
    ctnn_test::TempDir t{"ctnn_test_idx"};
    write_raw(t / "a\x1b[2Jb", {0, 0, 8});
    REQUIRE_IO_ERROR(ctnn::io::load_idx_images(t / "a\x1b[2Jb"), Contains(t / "a\\x1b[2Jb: file is 3 bytes"));
}
