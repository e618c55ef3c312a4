// The .safetensors reader and writer declared in safetensors.hpp.
//
// Reading follows huggingface/safetensors (safetensors/src/tensor.rs, read_metadata and
// Metadata::validate): the 8-byte header size is at most 100,000,000 and inside the file, the
// header is UTF-8 JSON starting with '{', and the tensors, sorted by data_offsets, tile the data
// buffer exactly: the first begins at 0, each begins where the previous ends, the last ends at the
// end of the file, and each holds exactly numel * itemsize bytes. On top of the reference: the
// header may nest at most 64 levels, a tensor name may appear once, and a shape has at most 64
// dims. Everything is validated before any tensor is allocated.
#include "attntrace/io/safetensors.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/tensor/threads.hpp"
#include "half.hpp"

namespace attntrace {

namespace {

using json = nlohmann::json;

constexpr std::uint64_t max_header_size = 100'000'000;  // the reference's MAX_HEADER_SIZE
constexpr int max_depth = 64;                           // JSON nesting levels in the header
constexpr std::size_t max_rank = 64;                    // dims of one tensor (numpy 2's limit)
constexpr std::string_view metadata_key = "__metadata__";

enum class StKind { f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, boolean, f8_e4m3, f8_e5m2,
                    f8_e4m3fnuz, f8_e5m2fnuz };

struct StDType {
    StKind kind;
    std::string_view name;  // as the header spells it
    std::size_t size;
};

constexpr std::array<StDType, 17> st_dtypes{{
    {StKind::f16, "F16", 2},  {StKind::bf16, "BF16", 2}, {StKind::f32, "F32", 4},
    {StKind::f64, "F64", 8},  {StKind::i8, "I8", 1},     {StKind::i16, "I16", 2},
    {StKind::i32, "I32", 4},  {StKind::i64, "I64", 8},   {StKind::u8, "U8", 1},
    {StKind::u16, "U16", 2},  {StKind::u32, "U32", 4},   {StKind::u64, "U64", 8},
    {StKind::boolean, "BOOL", 1},
    {StKind::f8_e4m3, "F8_E4M3", 1}, {StKind::f8_e5m2, "F8_E5M2", 1},
    {StKind::f8_e4m3fnuz, "F8_E4M3FNUZ", 1}, {StKind::f8_e5m2fnuz, "F8_E5M2FNUZ", 1},
}};

const StDType* find_dtype(std::string_view name) {
    for (const StDType& d : st_dtypes) {
        if (d.name == name) return &d;
    }
    return nullptr;
}

// One header entry, validated on its own (the offsets are checked together afterwards).
struct Entry {
    std::string name;
    const StDType* dtype = nullptr;
    Shape shape;
    std::size_t nbytes = 0;  // numel * itemsize
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

[[noreturn]] void fail(const std::string& file, const std::string& what) {
    throw InputError(file + ": " + what);
}

std::string tensor_label(const std::string& tensor) { return "tensor '" + tensor + "': "; }

std::string offsets_string(const Entry& e) {
    std::string out = "[";  // appended piece by piece: GCC 12's -Wrestrict misfires on "[" + string
    out += std::to_string(e.begin);
    out += ", ";
    out += std::to_string(e.end);
    out += "]";
    return out;
}

// Rust's str::from_utf8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len;
        unsigned char lo = 0x80, hi = 0xbf;  // bounds of the second byte
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0) lo = 0xa0;
            if (c == 0xed) hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0) lo = 0x90;
            if (c == 0xf4) hi = 0x8f;
        } else {
            return false;
        }
        if (s.size() - i < len) return false;
        const auto c1 = static_cast<unsigned char>(s[i + 1]);
        if (c1 < lo || c1 > hi) return false;
        for (std::size_t k = 2; k < len; ++k) {
            const auto ck = static_cast<unsigned char>(s[i + k]);
            if (ck < 0x80 || ck > 0xbf) return false;
        }
        i += len;
    }
    return true;
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
// without the exception id.
std::string json_reason(const std::string& what) {
    const std::size_t bracket = what.find("] ");
    return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

// The header as a JSON object: bounded nesting, each top-level name once.
json parse_header(std::string_view header, const std::string& file) {
    std::set<std::string> seen;
    auto guard = [&](int depth, json::parse_event_t event, json& parsed) {
        if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
            depth >= max_depth) {
            fail(file, "header is nested deeper than " + std::to_string(max_depth) + " levels");
        }
        if (event == json::parse_event_t::key && depth == 1 &&
            !seen.insert(parsed.get<std::string>()).second) {
            fail(file, "tensor '" + parsed.get<std::string>() + "' appears twice in the header");
        }
        return true;
    };
    try {
        return json::parse(header.begin(), header.end(), guard);
    } catch (const json::exception& e) {
        fail(file, "header is not valid JSON: " + json_reason(e.what()));
    }
}

const json* member(const json& object, const char* key) {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

Entry parse_entry(const std::string& file, const std::string& tensor, const json& value) {
    const std::string label = tensor_label(tensor);
    if (!value.is_object()) fail(file, label + "entry is not an object");
    Entry e;
    e.name = tensor;

    const json* dtype = member(value, "dtype");
    if (!dtype) fail(file, label + "missing 'dtype'");
    if (!dtype->is_string()) fail(file, label + "'dtype' must be a string, not " + dtype->dump());
    e.dtype = find_dtype(dtype->get_ref<const std::string&>());
    if (!e.dtype) {
        fail(file, label + "unsupported dtype '" + dtype->get<std::string>() +
                       "' (attntrace reads F16, BF16, F32, F64, F8_E4M3, F8_E5M2, F8_E4M3FNUZ, "
                       "F8_E5M2FNUZ, I8, I16, I32, I64, U8, U16, U32, U64 and BOOL)");
    }

    const json* shape = member(value, "shape");
    if (!shape) fail(file, label + "missing 'shape'");
    const bool dims_ok = shape->is_array() && std::all_of(shape->begin(), shape->end(), [](const json& d) {
                             return d.is_number_unsigned();
                         });
    if (!dims_ok) fail(file, label + "'shape' must be an array of non-negative integers, not " + shape->dump());
    if (shape->size() > max_rank) {
        fail(file, label + "shape has " + std::to_string(shape->size()) + " dimensions (at most " +
                       std::to_string(max_rank) + ")");
    }
    for (const json& d : *shape) e.shape.push_back(d.get<std::uint64_t>());
    const std::optional<std::size_t> count = checked_element_count(e.shape);
    if (!count) fail(file, label + "shape " + shape_string(e.shape) + " has dims whose product passes 2^63");
    if (__builtin_mul_overflow(*count, e.dtype->size, &e.nbytes)) {
        fail(file, label + "shape " + shape_string(e.shape) + " of " + std::string(e.dtype->name) +
                       " has more bytes than fit in 64 bits");
    }

    const json* offsets = member(value, "data_offsets");
    if (!offsets) fail(file, label + "missing 'data_offsets'");
    if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned()) {
        fail(file, label + "'data_offsets' must be [begin, end], two non-negative integers, not " +
                       offsets->dump());
    }
    e.begin = (*offsets)[0].get<std::uint64_t>();
    e.end = (*offsets)[1].get<std::uint64_t>();
    return e;
}

void check_metadata(const std::string& file, const json& value) {
    const bool ok = value.is_object() && std::all_of(value.begin(), value.end(), [](const json& v) {
                        return v.is_string();
                    });
    if (!ok) fail(file, "'__metadata__' must be an object of strings, not " + value.dump());
}

// The reference's Metadata::validate: sorted by offsets, the tensors tile [0, DATA_SIZE) exactly.
void check_offsets(const std::string& file, std::vector<Entry>& entries, std::size_t data_size) {
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
    });
    std::uint64_t at = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
        const std::string label = tensor_label(e.name) + "data_offsets " + offsets_string(e);
        if (e.end < e.begin) fail(file, label + " end before they begin");
        if (e.end > data_size) {
            fail(file, label + " run past the end of the data (" + std::to_string(data_size) + " bytes)");
        }
        if (e.begin > at) {
            fail(file, label + " leave a gap: bytes [" + std::to_string(at) + ", " +
                           std::to_string(e.begin) + ") belong to no tensor");
        }
        if (e.begin < at) {  // at > 0, so there is a previous tensor
            fail(file, label + " overlap tensor '" + previous->name + "' " + offsets_string(*previous));
        }
        if (e.end - e.begin != e.nbytes) {
            fail(file, label + " hold " + std::to_string(e.end - e.begin) + " bytes but " +
                           std::string(e.dtype->name) + " " + shape_string(e.shape) + " needs " +
                           std::to_string(e.nbytes));
        }
        at = e.end;
        previous = &e;
    }
    if (at != data_size) {
        fail(file, "the tensors end at byte " + std::to_string(at) + " but the data holds " +
                       std::to_string(data_size) + " bytes");
    }
}

// ---- conversion ---------------------------------------------------------------------------------

template <class U>
U load_le(const char* p) {
    U bits;
    std::memcpy(&bits, p, sizeof bits);
    if constexpr (std::endian::native == std::endian::big && sizeof(U) > 1) {
        U swapped = 0;
        for (std::size_t i = 0; i < sizeof(U); ++i) swapped = (swapped << 8) | ((bits >> (8 * i)) & 0xff);
        bits = swapped;
    }
    return bits;
}

template <class U>
void store_le(std::string& out, U bits) {
    for (std::size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

template <class T, class Stored>
void fill(const char* src, T* dst, std::size_t count) {
    using U = std::conditional_t<sizeof(Stored) == 1, std::uint8_t,
              std::conditional_t<sizeof(Stored) == 2, std::uint16_t,
              std::conditional_t<sizeof(Stored) == 4, std::uint32_t, std::uint64_t>>>;
    for (std::size_t i = 0; i < count; ++i) {
        dst[i] = static_cast<T>(std::bit_cast<Stored>(load_le<U>(src + i * sizeof(Stored))));
    }
}

template <class T>
void fill_float8(const char* src, T* dst, std::size_t count, const Float8Format& format) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = static_cast<T>(float8_to_float(static_cast<std::uint8_t>(src[i]), format));
}

template <class T>
void convert(const StDType& dtype, const char* src, T* dst, std::size_t count) {
    switch (dtype.kind) {
    case StKind::f16:
        for (std::size_t i = 0; i < count; ++i) dst[i] = static_cast<T>(half_to_float(load_le<std::uint16_t>(src + 2 * i)));
        return;
    case StKind::bf16:
        for (std::size_t i = 0; i < count; ++i) dst[i] = static_cast<T>(bfloat16_to_float(load_le<std::uint16_t>(src + 2 * i)));
        return;
    case StKind::f32: return fill<T, float>(src, dst, count);
    case StKind::f64: return fill<T, double>(src, dst, count);
    case StKind::i8: return fill<T, std::int8_t>(src, dst, count);
    case StKind::i16: return fill<T, std::int16_t>(src, dst, count);
    case StKind::i32: return fill<T, std::int32_t>(src, dst, count);
    case StKind::i64: return fill<T, std::int64_t>(src, dst, count);
    case StKind::u8: return fill<T, std::uint8_t>(src, dst, count);
    case StKind::u16: return fill<T, std::uint16_t>(src, dst, count);
    case StKind::u32: return fill<T, std::uint32_t>(src, dst, count);
    case StKind::u64: return fill<T, std::uint64_t>(src, dst, count);
    case StKind::boolean:
        for (std::size_t i = 0; i < count; ++i) dst[i] = src[i] != 0 ? T(1) : T(0);
        return;
    case StKind::f8_e4m3: return fill_float8(src, dst, count, f8_e4m3fn);
    case StKind::f8_e5m2: return fill_float8(src, dst, count, f8_e5m2);
    case StKind::f8_e4m3fnuz: return fill_float8(src, dst, count, f8_e4m3fnuz);
    case StKind::f8_e5m2fnuz: return fill_float8(src, dst, count, f8_e5m2fnuz);
    }
}

// The validated header of BYTES: its entries and where the data begins.
struct Header {
    std::vector<Entry> entries;
    std::size_t data_start = 0;  // 8 + header size
};

bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

Header read_header(std::string_view bytes, const std::string& name) {
    if (bytes.size() < 8) {
        fail(name, "file is " + std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header size");
    }
    const auto n = load_le<std::uint64_t>(bytes.data());
    if (n > max_header_size) {
        fail(name, "header size " + std::to_string(n) + " exceeds the limit of " +
                       std::to_string(max_header_size) + " bytes");
    }
    if (n > bytes.size() - 8) {
        fail(name, "header size " + std::to_string(n) + " runs past the end of the file (" +
                       std::to_string(bytes.size()) + " bytes)");
    }
    const std::string_view header = bytes.substr(8, n);
    if (!valid_utf8(header)) fail(name, "header is not valid UTF-8");
    // The reference parses with serde_json, which skips leading whitespace before the '{'.
    const std::size_t first = std::find_if_not(header.begin(), header.end(), json_space) - header.begin();
    if (first == header.size() || header[first] != '{') fail(name, "header does not start with '{'");

    const json root = parse_header(header, name);
    Header out;
    for (const auto& [key, value] : root.items()) {
        if (key == metadata_key) {
            check_metadata(name, value);
        } else {
            out.entries.push_back(parse_entry(name, key, value));
        }
    }
    out.data_start = 8 + n;
    check_offsets(name, out.entries, bytes.size() - out.data_start);
    return out;
}



// COUNT items of DTYPE at byte OFFSET of BYTES converted into DST: through FILE (FileBytes::copy,
// then pieces of 1 MiB to convert, by up to read_threads() workers from 4 MiB on) when given, so
// a mapping is never touched.
template <class T>
void read_tensor_data(std::string_view bytes, const FileBytes* file, const StDType& dtype, std::size_t offset, T* dst,
                      std::size_t count) {
    if (!file) return convert(dtype, bytes.data() + offset, dst, count);
    const bool same = (dtype.kind == StKind::f32 && std::is_same_v<T, float>) ||
                      (dtype.kind == StKind::f64 && std::is_same_v<T, double>);
    if (same && std::endian::native == std::endian::little) return file->copy(offset, count * sizeof(T), dst);
    const std::size_t piece = (std::size_t{1} << 20) / dtype.size;  // items per piece
    const std::size_t pieces = (count + piece - 1) / piece;
    const std::size_t workers = count * dtype.size >= (std::size_t{4} << 20) ? read_threads() : 1;
    parallel_for(pieces, workers, [&](std::size_t p, std::size_t) {
        thread_local std::vector<char> staged;  // kept: its pages are not faulted in again
        const std::size_t first = p * piece, n = std::min(piece, count - first);
        staged.resize(std::max(staged.size(), n * dtype.size));
        file->copy(offset + first * dtype.size, n * dtype.size, staged.data());
        convert(dtype, staged.data(), dst + first, n);
    });
}

}  // namespace

template <class T>
std::map<std::string, Array<T>> parse_safetensors(std::string_view bytes, const std::string& name,
                                                  const FileBytes* file) {
    const Header header = read_header(bytes, name);
    std::map<std::string, Array<T>> out;
    for (const Entry& e : header.entries) {
        auto array = Array<T>::from_shape(e.shape);
        read_tensor_data(bytes, file, *e.dtype, header.data_start + e.begin, array.data(), array.size());
        out.emplace(e.name, std::move(array));
    }
    return out;
}

SafetensorsIndex index_safetensors(std::string_view bytes, const std::string& name) {
    const Header header = read_header(bytes, name);
    SafetensorsIndex index;
    index.file = name;
    for (const Entry& e : header.entries)
        index.tensors.emplace(e.name, SafetensorsIndex::Tensor{std::string(e.dtype->name), e.shape,
                                                               header.data_start + e.begin, e.nbytes});
    return index;
}

template <class T>
Array<T> read_safetensors_tensor(std::string_view bytes, const SafetensorsIndex& index, const std::string& tensor,
                                 const FileBytes* file) {
    const auto it = index.tensors.find(tensor);
    if (it == index.tensors.end()) fail(index.file, "no tensor '" + tensor + "'");
    const SafetensorsIndex::Tensor& t = it->second;
    auto array = Array<T>::from_shape(t.shape);
    read_tensor_data(bytes, file, *find_dtype(t.dtype), t.offset, array.data(), array.size());
    return array;
}

template <class T>
void read_safetensors_rows(std::string_view bytes, const SafetensorsIndex& index, const std::string& tensor,
                           std::size_t r0, std::size_t r1, T* out, const FileBytes* file) {
    const auto it = index.tensors.find(tensor);
    if (it == index.tensors.end()) fail(index.file, "no tensor '" + tensor + "'");
    const SafetensorsIndex::Tensor& t = it->second;
    const std::size_t rows = t.shape.empty() ? 1 : t.shape[0];
    if (r0 > r1 || r1 > rows)
        fail(index.file, "tensor '" + tensor + "': rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                             ") of " + std::to_string(rows));
    const std::size_t row = rows ? *checked_element_count(t.shape) / rows : 0;
    const StDType& dtype = *find_dtype(t.dtype);
    read_tensor_data(bytes, file, dtype, t.offset + r0 * row * dtype.size, out, (r1 - r0) * row);
}

template <class T>
std::map<std::string, Array<T>> load_safetensors(const std::string& path) {
    const FileBytes file = FileBytes::open(path);
    return parse_safetensors<T>(file.bytes(), path, &file);
}

template <class T>
std::string safetensors_bytes(const std::map<std::string, Array<T>>& tensors) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
    const char* dtype = std::is_same_v<T, float> ? "F32" : "F64";
    std::string header = R"({"__metadata__":{"format":"pt"})";
    std::size_t offset = 0;
    for (const auto& [name, array] : tensors) {
        if (name == metadata_key) throw OutputError("safetensors: '__metadata__' cannot name a tensor");
        const std::size_t nbytes = array.size() * sizeof(T);
        header += ",";
        header += json(name).dump(-1, ' ', false, json::error_handler_t::replace);
        header += R"(:{"dtype":")";
        header += dtype;
        header += R"(","shape":)";
        header += json(Shape(array.shape().begin(), array.shape().end())).dump();
        header += R"(,"data_offsets":[)";
        header += std::to_string(offset);
        header += ",";
        header += std::to_string(offset + nbytes);
        header += "]}";
        offset += nbytes;
    }
    header += "}";
    header.append((8 - header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned

    std::string out;
    out.reserve(8 + header.size() + offset);
    store_le<std::uint64_t>(out, header.size());
    out += header;
    using U = std::conditional_t<std::is_same_v<T, float>, std::uint32_t, std::uint64_t>;
    for (const auto& [name, array] : tensors) {
        const T* p = array.data();
        for (std::size_t i = 0; i < array.size(); ++i) store_le<U>(out, std::bit_cast<U>(p[i]));
    }
    return out;
}

template std::map<std::string, Array<float>> parse_safetensors<float>(std::string_view, const std::string&, const FileBytes*);
template std::map<std::string, Array<double>> parse_safetensors<double>(std::string_view, const std::string&, const FileBytes*);
template Array<float> read_safetensors_tensor<float>(std::string_view, const SafetensorsIndex&, const std::string&, const FileBytes*);
template Array<double> read_safetensors_tensor<double>(std::string_view, const SafetensorsIndex&, const std::string&, const FileBytes*);
template void read_safetensors_rows<float>(std::string_view, const SafetensorsIndex&, const std::string&, std::size_t,
                                           std::size_t, float*, const FileBytes*);
template void read_safetensors_rows<double>(std::string_view, const SafetensorsIndex&, const std::string&, std::size_t,
                                            std::size_t, double*, const FileBytes*);
template std::map<std::string, Array<float>> load_safetensors<float>(const std::string&);
template std::map<std::string, Array<double>> load_safetensors<double>(const std::string&);
template std::string safetensors_bytes<float>(const std::map<std::string, Array<float>>&);
template std::string safetensors_bytes<double>(const std::map<std::string, Array<double>>&);

}  // namespace attntrace
