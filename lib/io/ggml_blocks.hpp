#pragma once
// ggml's block layouts (llama.cpp ggml/src/ggml-common.h, `block_q8_0` ...) as byte arrays, so a
// block is read from any address, and what the scalar and vector dequantizers share: ggml's fp16
// widening, the K types' 6-bit sub-scales, the iq4 code book, and the kernels' entry points.
// ggml's blocks are little-endian; so is every CPU attntrace builds for (checked below).
//
// The helpers are in an unnamed namespace: each file has its own copy, compiled for that file's
// instruction set (AVX2, AVX-512), so the linker can never hand a baseline file a copy of one that
// the CPU cannot run (as it could with one shared inline function, or half.hpp's).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace attntrace::ggml {

static_assert(std::endian::native == std::endian::little, "ggml blocks are read as little-endian");

inline constexpr std::size_t qk = 32;    // QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK4_NL
inline constexpr std::size_t qk_k = 256; // QK_K: the K types' super-block

struct BlockQ4_0 { std::uint8_t d[2]; std::uint8_t qs[qk / 2]; };
struct BlockQ4_1 { std::uint8_t d[2], m[2]; std::uint8_t qs[qk / 2]; };
struct BlockQ5_0 { std::uint8_t d[2]; std::uint8_t qh[4]; std::uint8_t qs[qk / 2]; };
struct BlockQ5_1 { std::uint8_t d[2], m[2]; std::uint8_t qh[4]; std::uint8_t qs[qk / 2]; };
struct BlockQ8_0 { std::uint8_t d[2]; std::int8_t qs[qk]; };
struct BlockIq4Nl { std::uint8_t d[2]; std::uint8_t qs[qk / 2]; };
// x = d * scale(sub-block) * q - dmin * min(sub-block), 16 sub-blocks of 16, 4-bit scale and min
struct BlockQ2_K { std::uint8_t scales[qk_k / 16]; std::uint8_t qs[qk_k / 4]; std::uint8_t d[2], dmin[2]; };
// x = d * (scale - 32) * (q - 4 * !hmask), 16 sub-blocks of 16, 6-bit scales
struct BlockQ3_K { std::uint8_t hmask[qk_k / 8]; std::uint8_t qs[qk_k / 4]; std::uint8_t scales[12]; std::uint8_t d[2]; };
// x = d * scale * q - dmin * min, 8 sub-blocks of 32, 6-bit scales and mins (get_scale_min_k4)
struct BlockQ4_K { std::uint8_t d[2], dmin[2]; std::uint8_t scales[12]; std::uint8_t qs[qk_k / 2]; };
struct BlockQ5_K { std::uint8_t d[2], dmin[2]; std::uint8_t scales[12]; std::uint8_t qh[qk_k / 8]; std::uint8_t qs[qk_k / 2]; };
// x = d * scale * (q - 32), 16 sub-blocks of 16, int8 scales
struct BlockQ6_K { std::uint8_t ql[qk_k / 2]; std::uint8_t qh[qk_k / 4]; std::int8_t scales[qk_k / 16]; std::uint8_t d[2]; };
// x = d * (scale - 32) * kvalues_iq4nl[q], 8 sub-blocks of 32, 6-bit scales
struct BlockIq4Xs { std::uint8_t d[2]; std::uint8_t scales_h[2]; std::uint8_t scales_l[qk_k / 64]; std::uint8_t qs[qk_k / 2]; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIq4Xs) == 136);

namespace {

inline float float_from_bits(std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// ggml_compute_fp16_to_fp32 (ggml-impl.h): exact for every finite value; a NaN keeps its payload
// and comes out quiet (its formula multiplies the widened bits by 2^-112, as F16C's vcvtph2ps
// quiets), unlike numpy's widening (lib/io/half.hpp) which keeps a signalling NaN signalling.
inline float fp16(const std::uint8_t* bytes) {
    std::uint16_t h;
    std::memcpy(&h, bytes, 2);
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0x1f)  // infinity, or NaN made quiet
        return float_from_bits(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u));
    if (exponent != 0) return float_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // zero or subnormal, exact
    return sign ? -magnitude : magnitude;
}

// ggml_compute_bf16_to_fp32: the top 16 bits of a float.
inline float bf16(const std::uint8_t* bytes) {
    std::uint16_t b;
    std::memcpy(&b, bytes, 2);
    return float_from_bits(static_cast<std::uint32_t>(b) << 16);
}

// get_scale_min_k4 (ggml-quants.c): sub-block J's 6-bit scale and min of a Q4_K / Q5_K block.
inline void scale_min_k4(std::size_t j, const std::uint8_t* q, std::uint8_t& scale, std::uint8_t& min) {
    if (j < 4) {
        scale = q[j] & 63;
        min = q[j + 4] & 63;
    } else {
        scale = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        min = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

// kvalues_iq4nl (ggml-common.h): IQ4_NL's and IQ4_XS's 16 levels.
inline constexpr std::int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                  1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace

// A kernel's dequantizer: the BLOCKS blocks at X into Y (blocks * block size floats).
using RowFn = void (*)(const std::uint8_t* x, float* y, std::size_t blocks);

// Each kernel's dequantizer of TYPE, or nullptr where that kernel leaves TYPE to the scalar one.
RowFn scalar_row(std::uint32_t type);
RowFn avx2_row(std::uint32_t type);

}  // namespace attntrace::ggml
