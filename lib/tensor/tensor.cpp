// The dtype vocabulary and shape helpers declared in tensor.hpp.
#include "attntrace/tensor/tensor.hpp"

#include <cstddef>
#include <limits>

#include <array>

namespace attntrace {

namespace {

struct DTypeInfo {
    DType dtype;
    std::size_t size;
    std::string_view code;  // numpy's kind + itemsize, the descr without its byte order
    std::string_view name;  // numpy.dtype.name
};

// Indexed by the enum's value.
constexpr std::array<DTypeInfo, 12> dtype_table{{
    {DType::f2, 2, "f2", "float16"}, {DType::f4, 4, "f4", "float32"}, {DType::f8, 8, "f8", "float64"},
    {DType::i1, 1, "i1", "int8"},    {DType::i2, 2, "i2", "int16"},   {DType::i4, 4, "i4", "int32"},
    {DType::i8, 8, "i8", "int64"},   {DType::u1, 1, "u1", "uint8"},   {DType::u2, 2, "u2", "uint16"},
    {DType::u4, 4, "u4", "uint32"},  {DType::u8, 8, "u8", "uint64"},  {DType::b1, 1, "b1", "bool"},
}};

const DTypeInfo& info(DType dtype) { return dtype_table[static_cast<std::size_t>(dtype)]; }

}  // namespace

std::size_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_code(DType dtype) { return info(dtype).code; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
    for (const DTypeInfo& entry : dtype_table) {
        if (name == entry.code || name == entry.name) return entry.dtype;
    }
    // The short float spellings people type on command lines.
    if (name == "f32") return DType::f4;
    if (name == "f64") return DType::f8;
    return std::nullopt;
}

bool is_float(DType dtype) { return dtype == DType::f2 || dtype == DType::f4 || dtype == DType::f8; }

std::string_view format_name(FileFormat format) {
    switch (format) {
    case FileFormat::npy: return "npy";
    case FileFormat::json: return "json";
    }
    return "?";
}

// numpy's tuple repr, which is also what an .npy header holds: "()", "(5,)", "(2, 10, 6)".
std::string shape_string(const Shape& shape) {
    std::string out = "(";
    for (std::size_t d = 0; d < shape.size(); ++d) {
        if (d > 0) out += ", ";
        out += std::to_string(shape[d]);
    }
    if (shape.size() == 1) out += ",";
    out += ")";
    return out;
}

std::optional<std::size_t> checked_element_count(const Shape& shape) {
    // xtensor keeps strides as signed 64-bit products of the dims, so even an empty tensor
    // (a zero dim) cannot have dims whose product, zeros counted as 1, passes 2^63 - 1.
    std::size_t product = 1;
    bool empty = false;
    for (std::size_t dim : shape) {
        if (dim == 0) {
            empty = true;
            continue;
        }
        if (__builtin_mul_overflow(product, dim, &product) ||
            product > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()))
            return std::nullopt;
    }
    return empty ? 0 : product;
}

}  // namespace attntrace
