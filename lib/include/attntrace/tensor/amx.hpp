#pragma once
// The AMX tile unit (Intel Xeon from Sapphire Rapids on): whether this process may use it, and the
// 64-byte operand of LDTILECFG. Used by the float32 weight products (tensor/weight_gemm_amx.cpp)
// and GGUF's quantized ones (io/ggml_matmul_avx512.cpp).
#include <cstdint>

namespace attntrace {

// AMX's features beside AMX-TILE, as their CPUID leaf 7 EDX bits.
enum class AmxFeature : unsigned { bf16 = 22, int8 = 25 };

// Whether the CPU has AMX-TILE (CPUID 7: EDX bit 24) and FEATURE, and Linux lets this process use
// the tile data (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16 on). It asks
// each time: callers keep the answer (CPUID traps in a VM). False off x86-64.
bool amx_usable(AmxFeature feature);

// LDTILECFG's operand, palette 1: each tile's bytes a row and rows (Intel SDM, "LDTILECFG").
struct alignas(64) TileConfig {
    std::uint8_t palette = 1, start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};

}  // namespace attntrace
