#pragma once
// JSON tensor files (json_tensor.cpp): [[1, 2], [3, 4]], or {"shape": [...], "dtype": "float32",
// "data": ...}. NaN, Infinity and -Infinity are read and written as Python's json module does.
#include <string>
#include <string_view>

#include "attntrace/tensor/tensor.hpp"

namespace attntrace {

// The tensor in BYTES (a whole JSON text), converted to T; NAME is used in messages. Every
// failure is an InputError "<name>: <json path>: ...".
template <class T>
LoadedTensor<T> parse_json_tensor(std::string_view bytes, const std::string& name);

// {"shape": [...], "dtype": "float32", "data": <nested arrays>}, numbers printed so they read
// back to the same float (shortest round-trip form).
template <class T>
std::string json_tensor_text(const Array<T>& array);

}  // namespace attntrace
