#pragma once
// Loading and saving tensor files: .npy (numpy's format, npy.hpp) and JSON (json_tensor.hpp),
// from files or stdin ("-"), to files or stdout. The format of a file read is decided by its
// first bytes (sniff.hpp); the format of a file written by its extension. Writing is atomic
// (atomic_write.hpp).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attntrace/io/atomic_write.hpp"  // write_file_atomically, which save_tensor is built on
#include "attntrace/io/json_tensor.hpp"   // parse_json_tensor, json_tensor_text
#include "attntrace/io/npy.hpp"           // parse_npy, npy_bytes, npy_header
#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// ---- reading ----------------------------------------------------------------------------------

// Loads PATH ("-" = stdin), detecting the format from the first bytes ("\x93NUMPY" or JSON), and
// converts the values to T (float or double). A .safetensors file is an InputError advising to
// "read it as attention parameters" (the app names its flag).
template <class T>
LoadedTensor<T> load_tensor(const std::string& path);

// The same from bytes already in memory; NAME is used in messages. The fuzzer drives it.
template <class T>
LoadedTensor<T> parse_tensor(std::string_view bytes, const std::string& name);

// ---- writing ----------------------------------------------------------------------------------

// .npy -> npy, .json -> json, anything else nullopt.
std::optional<FileFormat> format_from_extension(const std::string& path);

// Writes ARRAY to PATH atomically ("-" = stdout). FORMAT defaults to the extension's, or npy for
// an existing file that is not a regular file (/dev/null, a FIFO); any other path with neither an
// extension nor a format is a UsageError ("...; use .npy or .json (or name the format)": the app
// says which flag names it). Failures are OutputErrors naming PATH ("is a
// directory" for a directory, or a path ending in '/').
template <class T>
void save_tensor(const std::string& path, const Array<T>& array,
                 std::optional<FileFormat> format = std::nullopt);

// Throws OutputError when OUTPUT names the same file as one of INPUTS (a run must never write
// over its own input). "-" is never an input file.
void ensure_not_an_input(const std::string& output, const std::vector<std::string>& inputs);

}  // namespace attntrace
