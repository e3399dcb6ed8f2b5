#include "runtime/npy.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "compiler/checked.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/program.hpp"

namespace einc {
namespace {

// Copies a CPU view's elements, row-major, to `out` (as many bytes as the view has elements).
void copy_row_major(const TensorView& view, std::byte* out) {
    const TensorView dense{out, view.dtype, view.shape, row_major_strides(view.shape)};
    const Input input(view);
    compile(Op::rearrange, "... -> ...")
        .bind({view}, Options{.contiguous = true})
        .run(std::span(&input, 1), std::span(&dense, 1));
}

constexpr std::string_view magic = "\x93NUMPY";
constexpr std::size_t max_rank = 64;        // numpy's NPY_MAXDIMS
constexpr std::size_t data_alignment = 64;  // what numpy writes (older versions: 16)
constexpr char native_order = std::endian::native == std::endian::little ? '<' : '>';

[[noreturn]] void fail(std::string_view name, std::string_view problem) {
    throw Error(ErrorKind::file, fmt::format("{}: {}", name, problem));
}

// Text taken from a file, fit for a one-line message: quoted, unprintable bytes escaped, cut short.
std::string quote(std::string_view text) {
    constexpr std::size_t limit = 40;
    std::string out = "'";
    for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x7F && c != '\\')
            out += static_cast<char>(c);
        else
            out += fmt::format("\\x{:02x}", c);
    }
    if (text.size() > limit) out += "...";
    return out + "'";
}

std::string system_message(int error) {
    return std::error_code(error, std::generic_category()).message();
}

// ---- the header ---------------------------------------------------------------------------------------

struct Descr {
    std::string text;  // as the file spells it, for messages
    DType dtype = DType::f32;
    bool swap = false;  // the data's byte order is not the machine's
};

struct Header {
    Descr descr;
    bool fortran = false;
    Shape shape;
};

constexpr std::string_view supported_dtypes = "einc reads '<f8' '<f4' '<f2' '|i1' '<i2' '<i4' '<i8' '|u1' "
                                              "'<u2' '<u4' '<u8' '<c8' '<c16' '|b1', '<V2' (bf16) and '|V1' "
                                              "(fp8 e4m3), "
                                              "in either byte order";

Descr parse_descr(std::string_view text, std::string_view name) {
    std::string_view code = text;
    char order = '=';  // numpy accepts a descr without a byte order as native
    if (!code.empty() && std::string_view("<>=|").find(code.front()) != std::string_view::npos) {
        order = code.front();
        code.remove_prefix(1);
    }
    if (code.starts_with('O'))
        fail(name, fmt::format("descr {} is an object array (pickled Python objects), which einc never reads",
                               quote(text)));
    struct Known {
        std::string_view code;
        DType dtype;
    };
    static constexpr Known known[] = {
        {"f8", DType::f64}, {"f4", DType::f32},   {"f2", DType::f16},  {"i1", DType::i8},
        {"i2", DType::i16}, {"i4", DType::i32},   {"i8", DType::i64},  {"u1", DType::u8},
        {"u2", DType::u16}, {"u4", DType::u32},   {"u8", DType::u64},  {"b1", DType::boolean},
        {"c8", DType::c64}, {"c16", DType::c128}, {"V2", DType::bf16}, {"V1", DType::f8e4m3}};
    for (const Known& k : known)
        if (code == k.code) {
            const bool big =
                order == '>' || ((order == '=' || order == '|') && std::endian::native == std::endian::big);
            return {std::string(text), k.dtype,
                    size_of(k.dtype) > 1 && big != (std::endian::native == std::endian::big)};
        }
    fail(name, fmt::format("unsupported dtype {}: {}", quote(text), supported_dtypes));
}

// A hand-written reader of the one Python dict literal a .npy header holds. It accepts what Python's
// literal syntax allows there (either quote, any whitespace, a trailing comma) and nothing else.
class HeaderParser {
public:
    HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

    Header parse() {
        skip_space();
        if (!next_is('{'))
            fail(name_,
                 fmt::format("the header is not a Python dict literal: it starts with {}", quote(rest())));
        ++pos_;
        std::optional<Descr> descr;
        std::optional<bool> fortran;
        std::optional<Shape> shape;
        for (;;) {
            skip_space();
            if (next_is('}')) break;
            const std::string_view key = string("a quoted key or '}'");
            skip_space();
            if (!next_is(':')) malformed(fmt::format("expected ':' after the key {}", quote(key)));
            ++pos_;
            skip_space();
            if ((key == "descr" && descr) || (key == "fortran_order" && fortran) || (key == "shape" && shape))
                fail(name_, fmt::format("the header has the key {} twice", quote(key)));
            if (key == "descr") {
                if (next_is('['))
                    fail(name_, fmt::format("structured dtypes (a list descr) are not supported: {}",
                                            supported_dtypes));
                descr = parse_descr(string("a quoted string for 'descr'"), name_);
            } else if (key == "fortran_order") {
                fortran = boolean();
            } else if (key == "shape") {
                shape = tuple();
            } else {
                fail(name_,
                     fmt::format("unknown key {} in the header (numpy's reader, like einc's, accepts exactly "
                                 "'descr', 'fortran_order' and 'shape')",
                                 quote(key)));
            }
            skip_space();
            if (next_is(',')) {
                ++pos_;
                continue;
            }
            if (!next_is('}')) malformed("expected ',' or '}' after a value");
            break;
        }
        ++pos_;  // the '}'
        skip_space();
        if (pos_ != text_.size())
            fail(name_, fmt::format("unexpected text after the header dict: {}", quote(rest())));
        if (!descr) fail(name_, "the header has no 'descr' key");
        if (!fortran) fail(name_, "the header has no 'fortran_order' key");
        if (!shape) fail(name_, "the header has no 'shape' key");
        return {std::move(*descr), *fortran, std::move(*shape)};
    }

private:
    std::string_view text_;
    std::string_view name_;
    std::size_t pos_ = 0;

    [[noreturn]] void malformed(std::string_view what) const {
        fail(name_, fmt::format("malformed header: {} at byte {} of the header, before {}", what, pos_,
                                quote(rest())));
    }
    std::string_view rest() const { return text_.substr(pos_); }
    bool next_is(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
    void skip_space() {
        while (pos_ < text_.size() &&
               std::string_view(" \t\n\r\f\v").find(text_[pos_]) != std::string_view::npos)
            ++pos_;
    }
    // The characters of a token that is not punctuation, e.g. `True` or `2.5`, for values and messages.
    std::string_view word() {
        const std::size_t begin = pos_;
        while (pos_ < text_.size() &&
               std::string_view(" \t\n\r\f\v,:(){}[]").find(text_[pos_]) == std::string_view::npos)
            ++pos_;
        return text_.substr(begin, pos_ - begin);
    }

    std::string_view string(std::string_view expected) {
        if (!next_is('\'') && !next_is('"')) malformed(fmt::format("expected {}", expected));
        const char quote_char = text_[pos_++];
        const std::size_t begin = pos_;
        while (pos_ < text_.size() && text_[pos_] != quote_char) {
            // Escapes never occur in what numpy writes; reading them would need Python's rules.
            if (text_[pos_] == '\\' || text_[pos_] == '\n')
                malformed("a string with an escape or a line break");
            ++pos_;
        }
        if (pos_ == text_.size()) malformed("an unterminated string");
        return text_.substr(begin, pos_++ - begin);
    }

    bool boolean() {
        const std::string_view value = word();
        if (value == "True") return true;
        if (value == "False") return false;
        fail(name_, fmt::format("'fortran_order' must be True or False, not {}", quote(value)));
    }

    Shape tuple() {
        if (!next_is('('))
            fail(name_, fmt::format("'shape' must be a tuple of integers such as (2, 3) or (5,), not {}",
                                    quote(rest())));
        ++pos_;
        Shape shape;
        bool comma = false;
        for (;;) {
            skip_space();
            if (next_is(')')) break;
            if (shape.size() == max_rank)
                fail(name_, fmt::format("the shape has more than {} dimensions", max_rank));
            shape.push_back(dimension());
            skip_space();
            comma = next_is(',');
            if (comma)
                ++pos_;
            else if (!next_is(')'))
                malformed("expected ',' or ')' in the shape");
        }
        ++pos_;                           // the ')'
        if (shape.size() == 1 && !comma)  // `(5)` is the integer 5 in Python, and numpy rejects it
            fail(name_,
                 fmt::format("'shape' must be a tuple: ({}) is an integer; a 1-d shape is written ({},)",
                             shape[0], shape[0]));
        return shape;
    }

    std::int64_t dimension() {
        std::string_view token = word();
        if (token.ends_with('L') || token.ends_with('l')) token.remove_suffix(1);  // Python 2's long integers
        if (token.starts_with('-') && token.size() > 1 &&
            std::all_of(token.begin() + 1, token.end(), [](char c) { return c >= '0' && c <= '9'; }))
            fail(name_, fmt::format("the shape has a negative dimension {}", token));
        if (token.empty() ||
            !std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }))
            fail(name_, fmt::format("the shape has an entry that is not a non-negative integer: {}",
                                    token.empty() ? quote(rest()) : quote(token)));
        std::int64_t value = 0;
        for (const char c : token) {
            const auto next = checked_mul(value, 10);
            const auto sum = next ? checked_add(*next, c - '0') : std::nullopt;
            if (!sum)
                fail(name_, fmt::format("the shape has a dimension too large for 64 bits: {}", quote(token)));
            value = *sum;
        }
        return value;
    }
};

// ---- reading ------------------------------------------------------------------------------------------

struct Prefix {
    std::size_t size = 0;  // magic, version, header length
    std::uint64_t header_size = 0;
};

// `head` holds the file's first min(12, file_size) bytes.
Prefix read_prefix(std::span<const std::byte> head, std::uint64_t file_size, std::string_view name) {
    const auto byte = [&](std::size_t i) { return std::to_integer<unsigned>(head[i]); };
    if (file_size < magic.size())
        fail(name, fmt::format("too short to be a .npy file: {} bytes, and the magic string alone is 6",
                               file_size));
    if (std::memcmp(head.data(), magic.data(), magic.size()) != 0)
        fail(name, "not a .npy file: it does not start with the magic string \\x93NUMPY");
    if (file_size < magic.size() + 2) fail(name, "truncated: the file ends inside the format version");
    const unsigned major = byte(6), minor = byte(7);
    if (major < 1 || major > 3 || minor != 0)
        fail(name, fmt::format("unsupported .npy format version {}.{} (einc reads 1.0, 2.0 and 3.0)", major,
                               minor));
    const std::size_t length_size = major == 1 ? 2 : 4;
    const std::size_t prefix = magic.size() + 2 + length_size;
    if (file_size < prefix) fail(name, "truncated: the file ends inside the header length");
    std::uint64_t header_size = 0;
    for (std::size_t i = length_size; i-- > 0;) header_size = header_size << 8 | byte(8 + i);  // LE
    if (header_size > file_size - prefix)
        fail(name,
             fmt::format(
                 "the header length {} runs past the end of the file ({} bytes follow the {}-byte prefix)",
                 header_size, file_size - prefix, prefix));
    return {prefix, header_size};
}

// The data's size in bytes, checked (before anything is allocated) against what the file holds.
std::size_t data_size(const Header& header, std::uint64_t available, std::string_view name) {
    // (lengths_fit: numpy refuses an empty shape whose other lengths overflow too; the product then fits.)
    if (!lengths_fit(header.shape))
        fail(name,
             fmt::format("the shape {} has more elements than fit in 64 bits", format_shape(header.shape)));
    const auto bytes =
        checked_mul(*checked_product(header.shape), static_cast<std::int64_t>(size_of(header.descr.dtype)));
    if (!bytes)
        fail(name, fmt::format("the shape {} of {} has more bytes than fit in 64 bits",
                               format_shape(header.shape), quote(header.descr.text)));
    if (static_cast<std::uint64_t>(*bytes) > available)
        fail(name,
             fmt::format(
                 "the header says shape {} of {} = {} bytes of data, but the file holds {} after the header",
                 format_shape(header.shape), quote(header.descr.text), *bytes, available));
    return static_cast<std::size_t>(*bytes);
}

Header parse_header(std::span<const std::byte> text, std::string_view name) {
    return HeaderParser(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), name)
        .parse();
}

// Storage for the data as it lies in the file: a Fortran-order file holds the transpose, row-major.
Tensor allocate(const Header& header) {
    Shape stored = header.shape;
    if (header.fortran) std::reverse(stored.begin(), stored.end());
    return Tensor::empty(header.descr.dtype, std::move(stored));
}

template <typename T>
void swap_bytes(std::byte* data, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
        T value;
        std::memcpy(&value, data + i * sizeof(T), sizeof(T));
        if constexpr (sizeof(T) == 2) value = __builtin_bswap16(value);
        if constexpr (sizeof(T) == 4) value = __builtin_bswap32(value);
        if constexpr (sizeof(T) == 8) value = __builtin_bswap64(value);
        std::memcpy(data + i * sizeof(T), &value, sizeof(T));
    }
}

// Turns the data as read into einc's form: native byte order, bools 0 or 1, row-major.
Tensor finish(const Header& header, Tensor raw) {
    auto* data = static_cast<std::byte*>(raw.data());
    const auto count = static_cast<std::size_t>(raw.numel());
    if (header.descr.swap) {  // (a complex number's two parts each in their own order)
        const std::size_t part = is_complex(raw.dtype()) ? 2 : 1;
        switch (size_of(raw.dtype()) / part) {
        case 2: swap_bytes<std::uint16_t>(data, count * part); break;
        case 4: swap_bytes<std::uint32_t>(data, count * part); break;
        case 8: swap_bytes<std::uint64_t>(data, count * part); break;
        default: break;  // single bytes have no order
        }
    }
    if (raw.dtype() == DType::boolean)
        for (std::size_t i = 0; i < count; ++i) data[i] = std::byte{data[i] != std::byte{0}};
    if (!header.fortran || header.shape.size() < 2) return raw;
    Tensor result = Tensor::empty(raw.dtype(), header.shape);
    if (count == 0) return result;
    // Column-major: the strides of the reversed shape, row-major, reversed.
    Shape strides = row_major_strides(Shape(header.shape.rbegin(), header.shape.rend()));
    std::reverse(strides.begin(), strides.end());
    copy_row_major(TensorView{data, raw.dtype(), header.shape, strides},
                   static_cast<std::byte*>(result.data()));
    return result;
}

struct CloseFile {
    void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, CloseFile>;

void read_exact(std::FILE* file, void* out, std::size_t size, std::string_view name) {
    if (size == 0 || std::fread(out, 1, size, file) == size) return;
    if (std::ferror(file)) fail(name, fmt::format("read error: {}", system_message(errno)));
    fail(name, "the file ended early while being read (did it change meanwhile?)");
}

// ---- writing ------------------------------------------------------------------------------------------

std::string descr_of(DType dtype) {
    const std::string order(1, native_order);
    switch (dtype) {
    case DType::f64: return order + "f8";
    case DType::f32: return order + "f4";
    case DType::f16: return order + "f2";
    case DType::bf16: return order + "V2";  // ml_dtypes' bfloat16 as numpy saves it
    case DType::f8e4m3:
    case DType::f8e5m2: return "|V1";
    case DType::i8: return "|i1";
    case DType::i16: return order + "i2";
    case DType::i32: return order + "i4";
    case DType::i64: return order + "i8";
    case DType::u8: return "|u1";
    case DType::u16: return order + "u2";
    case DType::u32: return order + "u4";
    case DType::u64: return order + "u8";
    case DType::c64: return order + "c8";
    case DType::c128: return order + "c16";
    case DType::boolean: return "|b1";
    }
    EINC_ASSERT(false);
    return {};
}

// The data's size in bytes, after checking that the view describes memory einc can write out.
std::size_t checked_bytes(const TensorView& view) {
    if (view.device != Device::cpu)
        throw Error(ErrorKind::unsupported,
                    fmt::format("writing a .npy file needs a tensor in CPU memory, not {}", describe(view)));
    if (view.strides.size() != view.shape.size())
        throw Error(ErrorKind::usage, fmt::format("a tensor view has {} strides for {} dimensions",
                                                  view.strides.size(), view.shape.size()));
    if (view.rank() > max_rank)
        throw Error(ErrorKind::usage,
                    fmt::format("a .npy file holds at most {} dimensions; this tensor has {}", max_rank,
                                view.rank()));
    if (std::any_of(view.shape.begin(), view.shape.end(), [](std::int64_t e) { return e < 0; }))
        throw Error(ErrorKind::usage, fmt::format("a tensor view has a negative extent: {}", describe(view)));
    const auto elements = checked_product(view.shape);
    const auto bytes =
        elements ? checked_mul(*elements, static_cast<std::int64_t>(size_of(view.dtype))) : std::nullopt;
    if (!bytes)
        throw Error(ErrorKind::usage,
                    fmt::format("a tensor view has more bytes than fit in 64 bits: {}", describe(view)));
    if (*bytes > 0 && view.data == nullptr)
        throw Error(ErrorKind::usage, fmt::format("a tensor view of {} elements has no data", *elements));
    return static_cast<std::size_t>(*bytes);
}

// Magic, version and the header dict numpy writes, padded so that the data starts at a multiple of 64.
std::string npy_header(const TensorView& view) {
    std::string shape;
    if (view.rank() == 1)
        shape = fmt::format("({},)", view.shape[0]);
    else
        shape = fmt::format("({})", fmt::join(view.shape, ", "));
    std::string dict =
        fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr_of(view.dtype), shape);
    constexpr std::size_t prefix = 10;  // version 1.0
    const std::size_t end = (prefix + dict.size() + 1 + data_alignment - 1) / data_alignment * data_alignment;
    dict.resize(end - prefix - 1, ' ');
    dict += '\n';
    // 64 dimensions of 19 digits keep the header far below 1.0's limit, so 2.0 is never needed.
    EINC_ASSERT(dict.size() <= 0xFFFF);
    std::string out(magic);
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(dict.size() & 0xFF);
    out += static_cast<char>(dict.size() >> 8);
    return out + dict;
}

// Copies the view's elements in row-major order to `out` (`bytes` of them).
void gather(const TensorView& view, std::byte* out, std::size_t bytes) {
    if (bytes == 0) return;
    if (view.is_row_major()) {
        std::memcpy(out, view.data, bytes);
        return;
    }
    copy_row_major(view, out);
}

}  // namespace

Tensor read_npy_bytes(std::span<const std::byte> bytes, std::string_view name) {
    const Prefix prefix =
        read_prefix(bytes.first(std::min<std::size_t>(bytes.size(), 12)), bytes.size(), name);
    const Header header = parse_header(bytes.subspan(prefix.size, prefix.header_size), name);
    const std::size_t offset = prefix.size + prefix.header_size;
    const std::size_t size = data_size(header, bytes.size() - offset, name);
    Tensor raw = allocate(header);
    if (size > 0) std::memcpy(raw.data(), bytes.data() + offset, size);
    return finish(header, std::move(raw));
}

Tensor read_npy(const std::filesystem::path& path) {
    const std::string name = path.string();
    std::error_code error;
    const auto status = std::filesystem::status(path, error);
    if (status.type() == std::filesystem::file_type::not_found) fail(name, "no such file");
    if (error) fail(name, fmt::format("cannot access the file: {}", error.message()));
    if (std::filesystem::is_directory(status)) fail(name, "is a directory, not a .npy file");
    if (!std::filesystem::is_regular_file(status)) fail(name, "is not a regular file");
    const std::uint64_t file_size = std::filesystem::file_size(path, error);
    if (error) fail(name, fmt::format("cannot read the file's size: {}", error.message()));
    const File file(std::fopen(path.c_str(), "rb"));
    if (!file) fail(name, fmt::format("cannot open the file for reading: {}", system_message(errno)));

    std::array<std::byte, 12> head{};
    const std::size_t head_size = std::min<std::uint64_t>(file_size, head.size());
    read_exact(file.get(), head.data(), head_size, name);
    const Prefix prefix = read_prefix(std::span(head).first(head_size), file_size, name);
    // Bounded by the file's size, which read_prefix checked.
    std::vector<std::byte> text(prefix.header_size);
    if (std::fseek(file.get(), static_cast<long>(prefix.size), SEEK_SET) != 0)
        fail(name, fmt::format("read error: {}", system_message(errno)));
    read_exact(file.get(), text.data(), text.size(), name);
    const Header header = parse_header(text, name);
    const std::size_t size = data_size(header, file_size - prefix.size - prefix.header_size, name);
    Tensor raw = allocate(header);
    read_exact(file.get(), raw.data(), size, name);
    return finish(header, std::move(raw));
}

std::vector<std::byte> npy_bytes(const TensorView& tensor) {
    const std::size_t size = checked_bytes(tensor);
    const std::string header = npy_header(tensor);
    std::vector<std::byte> out(header.size() + size);
    std::memcpy(out.data(), header.data(), header.size());
    gather(tensor, out.data() + header.size(), size);
    return out;
}

void write_npy(const std::filesystem::path& path, const TensorView& tensor) {
    const std::string name = path.string();
    const std::size_t size = checked_bytes(tensor);
    const std::string header = npy_header(tensor);
    std::vector<std::byte> gathered;  // only for views that are not dense row-major
    const void* data = tensor.data;
    if (size > 0 && !tensor.is_row_major()) {
        gathered.resize(size);
        gather(tensor, gathered.data(), size);
        data = gathered.data();
    }
    File file(std::fopen(path.c_str(), "wb"));
    if (!file) fail(name, fmt::format("cannot open the file for writing: {}", system_message(errno)));
    bool ok = std::fwrite(header.data(), 1, header.size(), file.get()) == header.size();
    ok = ok && (size == 0 || std::fwrite(data, 1, size, file.get()) == size);
    const int write_error = errno;
    const bool closed = std::fclose(file.release()) == 0;
    if (!ok || !closed) {
        const int code = ok ? errno : write_error;
        std::error_code ignored;
        std::filesystem::remove(path, ignored);  // leave no truncated file behind
        fail(name, fmt::format("cannot write the file: {}", system_message(code)));
    }
}

}  // namespace einc
