// The AVX2 (+ F16C) dequantizers of the types models are mostly stored in: f16, bf16, q8_0,
// q4_K, q5_K, q6_K. Each computes what ggml_dequant_scalar.cpp computes, 8 elements at a time,
// with the same float operations in the same order (the per-sub-block scales as scalars, then
// one multiply and, for the K types with mins, one subtract: this file is compiled with
// -ffp-contract=off so no FMA fuses them, lib/CMakeLists.txt), so the floats are the same.
#if defined(__x86_64__)
#include <immintrin.h>

#include "ggml_blocks.hpp"

namespace attntrace::ggml {
namespace {

// 8 bytes at P widened to 8 int32 lanes.
inline __m256i u8x8(const std::uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

inline __m256 to_float(__m256i v) { return _mm256_cvtepi32_ps(v); }

// vcvtph2ps widens as ggml_compute_fp16_to_fp32 does (a NaN quieted, payload kept).
void row_f16(const std::uint8_t* x, float* y, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * i))));
    for (; i < n; ++i) y[i] = fp16(x + 2 * i);
}

void row_bf16(const std::uint8_t* x, float* y, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
    }
    for (; i < n; ++i) y[i] = bf16(x + 2 * i);
}

// x = q * d
void row_q8_0(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ8_0*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i, y += qk) {
        const __m256 d = _mm256_set1_ps(fp16(x[i].d));
        for (std::size_t j = 0; j < qk; j += 8) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x[i].qs + j)));
            _mm256_storeu_ps(y + j, _mm256_mul_ps(to_float(q), d));
        }
    }
}

// y[0, 32) = d1 * lo - m1 and y[32, 64) = d2 * hi - m2 for the nibbles (plus fifth bits) LO, HI of 32 bytes.
struct SubBlockPair {
    __m256 d1, m1, d2, m2;
    SubBlockPair(const std::uint8_t* scales, std::size_t is, float d, float min) {
        std::uint8_t sc, m;
        scale_min_k4(is, scales, sc, m);
        d1 = _mm256_set1_ps(d * static_cast<float>(sc));
        m1 = _mm256_set1_ps(min * static_cast<float>(m));
        scale_min_k4(is + 1, scales, sc, m);
        d2 = _mm256_set1_ps(d * static_cast<float>(sc));
        m2 = _mm256_set1_ps(min * static_cast<float>(m));
    }
    void store(float* y, std::size_t l, __m256i lo, __m256i hi) const {
        _mm256_storeu_ps(y + l, _mm256_sub_ps(_mm256_mul_ps(d1, to_float(lo)), m1));
        _mm256_storeu_ps(y + 32 + l, _mm256_sub_ps(_mm256_mul_ps(d2, to_float(hi)), m2));
    }
};

void row_q4_K(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ4_K*>(bytes);
    const __m256i low4 = _mm256_set1_epi32(0xF);
    for (std::size_t i = 0; i < blocks; ++i) {
        const float d = fp16(x[i].d), min = fp16(x[i].dmin);
        const std::uint8_t* q = x[i].qs;
        for (std::size_t is = 0; is < 8; is += 2, q += 32, y += 64) {
            const SubBlockPair pair(x[i].scales, is, d, min);
            for (std::size_t l = 0; l < 32; l += 8) {
                const __m256i v = u8x8(q + l);
                pair.store(y, l, _mm256_and_si256(v, low4), _mm256_srli_epi32(v, 4));
            }
        }
    }
}

void row_q5_K(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ5_K*>(bytes);
    const __m256i low4 = _mm256_set1_epi32(0xF), bit4 = _mm256_set1_epi32(0x10);
    for (std::size_t i = 0; i < blocks; ++i) {
        const float d = fp16(x[i].d), min = fp16(x[i].dmin);
        const std::uint8_t* ql = x[i].qs;
        for (std::size_t is = 0; is < 8; is += 2, ql += 32, y += 64) {
            const SubBlockPair pair(x[i].scales, is, d, min);
            // the fifth bits: bit `is` of qh for the low nibbles, bit `is + 1` for the high ones
            const __m128i shift_lo = _mm_cvtsi32_si128(static_cast<int>(is)), shift_hi = _mm_cvtsi32_si128(static_cast<int>(is + 1));
            for (std::size_t l = 0; l < 32; l += 8) {
                const __m256i v = u8x8(ql + l), h = u8x8(x[i].qh + l);
                const __m256i h_lo = _mm256_slli_epi32(_mm256_srl_epi32(h, shift_lo), 4);
                const __m256i h_hi = _mm256_slli_epi32(_mm256_srl_epi32(h, shift_hi), 4);
                pair.store(y, l, _mm256_add_epi32(_mm256_and_si256(v, low4), _mm256_and_si256(h_lo, bit4)),
                           _mm256_add_epi32(_mm256_srli_epi32(v, 4), _mm256_and_si256(h_hi, bit4)));
            }
        }
    }
}

// x = (d * scale) * (q - 32); q's 4 quarters of 32 from ql's nibbles and qh's 2-bit fields.
void row_q6_K(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ6_K*>(bytes);
    const __m256i low4 = _mm256_set1_epi32(0xF), two = _mm256_set1_epi32(0x30), bias = _mm256_set1_epi32(32);
    for (std::size_t i = 0; i < blocks; ++i) {
        const float d = fp16(x[i].d);
        const std::uint8_t* ql = x[i].ql;
        const std::uint8_t* qh = x[i].qh;
        const std::int8_t* sc = x[i].scales;
        for (std::size_t n = 0; n < qk_k; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (std::size_t l = 0; l < 32; l += 8) {
                const std::size_t is = l / 16;
                const __m256i a = u8x8(ql + l), b = u8x8(ql + 32 + l), h = u8x8(qh + l);
                const __m256i q[4] = {
                    _mm256_or_si256(_mm256_and_si256(a, low4), _mm256_and_si256(_mm256_slli_epi32(h, 4), two)),
                    _mm256_or_si256(_mm256_and_si256(b, low4), _mm256_and_si256(_mm256_slli_epi32(h, 2), two)),
                    _mm256_or_si256(_mm256_srli_epi32(a, 4), _mm256_and_si256(h, two)),
                    _mm256_or_si256(_mm256_srli_epi32(b, 4), _mm256_and_si256(_mm256_srli_epi32(h, 2), two))};
                for (std::size_t k = 0; k < 4; ++k) {
                    const __m256 ds = _mm256_set1_ps(d * static_cast<float>(sc[is + 2 * k]));
                    _mm256_storeu_ps(y + 32 * k + l, _mm256_mul_ps(ds, to_float(_mm256_sub_epi32(q[k], bias))));
                }
            }
        }
    }
}

}  // namespace

RowFn avx2_row(std::uint32_t type) {
    switch (type) {
        case 1: return row_f16;
        case 8: return row_q8_0;
        case 12: return row_q4_K;
        case 13: return row_q5_K;
        case 14: return row_q6_K;
        case 30: return row_bf16;
        default: return nullptr;
    }
}

}  // namespace attntrace::ggml

#endif  // __x86_64__
