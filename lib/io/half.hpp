#pragma once
// The 16-bit floats the readers meet, widened to float: IEEE 754 binary16 (numpy's float16,
// safetensors' F16) and bfloat16 (safetensors' BF16). Both conversions are exact: every 16-bit
// value is a float, subnormals, infinities and NaN payloads included (as numpy's
// npy_halfbits_to_floatbits and PyTorch widen them). A float widens exactly to double, so the
// double readers go through float too.
#include <bit>
#include <cstdint>

namespace attntrace {

// binary16: sign 1, exponent 5 (bias 15), mantissa 10.
inline float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    const std::uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
    if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
    // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
}

// FLOAT to binary16, rounded to nearest even (as a hardware conversion, F16C's vcvtps2ph with
// round-to-nearest, and _Float16 do it): overflow to infinity, subnormals kept, NaN stays NaN
// (quiet, its payload's top bits kept).
inline std::uint16_t float_to_half(float value) {
    const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    const std::uint16_t sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
    const std::uint32_t magnitude = f & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));  // NaN
    if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504: infinity
    if (magnitude < 0x38800000u) {  // under 2^-14: a subnormal (or zero) of binary16
        const float scaled = std::bit_cast<float>(magnitude) * 0x1p24f;  // exact: the subnormal's integer
        const auto units = static_cast<std::uint32_t>(scaled);
        const float rest = scaled - static_cast<float>(units);
        const std::uint32_t rounded = units + (rest > 0.5f || (rest == 0.5f && (units & 1u)) ? 1u : 0u);
        return static_cast<std::uint16_t>(sign | rounded);
    }
    const std::uint32_t rebased = magnitude - (112u << 23);  // exponent bias 127 -> 15
    const std::uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

// bfloat16: the top 16 bits of a float.
inline float bfloat16_to_float(std::uint16_t b) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// The 8-bit floats of safetensors (as PyTorch's float8_e4m3fn, float8_e5m2, float8_e4m3fnuz,
// float8_e5m2fnuz and ml_dtypes define them): sign 1, exponent E bits with bias BIAS, mantissa M
// bits. Normal: 2^(e - bias) * (1 + m / 2^M); subnormal (e == 0): 2^(1 - bias) * m / 2^M.
// Specials: e5m2 is IEEE-like (all-ones exponent: inf, or NaN with a mantissa); e4m3fn has no
// infinity and NaN only at S.1111.111; the FNUZ variants have no infinity, no negative zero, and
// their one NaN is 0x80. Every value is exact in float.
struct Float8Format {
    int exponent_bits, mantissa_bits, bias;
    bool ieee_specials;  // e5m2: the all-ones exponent is inf / NaN
    bool fnuz;           // 0x80 is NaN, no infinity
};
inline constexpr Float8Format f8_e4m3fn{4, 3, 7, false, false};
inline constexpr Float8Format f8_e5m2{5, 2, 15, true, false};
inline constexpr Float8Format f8_e4m3fnuz{4, 3, 8, false, true};
inline constexpr Float8Format f8_e5m2fnuz{5, 2, 16, false, true};

inline float float8_to_float(std::uint8_t bits, const Float8Format& f) {
    constexpr float nan = __builtin_nanf("");
    if (f.fnuz && bits == 0x80) return nan;
    const bool negative = (bits & 0x80) != 0;
    const int exponent = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
    const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
    const int all_ones = (1 << f.exponent_bits) - 1;
    float magnitude;
    if (f.ieee_specials && exponent == all_ones) {
        magnitude = mantissa == 0 ? __builtin_inff() : nan;
    } else if (!f.ieee_specials && !f.fnuz && exponent == all_ones && mantissa == (1 << f.mantissa_bits) - 1) {
        magnitude = nan;  // e4m3fn: S.1111.111
    } else if (exponent == 0) {
        magnitude = __builtin_ldexpf(static_cast<float>(mantissa), 1 - f.bias - f.mantissa_bits);
    } else {
        magnitude = __builtin_ldexpf(static_cast<float>(mantissa + (1 << f.mantissa_bits)),
                                     exponent - f.bias - f.mantissa_bits);
    }
    return negative ? -magnitude : magnitude;
}

}  // namespace attntrace
