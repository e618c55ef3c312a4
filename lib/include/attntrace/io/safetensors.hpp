#pragma once
// The .safetensors format: 8 bytes little-endian header size N, N bytes of JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data. Validated as the reference implementation (huggingface/safetensors) does:
// bounded header size, valid JSON, offsets in bounds, contiguous and non-overlapping, and every
// tensor's dtype and shape exactly fitting its bytes.
#include <map>
#include <string>
#include <string_view>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

class FileBytes;

// Every tensor in BYTES converted to T; NAME is used in messages (InputError). With FILE (whose
// bytes() BYTES are) the data is read through FileBytes::copy, never by touching the mapping.
template <class T>
std::map<std::string, Array<T>> parse_safetensors(std::string_view bytes, const std::string& name,
                                                  const FileBytes* file = nullptr);

template <class T>
std::map<std::string, Array<T>> load_safetensors(const std::string& path);

// The validated header of a .safetensors file, to read some tensors and leave the rest of a
// (memory-mapped) file untouched.
struct SafetensorsIndex {
    struct Tensor {
        std::string dtype;          // as the header spells it: "BF16"
        Shape shape;
        std::size_t offset = 0;     // of its first byte, from the start of the file
        std::size_t nbytes = 0;
    };
    std::string file;                       // for messages
    std::map<std::string, Tensor> tensors;  // by name
};

// Validates BYTES' header as parse_safetensors does, reading no tensor data (InputError).
SafetensorsIndex index_safetensors(std::string_view bytes, const std::string& name);

// One tensor of BYTES (the file INDEX came from) converted to T, read as parse_safetensors reads
// with FILE; InputError when absent.
template <class T>
Array<T> read_safetensors_tensor(std::string_view bytes, const SafetensorsIndex& index, const std::string& tensor,
                                 const FileBytes* file = nullptr);

// Rows [R0, R1) of TENSOR (rows along its first dim; a 1-D tensor's rows are its elements) of
// BYTES converted to T into OUT ((R1 - R0) * row elements), read as read_safetensors_tensor
// reads: for a block of an embedding table or of an LM head, without the rest of it.
template <class T>
void read_safetensors_rows(std::string_view bytes, const SafetensorsIndex& index, const std::string& tensor,
                           std::size_t r0, std::size_t r1, T* out, const FileBytes* file = nullptr);

// The bytes of a .safetensors file holding TENSORS (dtype F32 for float, F64 for double),
// in name order.
template <class T>
std::string safetensors_bytes(const std::map<std::string, Array<T>>& tensors);

}  // namespace attntrace
