#pragma once
// What the GGUF reader's files share (gguf.cpp, gguf_files.cpp). Internal to lib/io.
#include <functional>

#include "attntrace/io/gguf.hpp"

namespace attntrace {

// FN on each element of ARRAY (validated by parse_gguf), in order (gguf.cpp).
void for_each_gguf_element(const GgufValue& array, const std::function<void(const GgufValue&)>& fn);

}  // namespace attntrace
