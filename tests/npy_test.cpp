// .npy files: round trips of every dtype and layout, files written by hand in each format variant,
// every kind of malformed file rejected with a message naming the file and the problem, and
// interoperability with numpy itself when it is installed.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "grammar/diagnostic.hpp"
#include "runtime/npy.hpp"

using namespace einc;
namespace fs = std::filesystem;

namespace {

std::vector<std::byte> to_bytes(std::string_view text) {
    std::vector<std::byte> out(text.size());
    std::memcpy(out.data(), text.data(), text.size());
    return out;
}

// A .npy file by hand: magic, version major.0, the header exactly as given, then the data.
std::vector<std::byte> npy_file(std::string_view header, std::string_view data, int major = 1) {
    std::string out = "\x93NUMPY";
    out += static_cast<char>(major);
    out += '\0';
    const int length_size = major == 1 ? 2 : 4;
    for (int i = 0; i < length_size; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    out += header;
    out += data;
    return to_bytes(out);
}

template <typename T>
std::string raw(std::initializer_list<T> values) {
    std::string out(values.size() * sizeof(T), '\0');
    std::memcpy(out.data(), std::data(values), out.size());
    return out;
}

// The bytes of `value` in big-endian order.
template <typename T>
std::string big_endian(T value) {
    std::string out(sizeof(T), '\0');
    std::memcpy(out.data(), &value, sizeof(T));
    if constexpr (std::endian::native == std::endian::little) std::reverse(out.begin(), out.end());
    return out;
}

std::string first_bytes(const TensorView& view, std::size_t count) {
    return std::string(static_cast<const char*>(view.data), count);
}

template <typename T>
std::vector<T> values_of(const Tensor& tensor) {
    std::vector<T> out(tensor.nbytes() / sizeof(T));  // (a complex element: two parts)
    if (!out.empty()) std::memcpy(out.data(), tensor.data(), tensor.nbytes());
    return out;
}

Tensor tensor_of(DType dtype, Shape shape, std::string_view bytes) {
    Tensor tensor = Tensor::empty(dtype, std::move(shape));
    REQUIRE(tensor.nbytes() == bytes.size());
    if (!bytes.empty()) std::memcpy(tensor.data(), bytes.data(), bytes.size());
    return tensor;
}

// The message of the einc::Error of kind `file` that `read` throws.
template <typename Read>
std::string file_error(Read read) {
    try {
        read();
    } catch (const Error& error) {
        CHECK(error.kind() == ErrorKind::file);
        return error.diagnostic().message;
    }
    FAIL("no einc::Error was thrown");
    return {};
}

void check_rejected(const std::vector<std::byte>& bytes, std::string_view problem) {
    const std::string message = file_error([&] { read_npy_bytes(bytes, "hostile.npy"); });
    INFO(message);
    CHECK(message.starts_with("hostile.npy: "));
    CHECK(message.find(problem) != std::string::npos);
}

const std::string header_f4_2x3 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";

std::string with_shape(std::string_view shape, std::string_view descr = "<f4") {
    return fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}\n", descr, shape);
}

struct TempDir {
    fs::path path = fs::temp_directory_path() / fmt::format("einc-npy-test-{}", ::getpid());
    TempDir() {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ignored;
        fs::permissions(path / "locked.npy", fs::perms::owner_all, ignored);
        fs::remove_all(path, ignored);
    }
};

}  // namespace

TEST_CASE("npy: every dtype round-trips bit for bit, through memory and through a file") {
    TempDir dir;
    for (const DType dtype : all_dtypes) {
        CAPTURE(name_of(dtype));
        const Shape shape{4, 64};
        const std::size_t size = 256 * size_of(dtype);
        std::string bytes(size, '\0');
        for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 73 + 11);  // every byte value
        if (dtype == DType::boolean)
            for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i % 3 == 0);
        if (dtype == DType::f32) {  // NaNs with payloads, quiet and signalling, of both signs
            const std::uint32_t nans[] = {0x7FC12345u, 0xFFA00001u, 0x7F800001u, 0xFFFFFFFFu};
            std::memcpy(bytes.data(), nans, sizeof nans);
        }
        const Tensor tensor = tensor_of(dtype, shape, bytes);
        // fp8 is stored as '|V1', which reads back as e4m3 whichever format was written.
        const DType expected = dtype == DType::f8e5m2 ? DType::f8e4m3 : dtype;

        const Tensor from_memory = read_npy_bytes(npy_bytes(tensor), "memory.npy");
        CHECK(from_memory.dtype() == expected);
        CHECK(from_memory.shape() == shape);
        CHECK(first_bytes(from_memory, size) == bytes);

        const fs::path path = dir.path / fmt::format("{}.npy", name_of(dtype));
        write_npy(path, tensor);
        const Tensor from_file = read_npy(path);
        CHECK(from_file.dtype() == expected);
        CHECK(from_file.shape() == shape);
        CHECK(first_bytes(from_file, size) == bytes);
    }
}

TEST_CASE("npy: the header einc writes is numpy's, padded so the data is 64-byte aligned") {
    const std::vector<std::byte> file = npy_bytes(Tensor::zeros(DType::f32, {2, 3}));
    const std::string text(reinterpret_cast<const char*>(file.data()), file.size());
    REQUIRE(text.size() == 128 + 24);
    CHECK(text.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    CHECK(static_cast<unsigned char>(text[8]) + 256 * static_cast<unsigned char>(text[9]) == 118);
    CHECK(text.substr(10).starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   "));
    CHECK(text[127] == '\n');

    const auto header_of = [](DType dtype, Shape shape) {
        const std::vector<std::byte> bytes = npy_bytes(Tensor::zeros(dtype, std::move(shape)));
        const std::string all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        return all.substr(10, all.find('\n') - 10);
    };
    CHECK(header_of(DType::f64, {}).starts_with("{'descr': '<f8', 'fortran_order': False, 'shape': (), }"));
    CHECK(
        header_of(DType::i32, {5}).starts_with("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }"));
    CHECK(header_of(DType::bf16, {1}).starts_with("{'descr': '<V2',"));
    CHECK(header_of(DType::f8e5m2, {1}).starts_with("{'descr': '|V1',"));
    CHECK(header_of(DType::boolean, {1}).starts_with("{'descr': '|b1',"));
    CHECK(header_of(DType::i8, {1}).starts_with("{'descr': '|i1',"));
    CHECK(header_of(DType::i64, {1}).starts_with("{'descr': '<i8',"));
    CHECK(header_of(DType::f16, {1}).starts_with("{'descr': '<f2',"));
}

TEST_CASE("npy: 0-d, 1-d and empty tensors") {
    const Tensor scalar = tensor_of(DType::f64, {}, raw({3.5}));
    const Tensor scalar_back = read_npy_bytes(npy_bytes(scalar), "scalar.npy");
    CHECK(scalar_back.shape().empty());
    CHECK(values_of<double>(scalar_back) == std::vector<double>{3.5});

    const Tensor vector = tensor_of(DType::i32, {5}, raw({1, -2, 3, -4, 5}));
    const Tensor vector_back = read_npy_bytes(npy_bytes(vector), "vector.npy");
    CHECK(vector_back.shape() == Shape{5});
    CHECK(values_of<std::int32_t>(vector_back) == std::vector<std::int32_t>{1, -2, 3, -4, 5});

    const Tensor empty = Tensor::empty(DType::f32, {2, 0, 3});
    const Tensor empty_back = read_npy_bytes(npy_bytes(empty), "empty.npy");
    CHECK(empty_back.shape() == Shape{2, 0, 3});
    CHECK(empty_back.numel() == 0);
    // An empty Fortran-order file keeps its shape.
    const Tensor fortran_empty = read_npy_bytes(
        npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 3), }\n", ""), "empty-f.npy");
    CHECK(fortran_empty.shape() == Shape{0, 3});
}

TEST_CASE("npy: Fortran-order files read as row-major tensors") {
    // [[0 1 2] [3 4 5]] stored column by column.
    const Tensor matrix = read_npy_bytes(
        npy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }\n", raw({0, 3, 1, 4, 2, 5})),
        "f.npy");
    CHECK(matrix.shape() == Shape{2, 3});
    CHECK(values_of<std::int32_t>(matrix) == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5});

    // 2x3x4 with v[i][j][k] = 100i + 10j + k at offset i + 2j + 6k.
    std::vector<double> column_major(24);
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 4; ++k)
                column_major[static_cast<std::size_t>(i + 2 * j + 6 * k)] = 100 * i + 10 * j + k;
    const std::string data(reinterpret_cast<const char*>(column_major.data()), 24 * sizeof(double));
    const Tensor cube = read_npy_bytes(
        npy_file("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 4), }\n", data), "cube.npy");
    CHECK(cube.shape() == Shape{2, 3, 4});
    const std::vector<double> values = values_of<double>(cube);
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 4; ++k)
                CHECK(values[static_cast<std::size_t>(12 * i + 4 * j + k)] == 100 * i + 10 * j + k);

    // A Fortran-order 1-d file is just a vector.
    const Tensor vector = read_npy_bytes(
        npy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (3,), }\n", raw({7, 8, 9})), "f1.npy");
    CHECK(values_of<std::int32_t>(vector) == std::vector<std::int32_t>{7, 8, 9});
}

TEST_CASE("npy: big-endian and native byte orders") {
    const std::string f4 = big_endian(1.0f) + big_endian(-2.5f) + big_endian(0x7FC00001u);
    const Tensor floats = read_npy_bytes(npy_file(with_shape("(3,)", ">f4"), f4), "big.npy");
    CHECK(floats.dtype() == DType::f32);
    const std::vector<float> values = values_of<float>(floats);
    CHECK(values[0] == 1.0f);
    CHECK(values[1] == -2.5f);
    CHECK(std::bit_cast<std::uint32_t>(values[2]) == 0x7FC00001u);

    const std::string i8 = big_endian(std::int64_t{1}) + big_endian(std::int64_t{-0x0102030405060708});
    const Tensor ints = read_npy_bytes(npy_file(with_shape("(2,)", ">i8"), i8), "big.npy");
    CHECK(values_of<std::int64_t>(ints) == std::vector<std::int64_t>{1, -0x0102030405060708});

    // Complex: each part in its own byte order (not the pair's 8 or 16 bytes reversed), NaN parts kept.
    const std::string c8 = big_endian(1.5f) + big_endian(-2.0f) + big_endian(0x7FC00001u) + big_endian(3.0f);
    const Tensor pairs = read_npy_bytes(npy_file(with_shape("(2,)", ">c8"), c8), "big.npy");
    CHECK(pairs.dtype() == DType::c64);
    const std::vector<float> parts = values_of<float>(pairs);
    CHECK((parts[0] == 1.5f && parts[1] == -2.0f && parts[3] == 3.0f));
    CHECK(std::bit_cast<std::uint32_t>(parts[2]) == 0x7FC00001u);
    const std::string c16 = big_endian(0.25) + big_endian(-8.0);
    const Tensor wide = read_npy_bytes(npy_file(with_shape("(1,)", ">c16"), c16), "big.npy");
    CHECK((wide.dtype() == DType::c128 && values_of<double>(wide) == std::vector<double>{0.25, -8.0}));

    // Big-endian and Fortran order together.
    const std::string i4 =
        big_endian(0) + big_endian(3) + big_endian(1) + big_endian(4) + big_endian(2) + big_endian(5);
    const Tensor both = read_npy_bytes(
        npy_file("{'descr': '>i4', 'fortran_order': True, 'shape': (2, 3), }\n", i4), "big-f.npy");
    CHECK(values_of<std::int32_t>(both) == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5});

    CHECK(values_of<std::int32_t>(read_npy_bytes(npy_file(with_shape("(1,)", "=i4"), raw({42})), "n.npy")) ==
          std::vector<std::int32_t>{42});
    CHECK(values_of<std::int8_t>(read_npy_bytes(npy_file(with_shape("(1,)", "|i1"), "\xFF"), "n.npy")) ==
          std::vector<std::int8_t>{-1});
    CHECK(read_npy_bytes(npy_file(with_shape("(1,)", "|V2"), "\x80\x3F"), "n.npy").dtype() == DType::bf16);
}

TEST_CASE("npy: versions 2.0 and 3.0, and headers in any spelling Python accepts") {
    for (const int major : {2, 3}) {
        const Tensor tensor =
            read_npy_bytes(npy_file(header_f4_2x3, raw({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}), major), "v.npy");
        CHECK(tensor.shape() == Shape{2, 3});
        CHECK(values_of<float>(tensor) == std::vector<float>{1, 2, 3, 4, 5, 6});
    }
    const std::string data = raw({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
    for (const std::string_view header : {
             std::string_view("{ \"shape\" :( 2 ,3 ) ,\"descr\":\"<f4\",\n\t\"fortran_order\" : False }"),
             std::string_view("{'fortran_order':False,'shape':(2,3,),'descr':'<f4'}   \n"),
             std::string_view("  {'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\r\n"),
             std::string_view("{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3)}"),
         }) {
        CAPTURE(header);
        const Tensor tensor = read_npy_bytes(npy_file(header, data), "odd.npy");  // data at any offset
        CHECK(tensor.shape() == Shape{2, 3});
        CHECK(values_of<float>(tensor) == std::vector<float>{1, 2, 3, 4, 5, 6});
    }
    // Bytes after the data are ignored, as numpy ignores them; bool bytes other than 0 read as 1.
    CHECK(read_npy_bytes(npy_file(header_f4_2x3, data + "trailing garbage"), "t.npy").shape() == Shape{2, 3});
    const Tensor flags =
        read_npy_bytes(npy_file(with_shape("(3,)", "|b1"), std::string("\x00\x01\x02", 3)), "b.npy");
    CHECK(values_of<std::uint8_t>(flags) == std::vector<std::uint8_t>{0, 1, 1});
}

TEST_CASE("npy: non-contiguous views are written in row-major order") {
    TempDir dir;
    std::vector<float> base{0, 1, 2, 3, 4, 5};  // a 2x3 matrix
    const auto check = [&](const TensorView& view, std::vector<float> expected) {
        CAPTURE(describe(view));
        const Tensor from_memory = read_npy_bytes(npy_bytes(view), "view.npy");
        CHECK(from_memory.shape() == view.shape);
        CHECK(values_of<float>(from_memory) == expected);
        write_npy(dir.path / "view.npy", view);
        CHECK(values_of<float>(read_npy(dir.path / "view.npy")) == expected);
    };
    check(TensorView{base.data(), DType::f32, {3, 2}, {1, 3}}, {0, 3, 1, 4, 2, 5});       // transposed
    check(TensorView{base.data(), DType::f32, {2, 3}, {0, 1}}, {0, 1, 2, 0, 1, 2});       // stride 0
    check(TensorView{base.data() + 5, DType::f32, {6}, {-1}}, {5, 4, 3, 2, 1, 0});        // reversed
    check(TensorView{base.data() + 3, DType::f32, {2, 3}, {-3, 1}}, {3, 4, 5, 0, 1, 2});  // rows flipped
    check(TensorView{base.data() + 1, DType::f32, {2, 2}, {3, 1}}, {1, 2, 4, 5});         // a slice
    check(TensorView{base.data(), DType::f32, {}, {}}, {0});                              // 0-d

    // Large enough for the tiled transpose.
    std::vector<std::int64_t> big(64 * 48);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::int64_t>(i);
    const Tensor transposed =
        read_npy_bytes(npy_bytes(TensorView{big.data(), DType::i64, {48, 64}, {1, 48}}), "t.npy");
    const std::vector<std::int64_t> values = values_of<std::int64_t>(transposed);
    bool all_right = true;
    for (std::int64_t r = 0; r < 48; ++r)
        for (std::int64_t c = 0; c < 64; ++c)
            all_right = all_right && values[static_cast<std::size_t>(r * 64 + c)] == c * 48 + r;
    CHECK(all_right);
}

TEST_CASE("npy: missing, unreadable and unwritable files are named") {
    TempDir dir;
    std::string message = file_error([&] { read_npy(dir.path / "nothing.npy"); });
    CHECK(message.find("nothing.npy: no such file") != std::string::npos);
    message = file_error([&] { read_npy(dir.path); });
    CHECK(message.find("is a directory") != std::string::npos);
    message =
        file_error([&] { write_npy(dir.path / "no" / "such" / "dir.npy", Tensor::zeros(DType::f32, {2})); });
    CHECK(message.find("dir.npy: cannot open the file for writing: No such file or directory") !=
          std::string::npos);

    const fs::path locked = dir.path / "locked.npy";
    write_npy(locked, Tensor::zeros(DType::f32, {2}));
    fs::permissions(locked, fs::perms::none);
    if (::access(locked.c_str(), R_OK) == 0) {
        MESSAGE("skipped the unreadable-file check: running as a user who can read any file");
    } else {
        message = file_error([&] { read_npy(locked); });
        CHECK(message.find("locked.npy: cannot open the file for reading: Permission denied") !=
              std::string::npos);
    }

    const fs::path pipe = dir.path / "pipe.npy";
    REQUIRE(::mkfifo(pipe.c_str(), 0600) == 0);
    message = file_error([&] { read_npy(pipe); });
    CHECK(message.find("pipe.npy: is not a regular file") != std::string::npos);

    const fs::path short_file = dir.path / "short.npy";
    std::ofstream(short_file, std::ios::binary) << "\x93NUM";
    message = file_error([&] { read_npy(short_file); });
    CHECK(message.find("short.npy: too short to be a .npy file") != std::string::npos);

    const fs::path truncated = dir.path / "truncated.npy";
    const std::vector<std::byte> file = npy_file(header_f4_2x3, raw({1.f, 2.f, 3.f, 4.f, 5.f}));
    std::ofstream(truncated, std::ios::binary)
        .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
    message = file_error([&] { read_npy(truncated); });
    CHECK(message.find(
              "truncated.npy: the header says shape 2x3 of '<f4' = 24 bytes of data, but the file holds 20 "
              "after the header") != std::string::npos);

    float gpu_memory = 0;
    const TensorView on_gpu{&gpu_memory, DType::f32, {1}, {1}, Device::cuda};
    CHECK_THROWS_WITH_AS(npy_bytes(on_gpu), doctest::Contains("needs a tensor in CPU memory"), Error);
}

TEST_CASE("npy: a malformed prefix is rejected with what is wrong") {
    const std::string data = raw({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
    check_rejected({}, "too short to be a .npy file: 0 bytes");
    check_rejected(to_bytes("\x93NUM"), "too short to be a .npy file: 4 bytes");
    check_rejected(to_bytes("\x93NUMPZ\x01\x00\x00\x00"),
                   "not a .npy file: it does not start with the magic string");
    check_rejected(to_bytes("PK\x03\x04 a zip file, say"), "not a .npy file");
    check_rejected(to_bytes("\x93NUMPY\x01"), "the file ends inside the format version");
    check_rejected(npy_file(header_f4_2x3, data, 4), "unsupported .npy format version 4.0");
    std::vector<std::byte> minor = npy_file(header_f4_2x3, data);
    minor[7] = std::byte{1};
    check_rejected(minor, "unsupported .npy format version 1.1");
    check_rejected(to_bytes(std::string("\x93NUMPY\x02\x00\x10\x00", 10)),
                   "the file ends inside the header length");
    check_rejected(
        to_bytes(std::string("\x93NUMPY\x01\x00\xFF\xFF{'descr'", 17)),
        "the header length 65535 runs past the end of the file (7 bytes follow the 10-byte prefix)");
    check_rejected(to_bytes(std::string("\x93NUMPY\x02\x00\xFF\xFF\xFF\xFF{}", 14)),
                   "the header length 4294967295 runs past the end of the file");
}

TEST_CASE("npy: a malformed header is rejected with what is wrong") {
    const std::string data = raw({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
    const auto reject = [&](std::string_view header, std::string_view problem) {
        CAPTURE(header);
        check_rejected(npy_file(header, data), problem);
    };
    reject("[('descr', '<f4')]\n",
           "the header is not a Python dict literal: it starts with '[('descr', '<f4')]\\x0a'");
    reject("", "the header is not a Python dict literal");
    reject("{'fortran_order': False, 'shape': (2, 3), }\n", "the header has no 'descr' key");
    reject("{'descr': '<f4', 'shape': (2, 3), }\n", "the header has no 'fortran_order' key");
    reject("{'descr': '<f4', 'fortran_order': False}\n", "the header has no 'shape' key");
    reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}\n",
           "unknown key 'extra' in the header");
    reject("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)}\n",
           "the header has the key 'descr' twice");
    reject("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}\n",
           "'fortran_order' must be True or False, not '0'");
    reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x\n",
           "unexpected text after the header dict: 'x\\x0a'");
    reject("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}\n", "unsupported dtype '<f4, '");
    reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)\n",
           "malformed header: expected ',' or '}' after a value");
    reject("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}\n", "malformed header");
    reject("{'descr: '<f4'}", "malformed header");
    reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ,}\n",
           "malformed header: expected a quoted key");
    reject("{descr: '<f4'}\n", "malformed header: expected a quoted key or '}' at byte 1 of the header");
    reject("{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (2, 3)}\n",
           "malformed header: a string with an escape");
    reject("{'descr", "malformed header: an unterminated string");
    using namespace std::string_literals;  // (a literal with a NUL inside it)
    reject("{'descr': '<f4'\0, 'fortran_order': False, 'shape': (2, 3)}"s, "malformed header");
}

TEST_CASE("npy: bad dtypes are rejected by name, pickles always") {
    const std::string data = raw({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
    const auto reject = [&](std::string_view descr, std::string_view problem) {
        CAPTURE(descr);
        check_rejected(npy_file(with_shape("(2, 3)", descr), data), problem);
    };
    reject("|O", "descr '|O' is an object array (pickled Python objects), which einc never reads");
    reject("<c32", "unsupported dtype '<c32': einc reads '<f8' '<f4' '<f2' '|i1' '<i2' '<i4' '<i8' '|u1' "
                   "'<u2' '<u4' '<u8' '<c8' '<c16' '|b1', '<V2' (bf16)");
    reject("<u16", "unsupported dtype '<u16'");
    reject("<U4", "unsupported dtype '<U4'");
    reject("<f4 ", "unsupported dtype '<f4 '");
    reject("", "unsupported dtype ''");
    reject("<V4", "unsupported dtype '<V4'");
    check_rejected(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3)}\n", data),
                   "structured dtypes (a list descr) are not supported");
    check_rejected(npy_file("{'descr': 4, 'fortran_order': False, 'shape': (2, 3)}\n", data),
                   "malformed header: expected a quoted string for 'descr'");
}

TEST_CASE("npy: bad shapes and lying sizes are rejected before anything is allocated") {
    const std::string data = raw({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
    const auto reject = [&](std::string_view shape, std::string_view problem,
                            std::string_view descr = "<f4") {
        CAPTURE(shape);
        check_rejected(npy_file(with_shape(shape, descr), data), problem);
    };
    reject("(2, -3)", "the shape has a negative dimension -3");
    reject("(2.5, 3)", "the shape has an entry that is not a non-negative integer: '2.5'");
    reject("('a',)", "not a non-negative integer: ''a''");
    reject("(None,)", "not a non-negative integer: 'None'");
    reject("(2, , 3)", "not a non-negative integer");
    reject("(-,)", "not a non-negative integer: '-'");
    reject("(0x10,)", "not a non-negative integer: '0x10'");
    reject("[2, 3]", "'shape' must be a tuple of integers such as (2, 3) or (5,), not '[2, 3]");
    reject("6", "'shape' must be a tuple of integers");
    reject("(6)", "'shape' must be a tuple: (6) is an integer; a 1-d shape is written (6,)");
    reject("(2 3)", "malformed header: expected ',' or ')' in the shape");
    reject("(2, 3", "the shape has an entry that is not a non-negative integer: '}");
    reject("(99999999999999999999,)",
           "the shape has a dimension too large for 64 bits: '99999999999999999999'");
    reject("(9223372036854775808,)", "too large for 64 bits");
    reject("(4294967296, 4294967296)",
           "the shape 4294967296x4294967296 has more elements than fit in 64 bits");
    reject("(4294967296, 0, 4294967296)",  // empty, but numpy refuses it too ("array is too big")
           "the shape 4294967296x0x4294967296 has more elements than fit in 64 bits");
    reject("(1152921504606846976,)",
           "the shape 1152921504606846976 of '<f8' has more bytes than fit in 64 bits", "<f8");
    reject("(2, 4)",
           "the header says shape 2x4 of '<f4' = 32 bytes of data, but the file holds 24 after the header");
    reject("(1000000000000,)", "the header says shape 1000000000000 of '<f4' = 4000000000000 bytes of data");
    reject("(9223372036854775807,)", "= 9223372036854775807 bytes of data, but the file holds 24", "|b1");
    std::string many = "(";
    for (int i = 0; i < 65; ++i) many += "1, ";
    reject(many + ")", "the shape has more than 64 dimensions");
    // A 0 anywhere makes the tensor empty, however large the other dimensions.
    CHECK(read_npy_bytes(npy_file(with_shape("(0, 9223372036854775807)"), ""), "e.npy").numel() == 0);
    // 64 dimensions are fine.
    many = "(";
    for (int i = 0; i < 64; ++i) many += "1, ";
    CHECK(read_npy_bytes(npy_file(with_shape(many + ")"), raw({1.f})), "r.npy").shape().size() == 64);
}

TEST_CASE("npy: every truncation and single-byte corruption of a file is read or rejected cleanly") {
    const std::vector<std::byte> good = npy_bytes(tensor_of(DType::i32, {2, 3}, raw({1, 2, 3, 4, 5, 6})));
    for (std::size_t size = 0; size < good.size(); ++size) {
        CAPTURE(size);
        CHECK_THROWS_AS(read_npy_bytes(std::span(good).first(size), "cut.npy"), Error);
    }
    int read = 0, rejected = 0;
    for (std::size_t at = 0; at < good.size(); ++at)
        for (const unsigned value : {0x00u, 0x20u, 0x27u, 0x31u, 0x7Du, 0x80u, 0xFFu}) {
            std::vector<std::byte> bad = good;
            bad[at] = static_cast<std::byte>(value);
            try {
                read_npy_bytes(bad, "flipped.npy");
                ++read;
            } catch (const Error& error) {
                REQUIRE(error.kind() == ErrorKind::file);
                ++rejected;
            }
        }
    CHECK(read > 0);
    CHECK(rejected > 0);
}

TEST_CASE("npy: files interoperate with numpy") {
    if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
        MESSAGE("skipped: python3 with numpy is not available");
        return;
    }
    TempDir dir;
    const auto run_python = [&](std::string_view name, std::string_view script) {
        const fs::path path = dir.path / name;
        std::ofstream(path) << script;
        return std::system(fmt::format("python3 '{}' '{}'", path.string(), dir.path.string()).c_str());
    };
    // numpy writes, einc reads.
    REQUIRE(run_python("save.py", R"(import sys, numpy as np
d = sys.argv[1]
np.save(d + '/f4.npy', np.arange(6, dtype=np.float32).reshape(2, 3) / 4)
np.save(d + '/fortran.npy', np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)))
np.save(d + '/bool.npy', np.array([[True, False, True], [False, False, True]]))
np.save(d + '/big.npy', np.arange(5, dtype='>i8') - 2)
np.save(d + '/f2.npy', np.array([1.5, -0.25, 65504], dtype=np.float16))
np.save(d + '/i1.npy', np.array([-128, 0, 127], dtype=np.int8))
np.save(d + '/scalar.npy', np.array(7, dtype=np.int32))
np.save(d + '/empty.npy', np.zeros((2, 0, 3), dtype=np.float32))
np.save(d + '/same.npy', np.arange(6, dtype=np.int64).reshape(2, 3))
)") == 0);
    CHECK(values_of<float>(read_npy(dir.path / "f4.npy")) == std::vector<float>{0, 0.25, 0.5, 0.75, 1, 1.25});
    const Tensor fortran = read_npy(dir.path / "fortran.npy");
    CHECK(fortran.shape() == Shape{3, 4});
    CHECK(values_of<double>(fortran) == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
    const Tensor flags = read_npy(dir.path / "bool.npy");
    CHECK(flags.dtype() == DType::boolean);
    CHECK(values_of<std::uint8_t>(flags) == std::vector<std::uint8_t>{1, 0, 1, 0, 0, 1});
    CHECK(values_of<std::int64_t>(read_npy(dir.path / "big.npy")) ==
          std::vector<std::int64_t>{-2, -1, 0, 1, 2});
    CHECK(values_of<std::uint16_t>(read_npy(dir.path / "f2.npy")) ==
          std::vector<std::uint16_t>{0x3E00, 0xB400, 0x7BFF});
    CHECK(values_of<std::int8_t>(read_npy(dir.path / "i1.npy")) == std::vector<std::int8_t>{-128, 0, 127});
    const Tensor scalar = read_npy(dir.path / "scalar.npy");
    CHECK(scalar.shape().empty());
    CHECK(values_of<std::int32_t>(scalar) == std::vector<std::int32_t>{7});
    CHECK(read_npy(dir.path / "empty.npy").shape() == Shape{2, 0, 3});
    // For small shapes einc's files are byte for byte numpy's.
    std::ifstream same(dir.path / "same.npy", std::ios::binary);
    const std::string numpy_file{std::istreambuf_iterator<char>(same), std::istreambuf_iterator<char>()};
    const std::vector<std::byte> einc_file =
        npy_bytes(tensor_of(DType::i64, {2, 3}, raw<std::int64_t>({0, 1, 2, 3, 4, 5})));
    CHECK(numpy_file == std::string(reinterpret_cast<const char*>(einc_file.data()), einc_file.size()));

    // einc writes, numpy reads.
    std::vector<float> matrix{0, 1, 2, 3, 4, 5};
    write_npy(dir.path / "t.npy", TensorView{matrix.data(), DType::f32, {3, 2}, {1, 3}});
    write_npy(dir.path / "b.npy", tensor_of(DType::boolean, {3}, std::string("\x01\x00\x01", 3)));
    write_npy(dir.path / "i8.npy",
              tensor_of(DType::i64, {2}, raw({std::int64_t{-5}, std::int64_t{1} << 40})));
    write_npy(dir.path / "bf16.npy",
              tensor_of(DType::bf16, {2}, raw({std::uint16_t{0x3F80}, std::uint16_t{0xC000}})));
    write_npy(dir.path / "fp8.npy", tensor_of(DType::f8e4m3, {2}, "\x38\x7E"));
    write_npy(dir.path / "s.npy", tensor_of(DType::f64, {}, raw({2.5})));
    write_npy(dir.path / "e.npy", Tensor::empty(DType::i32, {0, 4}));
    CHECK(run_python("load.py", R"(import sys, numpy as np
d = sys.argv[1]
def load(name):
    a = np.load(d + '/' + name, allow_pickle=False)
    assert a.flags['C_CONTIGUOUS'], name
    return a
t = load('t.npy')
assert t.dtype == np.float32 and t.shape == (3, 2), t
assert (t == np.arange(6, dtype=np.float32).reshape(2, 3).T).all(), t
b = load('b.npy')
assert b.dtype == np.bool_ and b.tolist() == [True, False, True], b
i = load('i8.npy')
assert i.dtype == np.int64 and i.tolist() == [-5, 1 << 40], i
h = load('bf16.npy')
assert h.dtype.kind == 'V' and h.dtype.itemsize == 2 and h.view('<u2').tolist() == [0x3F80, 0xC000], h
f = load('fp8.npy')
assert f.dtype.kind == 'V' and f.dtype.itemsize == 1 and f.view('u1').tolist() == [0x38, 0x7E], f
s = load('s.npy')
assert s.shape == () and s.dtype == np.float64 and s[()] == 2.5, s
e = load('e.npy')
assert e.shape == (0, 4) and e.dtype == np.int32, e
)") == 0);
}
