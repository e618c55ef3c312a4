#pragma once
// Branch-free float functions that the compiler vectorizes inside `omp simd` loops (the softmax's
// exp, the MLP activations): no libm call in the loop body, so one function serves every lane.
#include <algorithm>
#include <bit>
#include <cstdint>

// A float loop compiled three times (AVX-512, AVX2, baseline x86-64), the loader picking the one
// the CPU runs: put before a function whose `omp simd` loops should use the wider vectors.
#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define ATTNTRACE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ATTNTRACE_CLONES
#endif

namespace attntrace {

// exp(t) in float: Cody-Waite reduction t = k ln2 + r, |r| <= ln2/2, a degree-6 polynomial for
// exp(r), and 2^k from exponent bits. Within 2.5e-7 relative over [-87, 88]; 0 below -87 (and
// for -inf, a masked score); +inf above about 88.7.
[[gnu::always_inline]] inline float exp_poly(float t) {
    const float c = std::min(std::max(t, -87.0f), 88.7f);         // below: underflow to 0; above: inf
    const float k = (c * 1.44269504f + 12582912.0f) - 12582912.0f;  // round(c / ln2)
    const float r = (c - k * 0.693145752f) - k * 1.42860677e-6f;     // c - k ln2, in two parts
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const float two_k = std::bit_cast<float>((static_cast<std::int32_t>(k) + 127) << 23);
    const float e = t < -87.0f ? 0.0f : p * two_k;
    return t > 88.7f ? __builtin_inff() : e;
}

}  // namespace attntrace
