// ggml's type table and the dequantization of the types read here (gguf_types.hpp).
#include "gguf_types.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <type_traits>

#include "half.hpp"

namespace attntrace {

namespace {

// ggml.c type_traits[] (type_name, blck_size, type_size), by id; removed ids keep their old name.
constexpr std::array<GgmlTypeInfo, ggml_type_count> table{{
    {"f32", 1, 4},       {"f16", 1, 2},        {"q4_0", 32, 18},    {"q4_1", 32, 20},
    {"q4_2", 0, 0},      {"q4_3", 0, 0},       {"q5_0", 32, 22},    {"q5_1", 32, 24},
    {"q8_0", 32, 34},    {"q8_1", 32, 36},     {"q2_K", 256, 84},   {"q3_K", 256, 110},
    {"q4_K", 256, 144},  {"q5_K", 256, 176},   {"q6_K", 256, 210},  {"q8_K", 256, 292},
    {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},  {"iq3_s", 256, 110},  {"iq2_s", 256, 82},  {"iq4_xs", 256, 136},
    {"i8", 1, 1},        {"i16", 1, 2},        {"i32", 1, 4},       {"i64", 1, 8},
    {"f64", 1, 8},       {"iq1_m", 256, 56},   {"bf16", 1, 2},      {"q4_0_4_4", 0, 0},
    {"q4_0_4_8", 0, 0},  {"q4_0_8_8", 0, 0},   {"tq1_0", 256, 54},  {"tq2_0", 256, 66},
    {"iq4_nl_4_4", 0, 0}, {"iq4_nl_4_8", 0, 0}, {"iq4_nl_8_8", 0, 0}, {"mxfp4", 32, 17},
    {"nvfp4", 64, 36},   {"q1_0", 128, 18},    {"q2_0", 64, 18},
}};

enum : std::uint32_t { f32 = 0, f16 = 1, q8_0 = 8, bf16 = 30 };

// GGUF's little-endian 16 and 32-bit words, on any host.
std::uint16_t load_u16(const char* p) {
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    return static_cast<std::uint16_t>(b[0] | (b[1] << 8));
}
float load_f32(const char* p) {
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    return std::bit_cast<float>(std::uint32_t{b[0]} | (std::uint32_t{b[1]} << 8) | (std::uint32_t{b[2]} << 16) |
                                (std::uint32_t{b[3]} << 24));
}

// ggml-quants.c dequantize_row_q8_0: per block of 32, y = q * d, d the block's f16 scale.
template <class V>
void q8_0_rows(const char* src, V* dst, std::size_t n) {
    for (std::size_t b = 0; b < n / 32; ++b, src += 34) {
        const float d = half_to_float(load_u16(src));
        for (std::size_t j = 0; j < 32; ++j)
            dst[b * 32 + j] = static_cast<V>(static_cast<float>(static_cast<std::int8_t>(src[2 + j])) * d);
    }
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(std::uint32_t type) { return type < table.size() ? &table[type] : nullptr; }

bool ggml_type_readable(std::uint32_t type) { return type == f32 || type == f16 || type == bf16 || type == q8_0; }

std::string_view ggml_readable_names() { return "f32, f16, bf16, q8_0"; }

template <class V>
void dequantize_rows(std::uint32_t type, const char* src, V* dst, std::size_t n) {
    switch (type) {
    case f32:
        if constexpr (std::is_same_v<V, float> && std::endian::native == std::endian::little) {
            std::memcpy(dst, src, n * 4);
        } else {
            for (std::size_t i = 0; i < n; ++i) dst[i] = load_f32(src + 4 * i);
        }
        return;
    case f16:
        for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<V>(half_to_float(load_u16(src + 2 * i)));
        return;
    case bf16:
        for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<V>(bfloat16_to_float(load_u16(src + 2 * i)));
        return;
    case q8_0: return q8_0_rows(src, dst, n);
    default: return;  // callers check ggml_type_readable first
    }
}

template void dequantize_rows<float>(std::uint32_t, const char*, float*, std::size_t);
template void dequantize_rows<double>(std::uint32_t, const char*, double*, std::size_t);

}  // namespace attntrace
