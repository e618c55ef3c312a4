#pragma once
// ggml's tensor types (the `type` of a tensor in a GGUF file): the table of every type id ggml has
// given out (ggml.h `enum ggml_type`, ggml.c `type_traits`: name, block size, bytes per block),
// and rows of the types attntrace reads dequantized exactly as ggml dequantizes them
// (ggml-quants.c `dequantize_row_*`, ggml.c `ggml_fp16_to_fp32_row` / `ggml_bf16_to_fp32_row`):
// the same float, bit for bit, for every value (NaN where ggml gives NaN).
//
// A row of N elements is N / block blocks; a block of a quantized type holds its scale(s) and its
// quants (`q8_0`: an fp16 scale d and 32 int8 quants, x = d * q; the K types: 256-element
// super-blocks of 16 or 32-element sub-blocks with 6- or 8-bit sub-scales). The types read
// (ggml_type_supported): f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K,
// q6_K, iq4_nl, iq4_xs.
//
// Kernels: scalar C++ for every type, and AVX2 (with F16C) for the types models are mostly
// stored in (f16, bf16, q8_0, q4_K, q5_K, q6_K): the same floats. AVX-512 versions did not pay:
// AVX2's already write 2-3x faster than memory takes floats (docs/gguf-types.md).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attntrace {

// ggml.h's type ids (the ones attntrace names in code; every id below ggml_type_count has a row
// in the table).
enum GgmlType : std::uint32_t {
    ggml_f32 = 0, ggml_f16 = 1, ggml_q4_0 = 2, ggml_q4_1 = 3, ggml_q5_0 = 6, ggml_q5_1 = 7, ggml_q8_0 = 8,
    ggml_q8_1 = 9, ggml_q2_K = 10, ggml_q3_K = 11, ggml_q4_K = 12, ggml_q5_K = 13, ggml_q6_K = 14,
    ggml_q8_K = 15, ggml_iq4_nl = 20, ggml_iq4_xs = 23, ggml_bf16 = 30,
};
inline constexpr std::uint32_t ggml_type_count = 43;  // GGML_TYPE_COUNT of llama.cpp's ggml 0.4.0

// ggml's name of TYPE ("q4_K"); a removed type's former name with " (removed)"
// ("q4_0_4_4 (removed)"); "unknown type N" past the table.
std::string ggml_type_name(std::uint32_t type);

// The type named NAME as ggml spells it ("q4_K", "bf16"), if any.
std::optional<std::uint32_t> ggml_type_named(std::string_view name);

// Elements per block and bytes per block of TYPE; 0 for a removed or unknown type.
std::size_t ggml_block_size(std::uint32_t type);
std::size_t ggml_block_bytes(std::uint32_t type);

// Whether dequantize_row reads TYPE.
bool ggml_type_supported(std::uint32_t type);

// The bytes of a row of N elements of TYPE (any type with a known layout, read or not).
// InputError for a removed or unknown type, N not a multiple of the block size, or a byte count
// past SIZE_MAX.
std::size_t ggml_row_bytes(std::uint32_t type, std::size_t n);

// DST[0, N) := the N elements of TYPE in SRC as ggml dequantizes them (double: that float,
// widened). SRC is the caller's bytes: only its first ggml_row_bytes(TYPE, N) are read, and an
// InputError is thrown before anything is read when it holds fewer, or when TYPE is not
// supported (naming it). DST must not overlap SRC.
template <class T>
void dequantize_row(std::uint32_t type, std::string_view src, T* dst, std::size_t n);

// Which kernels dequantize_row runs: the best this CPU runs (AVX2 where it has AVX2 and F16C,
// else scalar), or one named (UsageError when this CPU cannot run it). The results are the same
// floats whichever runs; the tests run each.
enum class GgmlKernel : std::uint8_t { best, scalar, avx2 };
void set_ggml_kernel(GgmlKernel kernel);
GgmlKernel ggml_kernel();  // the one that runs: never `best`
bool ggml_kernel_runs(GgmlKernel kernel);  // whether this CPU runs it
std::string ggml_kernel_name(GgmlKernel kernel);

}  // namespace attntrace
