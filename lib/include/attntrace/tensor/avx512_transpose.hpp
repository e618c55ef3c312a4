#pragma once
// A 16 × 16 transpose of 32-bit lanes in AVX-512F registers, for the weight products' packing
// (lib/tensor/weight_gemm_avx512.cpp: float weights; weight_gemm_amx.cpp: pairs of bfloat16) and
// the fused attention kernel's query panels and context rows (lib/attention/fused_avx512.cpp).
// Include it only from a file compiled with AVX-512F. Internal linkage: each file compiles its own
// copy for its own instruction set.
#include <immintrin.h>

#include <cstddef>

namespace attntrace::weight_kernels {
namespace {

// R[16] := its transpose (R[i] lane j becomes R[j] lane i).
[[maybe_unused]] void transpose16(__m512i (&r)[16]) {
    __m512i t[16];
    for (std::size_t i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);  // each 128-bit lane: a0 b0 a1 b1
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);  // a2 b2 a3 b3
    }
    for (std::size_t i = 0; i < 16; i += 4) {  // r[i + j]: rows i .. i+3, element j of each lane
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (std::size_t j = 0; j < 4; ++j) {  // lane L of r[4 g + j]: rows 4g .. 4g+3 at element 4L + j
        const __m512i u0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x44), u1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xEE);
        const __m512i v0 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x44);
        const __m512i v1 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xEE);
        t[j] = _mm512_shuffle_i32x4(u0, v0, 0x88), t[4 + j] = _mm512_shuffle_i32x4(u0, v0, 0xDD);
        t[8 + j] = _mm512_shuffle_i32x4(u1, v1, 0x88), t[12 + j] = _mm512_shuffle_i32x4(u1, v1, 0xDD);
    }
    for (std::size_t i = 0; i < 16; ++i) r[i] = t[i];
}

// The same for floats.
[[maybe_unused]] void transpose16(__m512 (&r)[16]) {
    __m512i bits[16];
    for (std::size_t i = 0; i < 16; ++i) bits[i] = _mm512_castps_si512(r[i]);
    transpose16(bits);
    for (std::size_t i = 0; i < 16; ++i) r[i] = _mm512_castsi512_ps(bits[i]);
}

}  // namespace
}  // namespace attntrace::weight_kernels
