#pragma once
// Reading a parameter file into name -> tensor: a .safetensors file, a JSON object of name ->
// tensor, or a directory of NAME.npy files. The format comes from the extension (.safetensors,
// .json), else from sniff_format (sniff.hpp). Naming schemes are param_names.hpp's job.
#include <map>
#include <string>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// Every tensor in PATH: name (the file's spelling; NAME of NAME.npy) -> array of any shape.
// Throws InputError "PATH: ..." (unreadable, unknown format, invalid JSON, a name twice, no .npy).
template <class T>
std::map<std::string, Array<T>> read_param_tensors(const std::string& path);

}  // namespace attntrace
