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

// bfloat16: the top 16 bits of a float.
inline float bfloat16_to_float(std::uint16_t b) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace attntrace
