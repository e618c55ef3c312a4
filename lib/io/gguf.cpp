// The GGUF header parser (gguf.hpp), following ggml/src/gguf.cpp gguf_init_from_file_impl and
// gguf_reader: the same limits where ggml has them (version 2 or 3, at most 4 dims, names under
// 64 bytes, dims >= 0 whose product stays below 2^63, a known type whose block divides ne[0], a
// power-of-2 general.alignment of type uint32), and on top of it every length checked against
// the bytes left before anything is allocated, nested arrays (gguf-py writes them; ggml refuses
// them) at most 8 deep, and tensor data checked to be aligned, inside the file and not
// overlapping (ggml wants them packed in order; gguf-py writes them so).
#include "attntrace/io/gguf.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/ggml_types.hpp"
#include "gguf_values.hpp"

namespace attntrace {

namespace {

constexpr std::uint32_t gguf_magic = 0x46554747;  // "GGUF" read little-endian
constexpr std::size_t max_dims = 4;              // GGML_MAX_DIMS
constexpr std::size_t max_name = 64;             // GGML_MAX_NAME, the terminating zero included
constexpr int max_depth = 8;                     // arrays of arrays of ...

[[noreturn]] void fail(const std::string& file, const std::string& what) { throw InputError(file + ": " + what); }

// Little-endian words from a cursor that never passes the end of the bytes.
struct Cursor {
    std::string_view bytes;
    const std::string& name;
    std::size_t at = 0;

    std::size_t left() const { return bytes.size() - at; }

    [[noreturn]] void past_end(const std::string& what, std::uint64_t size) const {
        fail(name, "truncated: " + what + " (" + std::to_string(size) + " bytes at byte " + std::to_string(at) +
                       ") runs past the end of the file (" + std::to_string(bytes.size()) + " bytes)");
    }
    std::string_view take(std::uint64_t size, const std::string& what) {
        if (size > left()) past_end(what, size);
        const std::string_view out = bytes.substr(at, size);
        at += size;
        return out;
    }
    template <class U>
    U read(const std::string& what) {
        const std::string_view b = take(sizeof(U), what);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < sizeof(U); ++i) v |= std::uint64_t{static_cast<unsigned char>(b[i])} << (8 * i);
        return static_cast<U>(v);
    }
    std::string_view string(const std::string& what) {
        const auto size = read<std::uint64_t>(what + "'s length");
        return take(size, what);
    }
};

std::size_t scalar_size(GgufType t) {
    switch (t) {
    case GgufType::uint8: case GgufType::int8: case GgufType::boolean: return 1;
    case GgufType::uint16: case GgufType::int16: return 2;
    case GgufType::uint32: case GgufType::int32: case GgufType::float32: return 4;
    case GgufType::uint64: case GgufType::int64: case GgufType::float64: return 8;
    default: return 0;  // string, array
    }
}

GgufType value_type(std::uint32_t raw, const std::string& file, std::string_view key) {
    if (raw > static_cast<std::uint32_t>(GgufType::float64))
        fail(file, "key '" + std::string(key) + "' has unknown value type " + std::to_string(raw));
    return static_cast<GgufType>(raw);
}

GgufValue read_value(Cursor& c, GgufType type, std::string_view key, int depth);

// An array's elements after its type and count: COUNT elements of ELEMENT, each checked to fit.
std::string_view read_elements(Cursor& c, const GgufValue& v, std::string_view key, int depth) {
    const std::string what = "array '" + std::string(key) + "' of " + std::to_string(v.count) + " " +
                             std::string(gguf_type_name(v.element));
    const std::size_t start = c.at;
    const std::size_t size = scalar_size(v.element);
    const std::size_t least = size ? size : v.element == GgufType::string ? 8 : 12;  // a length; a type and a count
    if (v.count > c.left() / least)
        fail(c.name, "truncated: " + what + " elements at byte " + std::to_string(c.at) + " cannot fit in the " +
                         std::to_string(c.left()) + " bytes left");
    if (size) return c.take(v.count * size, what);
    if (v.element == GgufType::array && depth >= max_depth)
        fail(c.name, "array '" + std::string(key) + "' nests arrays deeper than " + std::to_string(max_depth) + " levels");
    for (std::uint64_t i = 0; i < v.count; ++i) read_value(c, v.element, key, depth + 1);
    return c.bytes.substr(start, c.at - start);
}

GgufValue read_value(Cursor& c, GgufType type, std::string_view key, int depth) {
    GgufValue v;
    v.type = type;
    const std::string what = "the value of '" + std::string(key) + "'";
    if (type == GgufType::string) {
        v.bytes = c.string(what);
    } else if (type == GgufType::array) {
        v.element = value_type(c.read<std::uint32_t>(what), c.name, key);
        v.count = c.read<std::uint64_t>(what);
        v.bytes = read_elements(c, v, key, depth);
    } else {
        v.bytes = c.take(scalar_size(type), what);
    }
    return v;
}

void read_magic_and_version(Cursor& c, GgufHeader& h) {
    if (c.left() < 4 || c.read<std::uint32_t>("the magic") != gguf_magic)
        fail(c.name, "not a GGUF file (it does not start with \"GGUF\")");
    h.version = c.read<std::uint32_t>("the version");
    if (h.version != 0 && (h.version & 0xffff) == 0)
        fail(c.name, "GGUF version " + std::to_string(h.version) + " looks byte-swapped: a big-endian file is not read");
    if (h.version == 1) fail(c.name, "GGUF version 1 is no longer read (llama.cpp reads versions 2 and 3)");
    if (h.version == 0 || h.version > 3)
        fail(c.name, "GGUF version " + std::to_string(h.version) + " is not read (versions 2 and 3 are)");
}

// A count the rest of the file must hold at least LEAST bytes per item of.
std::uint64_t read_count(Cursor& c, const char* what, std::size_t least) {
    const auto n = c.read<std::uint64_t>(std::string("the ") + what + " count");
    if (n > c.left() / least)
        fail(c.name, "the header claims " + std::to_string(n) + " " + what + ", more than the " +
                         std::to_string(c.left()) + " bytes left could hold");
    return n;
}

void read_metadata(Cursor& c, GgufHeader& h, std::uint64_t count) {
    std::set<std::string_view> seen;
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::string_view key = c.string("key " + std::to_string(i));
        if (key.empty()) fail(c.name, "key " + std::to_string(i) + " is empty");
        if (!seen.insert(key).second) fail(c.name, "key '" + std::string(key) + "' appears twice");
        const GgufType type = value_type(c.read<std::uint32_t>("the type of '" + std::string(key) + "'"), c.name, key);
        h.metadata.emplace_back(key, read_value(c, type, key, 1));
    }
}

void read_alignment(GgufHeader& h) {
    for (const auto& [key, v] : h.metadata) {
        if (key != "general.alignment") continue;
        if (v.type != GgufType::uint32)
            fail(h.name, "general.alignment is a " + std::string(gguf_type_name(v.type)) + ", not a uint32");
        std::uint32_t a = 0;
        for (int i = 0; i < 4; ++i) a |= std::uint32_t{static_cast<unsigned char>(v.bytes[i])} << (8 * i);
        if (a == 0 || (a & (a - 1)) != 0) fail(h.name, "general.alignment " + std::to_string(a) + " is not a power of 2");
        h.alignment = a;
    }
}

// The dims ne[0..n) of tensor T, into T.shape reversed; their product must stay below 2^63.
void read_dims(Cursor& c, GgufTensor& t) {
    const auto n = c.read<std::uint32_t>("the dims of '" + t.name + "'");
    if (n > max_dims)
        fail(c.name, "tensor '" + t.name + "' has " + std::to_string(n) + " dims (at most " + std::to_string(max_dims) + ")");
    t.shape.assign(n, 0);
    std::uint64_t product = 1;
    bool overflow = false;
    for (std::uint32_t j = 0; j < n; ++j) {
        const auto ne = c.read<std::int64_t>("the dims of '" + t.name + "'");
        if (ne < 0) fail(c.name, "tensor '" + t.name + "' has a negative dim " + std::to_string(ne));
        t.shape[n - 1 - j] = static_cast<std::size_t>(ne);
        overflow = overflow || (ne != 0 && product > static_cast<std::uint64_t>(INT64_MAX) / static_cast<std::uint64_t>(ne));
        product *= static_cast<std::uint64_t>(ne);
    }
    if (overflow && std::find(t.shape.begin(), t.shape.end(), 0) == t.shape.end())
        fail(c.name, "tensor '" + t.name + "' has dims " + shape_string(t.shape) + " whose product passes 2^63");
}

// Tensor T's type (known to ggml and not removed), its row a whole number of blocks, its bytes.
void check_type(const std::string& file, GgufTensor& t) {
    if (t.type >= ggml_type_count) fail(file, "tensor '" + t.name + "' has unknown type " + std::to_string(t.type));
    const std::size_t block = ggml_block_size(t.type), bytes = ggml_block_bytes(t.type);
    if (block == 0)
        fail(file, "tensor '" + t.name + "' has type " + std::to_string(t.type) + ": " + ggml_type_name(t.type));
    const std::size_t row = t.shape.empty() ? 1 : t.shape.back();
    if (row % block != 0)
        fail(file, "tensor '" + t.name + "' of type " + ggml_type_name(t.type) + " has rows of " + std::to_string(row) +
                       " elements, not a multiple of its block of " + std::to_string(block));
    const std::size_t blocks = *checked_element_count(t.shape) / block;
    if (__builtin_mul_overflow(blocks, bytes, &t.nbytes))
        fail(file, "tensor '" + t.name + "' " + shape_string(t.shape) + " has more bytes than fit in 64 bits");
}

void read_tensor_infos(Cursor& c, GgufHeader& h, std::uint64_t count) {
    std::set<std::string> seen;
    for (std::uint64_t i = 0; i < count; ++i) {
        GgufTensor t;
        t.name = std::string(c.string("the name of tensor " + std::to_string(i)));
        if (t.name.size() >= max_name)
            fail(c.name, "tensor " + std::to_string(i) + "'s name is " + std::to_string(t.name.size()) + " bytes (under " +
                             std::to_string(max_name) + ")");
        if (!seen.insert(t.name).second) fail(c.name, "tensor '" + t.name + "' appears twice");
        read_dims(c, t);
        t.type = c.read<std::uint32_t>("the type of '" + t.name + "'");
        check_type(c.name, t);
        t.offset = c.read<std::uint64_t>("the offset of '" + t.name + "'");
        h.tensors.push_back(std::move(t));
    }
}

// Every tensor aligned, inside the data section and overlapping none; offsets made absolute.
void place_tensors(GgufHeader& h, std::size_t header_end, std::size_t file_size) {
    const std::size_t pad = (h.alignment - header_end % h.alignment) % h.alignment;
    if (!h.tensors.empty() && pad > file_size - header_end)
        fail(h.name, "truncated: the data section would start at byte " + std::to_string(header_end + pad) +
                         ", past the end of the file (" + std::to_string(file_size) + " bytes)");
    h.data_offset = header_end + pad;
    const std::size_t data = h.tensors.empty() ? 0 : file_size - h.data_offset;
    std::vector<const GgufTensor*> order;
    for (GgufTensor& t : h.tensors) {
        if (t.offset % h.alignment != 0)
            fail(h.name, "tensor '" + t.name + "' has offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
                             std::to_string(h.alignment));
        if (t.offset > data || t.nbytes > data - t.offset)
            fail(h.name, "tensor '" + t.name + "': its " + std::to_string(t.nbytes) + " bytes at offset " +
                             std::to_string(t.offset) + " run past the end of the file (the data section holds " +
                             std::to_string(data) + " bytes)");
        order.push_back(&t);
    }
    std::sort(order.begin(), order.end(), [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < order.size(); ++i)
        if (order[i - 1]->offset + order[i - 1]->nbytes > order[i]->offset)
            fail(h.name, "tensor '" + order[i]->name + "' at offset " + std::to_string(order[i]->offset) +
                             " overlaps tensor '" + order[i - 1]->name + "'");
    for (GgufTensor& t : h.tensors) t.offset += h.data_offset;
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
    static constexpr std::string_view names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                                 "bool", "string", "array", "uint64", "int64", "float64"};
    const auto i = static_cast<std::uint32_t>(type);
    return i < std::size(names) ? names[i] : "unknown";
}

std::string gguf_tensor_type_name(std::uint32_t type) { return ggml_type_name(type); }

void for_each_gguf_element(const GgufValue& array, const std::function<void(const GgufValue&)>& fn) {
    static const std::string name = "array";
    Cursor c{array.bytes, name};
    for (std::uint64_t i = 0; i < array.count; ++i) fn(read_value(c, array.element, "", 1));
}

GgufHeader parse_gguf(std::string_view bytes, const std::string& name) {
    GgufHeader h;
    h.name = name;
    Cursor c{bytes, name};
    read_magic_and_version(c, h);
    const std::uint64_t tensors = read_count(c, "tensors", 25);  // name length, n_dims, a type and an offset
    const std::uint64_t keys = read_count(c, "key/value pairs", 14);  // a key of 1 byte, a type, a 1-byte value
    read_metadata(c, h, keys);
    read_alignment(h);
    read_tensor_infos(c, h, tensors);
    place_tensors(h, c.at, bytes.size());
    return h;
}

}  // namespace attntrace
