#pragma once
// numpy's .npy format (npy.cpp): reading, writing, and the size a header states.
//
// Reading validates everything before it allocates: the header against the file size, the shape
// product against overflow, and the declared byte count against the bytes present. A file can
// never make attntrace allocate more than it holds. Every failure is an InputError whose message
// starts with the file's name.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

class FileBytes;

// The tensor in BYTES (a whole .npy file), converted to T (float or double); NAME is used in
// messages. The fuzzer drives it. With FILE (whose bytes() BYTES are), data already in T's dtype
// and order is read with FILE->copy() straight into the array.
template <class T>
LoadedTensor<T> parse_npy(std::string_view bytes, const std::string& name, const FileBytes* file = nullptr);

// For a .npy file arriving on a stream: the size of the whole file (header and data) that the
// header at the start of HEAD states, or nullopt while HEAD does not yet hold the whole header.
// Throws the InputError parse_npy would for a bad header, and one for a header over 1 MiB.
std::optional<std::uint64_t> npy_stated_size(std::string_view head, const std::string& name);

// The bytes of a version 1.0 .npy file: little-endian, C order, header padded so the data starts
// at a multiple of 64 bytes.
template <class T>
std::string npy_bytes(const Array<T>& array);

// The part of npy_bytes before the data, for writing the data straight from the array.
template <class T>
std::string npy_header(const Shape& shape);

}  // namespace attntrace
