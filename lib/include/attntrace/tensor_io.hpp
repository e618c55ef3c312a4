#pragma once
// Reading and writing tensor files: .npy (numpy's format) and JSON, from files or stdin ("-").
//
// Reading validates everything before it allocates: the header against the file size, the shape
// product against overflow, and the declared byte count against the bytes present. A file can
// never make attntrace allocate more than it holds. Every failure is an InputError whose message
// starts with the file's name.
//
// Writing is atomic: the bytes go to a temporary file in the target's directory, which is renamed
// over the target only once everything is written. "-" writes to stdout.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/tensor.hpp"

namespace attntrace {

// ---- reading ----------------------------------------------------------------------------------

// Loads PATH ("-" = stdin), detecting the format from the first bytes ("\x93NUMPY" or JSON), and
// converts the values to T (float or double).
template <class T>
LoadedTensor<T> load_tensor(const std::string& path);

// The same from bytes already in memory; NAME is used in messages. The fuzzer drives these.
template <class T>
LoadedTensor<T> parse_tensor(std::string_view bytes, const std::string& name);
template <class T>
LoadedTensor<T> parse_npy(std::string_view bytes, const std::string& name);
template <class T>
LoadedTensor<T> parse_json_tensor(std::string_view bytes, const std::string& name);

// ---- writing ----------------------------------------------------------------------------------

// .npy -> npy, .json -> json, anything else nullopt.
std::optional<FileFormat> format_from_extension(const std::string& path);

// The bytes of a version 1.0 .npy file: little-endian, C order, header padded so the data starts
// at a multiple of 64 bytes.
template <class T>
std::string npy_bytes(const Array<T>& array);

// The part of npy_bytes before the data, for writing the data straight from the array.
template <class T>
std::string npy_header(const Shape& shape);

// {"shape": [...], "dtype": "float32", "data": <nested arrays>}, numbers printed so they read
// back to the same float (shortest round-trip form).
template <class T>
std::string json_tensor_text(const Array<T>& array);

// Writes ARRAY to PATH atomically ("-" = stdout). FORMAT defaults to the extension's; a path with
// neither an extension nor a format is a UsageError. Failures are OutputErrors naming PATH.
template <class T>
void save_tensor(const std::string& path, const Array<T>& array,
                 std::optional<FileFormat> format = std::nullopt);

// Writes BYTES to PATH atomically ("-" = stdout); the primitive under save_tensor, also used for
// .safetensors and trace files.
void write_file_atomically(const std::string& path, std::string_view bytes);
// The same for bytes in several pieces, written one after the other (a header, then a tensor's
// data straight from its buffer).
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> pieces);

// Throws OutputError when OUTPUT names the same file as one of INPUTS (a run must never write
// over its own input). "-" is never an input file.
void ensure_not_an_input(const std::string& output, const std::vector<std::string>& inputs);

}  // namespace attntrace
