#pragma once
// ggml's tensor types as the GGUF reader needs them (ggml.h enum ggml_type, ggml.c type_traits:
// name, elements per block, bytes per block, for every id llama.cpp's ggml 0.4.0 gave out), and
// the rows of the types read here dequantized as ggml dequantizes them. Internal to lib/io.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "attntrace/io/gguf.hpp"

namespace attntrace {

// FN on each element of ARRAY (validated by parse_gguf), in order (gguf.cpp).
void for_each_gguf_element(const GgufValue& array, const std::function<void(const GgufValue&)>& fn);

struct GgmlTypeInfo {
    std::string_view name;  // ggml's type_name: "q8_0"
    std::size_t block = 0;  // elements per block; 0: removed from ggml
    std::size_t bytes = 0;  // bytes per block
};

inline constexpr std::uint32_t ggml_type_count = 43;  // GGML_TYPE_COUNT

// The entry of TYPE, or nullptr past the table.
const GgmlTypeInfo* ggml_type_info(std::uint32_t type);

// Whether dequantize_rows reads TYPE, and the names of those it reads ("f32, f16, ...").
bool ggml_type_readable(std::uint32_t type);
std::string_view ggml_readable_names();

// DST[0, N) := the N elements of TYPE at SRC (N a multiple of its block, SRC holding N / block
// blocks), as ggml's to_float gives them, widened to V.
template <class V>
void dequantize_rows(std::uint32_t type, const char* src, V* dst, std::size_t n);

}  // namespace attntrace
