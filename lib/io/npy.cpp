// numpy's .npy format (npy.hpp): parse_npy, npy_stated_size, npy_bytes and npy_header.
//
// File layout (numpy.lib.format):
//   "\x93NUMPY" major minor          6 + 2 bytes; versions 1.0, 2.0, 3.0
//   header length                    2 bytes LE (1.0) or 4 bytes LE (2.0, 3.0)
//   header                           a Python dict literal, latin-1 (1.0, 2.0) or utf-8 (3.0):
//                                    {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//   data                             prod(shape) items of descr, C or Fortran order
//
// Why our own parser and not xtensor's xnpy.hpp: xnpy trusts the file. It does not check the header
// length against the file size, does not check the shape product for overflow, does not check
// that the data is really there before reading it, and it rejects big-endian data and any dtype
// other than the one requested. A file must never make attntrace read past its end or allocate
// more than it holds, so every check below happens before the one allocation.
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/tensor.hpp"
#include "attntrace/io/npy.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "half.hpp"

namespace attntrace {

namespace {

constexpr std::string_view npy_magic = "\x93NUMPY";
constexpr std::size_t npy_align = 64;              // numpy's ARRAY_ALIGN
constexpr std::size_t growth_axis_max_digits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS

[[noreturn]] void fail(const std::string& name, const std::string& what) {
    throw InputError(name + ": " + what);
}

// ---- the header dict ---------------------------------------------------------------------------

struct NpyHeader {
    std::string descr;  // as written, for messages: "<f4"
    DType dtype = DType::f4;
    bool big_endian = false;
    bool fortran_order = false;
    Shape shape;
};

// What a descr's kind letter is, for the message about an unsupported dtype.
std::string_view kind_description(char kind) {
    switch (kind) {
    case 'c': return " (complex)";
    case 'O': return " (object)";
    case 'U': return " (unicode string)";
    case 'S':
    case 'a': return " (byte string)";
    case 'V': return " (void)";
    case 'M': return " (datetime)";
    case 'm': return " (timedelta)";
    default: return "";
    }
}

// DESCR ("<f4", "|u1", ">f2") -> dtype and byte order, or an InputError naming what it is.
void parse_descr(NpyHeader& header, const std::string& name) {
    std::string_view rest = header.descr;
    char order = '=';
    if (!rest.empty() && std::string_view("<>|=").find(rest.front()) != std::string_view::npos) {
        order = rest.front();
        rest.remove_prefix(1);
    }
    // The codes are exactly kind + one digit ("f4"); dtype_from_name also knows longer names.
    std::optional<DType> dtype;
    if (rest.size() == 2) dtype = dtype_from_name(rest);
    const std::string unsupported = "unsupported dtype '" + header.descr + "'";
    if (!dtype) fail(name, unsupported + std::string(kind_description(rest.empty() ? '\0' : rest.front())));
    header.dtype = dtype.value();
    if (order == '|' && dtype_size(header.dtype) > 1) {
        fail(name, unsupported + " (byte order '|' is only for 1-byte types)");
    }
    header.big_endian = order == '>' || (order == '=' && std::endian::native == std::endian::big);
}

// A strict reader for the three-key dict numpy writes. Keys in any order, ' or " strings, True or
// False, tuples of non-negative integers, optional trailing comma, whitespace anywhere between
// tokens. Anything else is an InputError.
class HeaderReader {
public:
    HeaderReader(std::string_view text, const std::string& name) : text_(text), name_(name) {}

    NpyHeader read() {
        NpyHeader header;
        bool have_descr = false, have_order = false, have_shape = false;
        expect('{');
        while (!accept('}')) {
            const std::string key = read_string("a key");
            expect(':');
            if (key == "descr") {
                once(have_descr, key);
                skip_space();
                if (peek() == '[' || peek() == '{') {
                    fail(name_, "unsupported dtype (structured: a list of fields)");
                }
                header.descr = read_string("the 'descr' string");
            } else if (key == "fortran_order") {
                once(have_order, key);
                header.fortran_order = read_bool();
            } else if (key == "shape") {
                once(have_shape, key);
                header.shape = read_shape();
            } else {
                fail(name_, ".npy header has an unknown key '" + key +
                                "' (expected 'descr', 'fortran_order', 'shape')");
            }
            if (accept('}')) break;
            expect(',');
        }
        skip_space();
        if (pos_ != text_.size()) invalid("unexpected text after the closing '}'");
        for (auto [have, key] : {std::pair{have_descr, "descr"}, std::pair{have_order, "fortran_order"},
                                 std::pair{have_shape, "shape"}}) {
            if (!have) fail(name_, ".npy header has no '" + std::string(key) + "' key");
        }
        parse_descr(header, name_);
        return header;
    }

private:
    std::string_view text_;
    std::size_t pos_ = 0;
    const std::string& name_;

    [[noreturn]] void invalid(const std::string& what) const {
        fail(name_, ".npy header is not a valid dict: " + what + " (at character " +
                        std::to_string(pos_) + ")");
    }
    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
    void skip_space() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                       text_[pos_] == '\n' || text_[pos_] == '\r')) {
            ++pos_;
        }
    }
    bool accept(char c) {
        skip_space();
        if (pos_ == text_.size() || text_[pos_] != c) return false;
        ++pos_;
        return true;
    }
    void expect(char c) {
        if (!accept(c)) invalid(std::string("expected '") + c + "'");
    }
    void once(bool& seen, const std::string& key) {
        if (seen) fail(name_, ".npy header has the key '" + key + "' twice");
        seen = true;
    }

    std::string read_string(const char* what) {
        skip_space();
        const char quote = peek();
        if (quote != '\'' && quote != '"') invalid(std::string("expected ") + what);
        const std::size_t begin = pos_ + 1;
        const std::size_t end = text_.find(quote, begin);
        if (end == std::string_view::npos) invalid("unterminated string");
        const std::string_view body = text_.substr(begin, end - begin);
        if (body.find_first_of("\\\n\r") != std::string_view::npos) {
            invalid("escape or line break in a string");
        }
        pos_ = end + 1;
        return std::string(body);
    }

    // The run of characters up to the next delimiter, for literals and messages.
    std::string_view read_token() {
        skip_space();
        const std::size_t begin = pos_;
        while (pos_ < text_.size() && std::string_view(" \t\r\n,:(){}[]'\"").find(text_[pos_]) ==
                                          std::string_view::npos) {
            ++pos_;
        }
        return text_.substr(begin, pos_ - begin);
    }

    bool read_bool() {
        const std::size_t at = pos_;
        const std::string_view token = read_token();
        if (token == "True") return true;
        if (token == "False") return false;
        pos_ = at;
        invalid("'fortran_order' must be True or False");
    }

    Shape read_shape() {
        skip_space();
        if (peek() != '(') invalid("'shape' must be a tuple");
        ++pos_;
        Shape shape;
        if (accept(')')) return shape;
        for (;;) {
            shape.push_back(read_dim());
            if (accept(')')) {
                if (shape.size() == 1) invalid("'shape' (N) is not a tuple; numpy writes (N,)");
                return shape;
            }
            expect(',');
            if (accept(')')) return shape;
        }
    }

    std::size_t read_dim() {
        const std::string_view token = read_token();
        if (token.empty()) invalid("expected a dimension");
        const bool negative = token.front() == '-';
        const std::string_view digits = negative ? token.substr(1) : token;
        const bool integer =
            !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
        if (!integer) fail(name_, "non-integer dimension '" + std::string(token) + "' in 'shape'");
        if (negative) fail(name_, "negative dimension " + std::string(token) + " in 'shape'");
        std::size_t value = 0;
        for (char c : digits) {
            if (__builtin_mul_overflow(value, std::size_t{10}, &value) ||
                __builtin_add_overflow(value, static_cast<std::size_t>(c - '0'), &value)) {
                fail(name_, "dimension " + std::string(token) + " in 'shape' does not fit in 64 bits");
            }
        }
        return value;
    }
};

// ---- converting the data -----------------------------------------------------------------------

struct Half {  // an IEEE 754 binary16, as numpy's float16
    std::uint16_t bits;
};

template <class U>
U byteswap(U value) {
    if constexpr (sizeof(U) == 1) return value;
    if constexpr (sizeof(U) == 2) return __builtin_bswap16(value);
    if constexpr (sizeof(U) == 4) return __builtin_bswap32(value);
    if constexpr (sizeof(U) == 8) return __builtin_bswap64(value);
}

template <std::size_t N> struct UnsignedOf;
template <> struct UnsignedOf<1> { using type = std::uint8_t; };
template <> struct UnsignedOf<2> { using type = std::uint16_t; };
template <> struct UnsignedOf<4> { using type = std::uint32_t; };
template <> struct UnsignedOf<8> { using type = std::uint64_t; };

// One stored item at P (any alignment) as T.
template <class T, class Stored, bool Swap>
T decode(const char* p) {
    if constexpr (std::is_same_v<Stored, bool>) {
        return *p != 0 ? T(1) : T(0);
    } else {
        using U = typename UnsignedOf<sizeof(Stored)>::type;
        U bits;
        std::memcpy(&bits, p, sizeof bits);
        if constexpr (Swap) bits = byteswap(bits);
        if constexpr (std::is_same_v<Stored, Half>) {
            return static_cast<T>(half_to_float(bits));
        } else {
            return static_cast<T>(std::bit_cast<Stored>(bits));
        }
    }
}

// Converts the items at SRC into OUT (already shaped). Fortran data holds the first axis fastest:
// it is read in file order while the row-major offset of each item is tracked.
template <class T, class Stored, bool Swap>
void fill(const char* src, bool fortran_order, Array<T>& out) {
    T* dst = out.data();
    const std::size_t count = out.size();
    const std::size_t ndim = out.dimension();
    if (!fortran_order || ndim < 2) {
        for (std::size_t i = 0; i < count; ++i) dst[i] = decode<T, Stored, Swap>(src + i * sizeof(Stored));
        return;
    }
    Shape stride(ndim, 1);  // row-major strides, in items
    for (std::size_t d = ndim - 1; d > 0; --d) stride[d - 1] = stride[d] * out.shape()[d];
    Shape index(ndim, 0);
    std::size_t offset = 0;
    for (std::size_t i = 0; i < count; ++i) {
        dst[offset] = decode<T, Stored, Swap>(src + i * sizeof(Stored));
        for (std::size_t d = 0; d < ndim; ++d) {
            offset += stride[d];
            if (++index[d] < out.shape()[d]) break;
            offset -= stride[d] * index[d];
            index[d] = 0;
        }
    }
}

template <class T, bool Swap>
void convert(DType dtype, const char* src, bool fortran_order, Array<T>& out) {
    switch (dtype) {
    case DType::f2: return fill<T, Half, Swap>(src, fortran_order, out);
    case DType::f4: return fill<T, float, Swap>(src, fortran_order, out);
    case DType::f8: return fill<T, double, Swap>(src, fortran_order, out);
    case DType::i1: return fill<T, std::int8_t, Swap>(src, fortran_order, out);
    case DType::i2: return fill<T, std::int16_t, Swap>(src, fortran_order, out);
    case DType::i4: return fill<T, std::int32_t, Swap>(src, fortran_order, out);
    case DType::i8: return fill<T, std::int64_t, Swap>(src, fortran_order, out);
    case DType::u1: return fill<T, std::uint8_t, Swap>(src, fortran_order, out);
    case DType::u2: return fill<T, std::uint16_t, Swap>(src, fortran_order, out);
    case DType::u4: return fill<T, std::uint32_t, Swap>(src, fortran_order, out);
    case DType::u8: return fill<T, std::uint64_t, Swap>(src, fortran_order, out);
    case DType::b1: return fill<T, bool, Swap>(src, fortran_order, out);
    }
}

std::uint32_t read_le(std::string_view bytes, std::size_t at, std::size_t size) {
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < size; ++i) {
        value |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    }
    return value;
}

// Where the parts of a .npy file start, and what its header says.
struct NpyLayout {
    int major = 1;
    std::size_t header_begin = 0;   // the header dict's first byte
    std::size_t header_length = 0;  // as stated
    NpyHeader header;
    std::size_t data_bytes = 0;     // prod(shape) * itemsize, checked for overflow
};

// The magic string, version and header length at the start of BYTES; nullopt when BYTES ends
// before them (a truncated file, or a stream not read that far).
std::optional<NpyLayout> npy_preamble(std::string_view bytes, const std::string& name) {
    if (!bytes.starts_with(npy_magic)) {
        if (bytes.empty() || npy_magic.starts_with(bytes)) return std::nullopt;
        fail(name, "not a .npy file (no \\x93NUMPY magic)");
    }
    if (bytes.size() < npy_magic.size() + 2) return std::nullopt;
    NpyLayout layout;
    layout.major = static_cast<unsigned char>(bytes[6]);
    const int minor = static_cast<unsigned char>(bytes[7]);
    if ((layout.major != 1 && layout.major != 2 && layout.major != 3) || minor != 0) {
        fail(name, "unsupported .npy format version " + std::to_string(layout.major) + "." +
                       std::to_string(minor) + " (expected 1.0, 2.0 or 3.0)");
    }
    const std::size_t length_size = layout.major == 1 ? 2 : 4;
    layout.header_begin = 8 + length_size;
    if (bytes.size() < layout.header_begin) return std::nullopt;
    layout.header_length = read_le(bytes, 8, length_size);
    return layout;
}

// Reads the header dict (BYTES holds it whole) into LAYOUT and sizes the data.
void read_npy_header(std::string_view bytes, const std::string& name, NpyLayout& layout) {
    // 1.0 and 2.0 headers are latin-1, 3.0 utf-8; a valid header is ASCII either way, anything
    // else fails as an unknown key or dtype.
    layout.header = HeaderReader(bytes.substr(layout.header_begin, layout.header_length), name).read();
    const NpyHeader& header = layout.header;
    const std::size_t itemsize = dtype_size(header.dtype);
    const std::optional<std::size_t> count = checked_element_count(header.shape);
    if (!count) fail(name, "shape " + shape_string(header.shape) + " has dims whose product passes 2^63");
    if (__builtin_mul_overflow(*count, itemsize, &layout.data_bytes)) {
        fail(name, "shape " + shape_string(header.shape) + " " + std::string(dtype_name(header.dtype)) +
                       " has more bytes than fit in 64 bits");
    }
}

}  // namespace

std::optional<std::uint64_t> npy_stated_size(std::string_view head, const std::string& name) {
    constexpr std::size_t max_stream_header = std::size_t{1} << 20;
    std::optional<NpyLayout> layout = npy_preamble(head, name);
    if (!layout) return std::nullopt;
    if (layout->header_length > max_stream_header) {
        fail(name, "header length " + std::to_string(layout->header_length) + " is over 1 MiB (numpy writes a few hundred bytes)");
    }
    if (head.size() - layout->header_begin < layout->header_length) return std::nullopt;
    read_npy_header(head, name, *layout);
    std::uint64_t total = 0;
    if (__builtin_add_overflow(layout->header_begin + layout->header_length, layout->data_bytes, &total)) {
        fail(name, "shape " + shape_string(layout->header.shape) + " has more bytes than fit in 64 bits");
    }
    return total;
}

template <class T>
LoadedTensor<T> parse_npy(std::string_view bytes, const std::string& name, const FileBytes* file) {
    if (bytes.empty()) fail(name, "empty file");
    const std::optional<NpyLayout> preamble = npy_preamble(bytes, name);
    if (!preamble) {
        if (!bytes.starts_with(npy_magic)) fail(name, "not a .npy file (no \\x93NUMPY magic)");
        fail(name, bytes.size() < npy_magic.size() + 2 ? "file ends inside the .npy version"
                                                      : "file ends inside the .npy header length");
    }
    NpyLayout layout = *preamble;
    if (layout.header_length > bytes.size() - layout.header_begin) {
        fail(name, "header length " + std::to_string(layout.header_length) +
                       " runs past the end of the file (" + std::to_string(bytes.size()) + " bytes)");
    }
    read_npy_header(bytes, name, layout);
    const NpyHeader& header = layout.header;
    const std::size_t data_begin = layout.header_begin + layout.header_length;
    const std::size_t available = bytes.size() - data_begin;
    const std::size_t needed = layout.data_bytes;
    const std::string what = shape_string(header.shape) + " " + std::string(dtype_name(header.dtype));
    if (needed > available) {
        fail(name, "truncated data: needs " + std::to_string(needed) + " bytes, file holds " +
                       std::to_string(available) + " (" + what + ")");
    }
    if (needed < available) {
        fail(name, std::to_string(available - needed) + " trailing bytes after the data (" + what +
                       " needs " + std::to_string(needed) + " bytes)");
    }

    // count <= the file's size, so this allocation is bounded by the input.
    LoadedTensor<T> loaded;
    loaded.array = Array<T>::from_shape(header.shape);
    const char* src = bytes.data() + data_begin;
    const bool swap = header.big_endian != (std::endian::native == std::endian::big);
    const bool same_order = !header.fortran_order || header.shape.size() < 2;
    if (header.dtype == dtype_of<T>() && !swap && same_order) {
        if (file) file->copy(data_begin, needed, loaded.array.data());
        else if (needed > 0) std::memcpy(loaded.array.data(), src, needed);
    } else if (swap) {
        convert<T, true>(header.dtype, src, header.fortran_order, loaded.array);
    } else {
        convert<T, false>(header.dtype, src, header.fortran_order, loaded.array);
    }
    loaded.source.path = name;
    loaded.source.format = FileFormat::npy;
    loaded.source.dtype = header.dtype;
    loaded.source.fortran_order = header.fortran_order;
    loaded.source.npy_version = std::to_string(layout.major) + ".0";
    return loaded;
}

template <class T>
std::string npy_header(const Shape& shape) {
    // Byte for byte what numpy >= 1.24 writes: sorted keys, repr values, room to grow the first
    // axis in place, then spaces and '\n' up to a multiple of 64 bytes.
    std::string header = "{'descr': '<" + std::string(dtype_code(dtype_of<T>())) +
                         "', 'fortran_order': False, 'shape': " + shape_string(shape) + ", }";
    if (!shape.empty()) header.append(growth_axis_max_digits - std::to_string(shape[0]).size(), ' ');
    // Version 1.0 unless the header outgrows its 2-byte length, as numpy does.
    std::size_t length_size = 2;
    std::size_t pad = npy_align - (npy_magic.size() + 2 + length_size + header.size() + 1) % npy_align;
    if (header.size() + 1 + pad > 0xffff) {
        length_size = 4;
        pad = npy_align - (npy_magic.size() + 2 + length_size + header.size() + 1) % npy_align;
    }
    header.append(pad, ' ');
    header += '\n';

    std::string out(npy_magic);
    out += static_cast<char>(length_size == 2 ? 1 : 2);
    out += '\0';
    for (std::size_t i = 0; i < length_size; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return out + header;
}

template <class T>
std::string npy_bytes(const Array<T>& array) {
    std::string out = npy_header<T>(Shape(array.shape().begin(), array.shape().end()));
    const std::size_t data_begin = out.size();
    out.resize(data_begin + array.size() * sizeof(T));
    char* dst = out.data() + data_begin;
    if (array.size() > 0) std::memcpy(dst, array.data(), array.size() * sizeof(T));
    if constexpr (std::endian::native == std::endian::big) {
        using U = typename UnsignedOf<sizeof(T)>::type;
        for (std::size_t i = 0; i < array.size(); ++i) {
            U bits;
            std::memcpy(&bits, dst + i * sizeof(T), sizeof bits);
            bits = byteswap(bits);
            std::memcpy(dst + i * sizeof(T), &bits, sizeof bits);
        }
    }
    return out;
}

template LoadedTensor<float> parse_npy<float>(std::string_view, const std::string&, const FileBytes*);
template LoadedTensor<double> parse_npy<double>(std::string_view, const std::string&, const FileBytes*);
template std::string npy_bytes<float>(const Array<float>&);
template std::string npy_bytes<double>(const Array<double>&);
template std::string npy_header<float>(const Shape&);
template std::string npy_header<double>(const Shape&);
template std::string npy_bytes<std::int64_t>(const Array<std::int64_t>&);
template std::string npy_header<std::int64_t>(const Shape&);

}  // namespace attntrace
