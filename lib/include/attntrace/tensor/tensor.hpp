#pragma once
// The tensor vocabulary shared by the readers, writers and the attention core.
//
// Array<T> is a row-major xt::xarray: every tensor attntrace computes with is C-contiguous, so a
// head or a row is a pointer offset with a leading dimension (see gemm.hpp). Its memory comes
// from BufferAllocator (huge pages for large tensors, see buffer.hpp).
// DType is the dtype a file stored, kept next to the converted array because some inputs mean
// different things by dtype (a bool attention mask forbids, a float one is added to the scores).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <xtensor/xarray.hpp>

#include "attntrace/tensor/buffer.hpp"

namespace attntrace {

using Shape = std::vector<std::size_t>;

template <class T>
using Array = xt::xarray<T, xt::layout_type::row_major, BufferAllocator<T>>;

// The numpy dtypes attntrace reads; the names are numpy's kind+size codes.
enum class DType : std::uint8_t { f2, f4, f8, i1, i2, i4, i8, u1, u2, u4, u8, b1 };

std::size_t dtype_size(DType dtype);
std::string_view dtype_code(DType dtype);   // "f4"
std::string_view dtype_name(DType dtype);   // "float32", as numpy.dtype.name
std::optional<DType> dtype_from_name(std::string_view name);  // "float32" or "f4" -> f4
bool is_float(DType dtype);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f4; }
template <>
constexpr DType dtype_of<double>() { return DType::f8; }
template <>
constexpr DType dtype_of<std::int64_t>() { return DType::i8; }  // ids (a MoE layer's experts)

enum class FileFormat : std::uint8_t { npy, json };
std::string_view format_name(FileFormat format);  // "npy", "json"

// "(2, 10, 6)", as PyTorch and numpy print shapes; "()" for a 0-d tensor.
std::string shape_string(const Shape& shape);
template <class S>
std::string shape_string(const S& shape) { return shape_string(Shape(shape.begin(), shape.end())); }

// The shape of an array or xtensor expression.
template <class A>
Shape shape_of(const A& array) {
    return Shape(array.shape().begin(), array.shape().end());
}

// The product of the dims (0 with a zero dim), or nullopt when the dims, zeros counted as 1,
// multiply past 2^63 - 1: no tensor, not even an empty one, can be indexed with such dims.
std::optional<std::size_t> checked_element_count(const Shape& shape);

// Where a tensor came from, as `info` reports it.
struct TensorSource {
    std::string path;          // as the user named it; "-" for stdin
    FileFormat format = FileFormat::npy;
    DType dtype = DType::f4;   // as stored in the file (json: declared, or float64 for bare arrays)
    bool fortran_order = false;
    std::string npy_version;   // "1.0", "2.0", "3.0"; empty for json
};

template <class T>
struct LoadedTensor {
    Array<T> array;
    TensorSource source;
};

}  // namespace attntrace
