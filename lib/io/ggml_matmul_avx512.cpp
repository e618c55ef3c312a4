// quantized_gemm's AVX-512 VNNI kernel (ggml_matmul.hpp): a tile of 16 weight rows, one per lane,
// repacked so that each vpdpbusd multiplies 4 unsigned weight bytes of every row by the same 4
// activation bytes (broadcast) and adds them to that row's int32 lane; 8 activation rows share
// each weight load. The integer sums are exact; the weights are made unsigned (q8_0: +128; q6_K:
// its stored 0..63) and the offset taken back through the activations' block sums, as ggml's
// K vec_dots take the mins. q8_0's floats are ggml's `_generic` ones to the bit (sumf =
// fma(sumi, d_w * d_a, sumf), as the pinned build compiles it); the K types' scale their
// super-blocks in one sum rather than ggml's 8 lanes.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "attntrace/io/ggml_types.hpp"
#include "ggml_matmul_kernels.hpp"

namespace attntrace::ggml {
namespace {

constexpr std::size_t lanes = 16;

inline __m512i bcast4(const void* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

inline __m512i vec(const std::uint8_t* pack, std::size_t index) {
    return _mm512_loadu_si512(pack + 64 * index);
}

// --- q8_0 and q4_0: per block, 8 vectors of 4 unsigned quant bytes per row (q8_0's + 128, q4_0's
// nibbles, whose zero is 8), then the 16 rows' d -----------------------------------------------

constexpr std::size_t q8_0_vectors = 9;

template <bool Q4_0>
void pack_q8_0(const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, std::size_t blocks, std::uint8_t* pack) {
    std::memset(pack, 0, blocks * q8_0_vectors * 64);
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t b = 0; b < blocks; ++b) {
            std::uint8_t* out = pack + b * q8_0_vectors * 64;
            const std::uint8_t* block = w + i * row_bytes + b * (Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0));
            for (std::size_t e = 0; e < qk; ++e) {
                const std::uint8_t q = Q4_0 ? static_cast<std::uint8_t>(e < 16 ? block[2 + e] & 0xF : block[2 + e - 16] >> 4)
                                            : static_cast<std::uint8_t>(block[2 + e] ^ 0x80);
                out[64 * (e / 4) + 4 * i + e % 4] = q;
            }
            const float d = fp16(block);
            std::memcpy(out + 64 * 8 + 4 * i, &d, 4);
        }
}

// Rows [J0, J0 + MR) of the activations against the packed tile: out[j * ldo + lane].
template <bool Q4_0, std::size_t MR>
void q8_0_rows(const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j0, float* out, std::size_t ldo,
               __mmask16 mask) {
    constexpr int zero = Q4_0 ? 8 : 128;
    const std::size_t blocks = acts.k / qk;
    __m512 facc[MR];
    for (auto& f : facc) f = _mm512_setzero_ps();
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::uint8_t* p = pack + b * q8_0_vectors * 64;
        __m512i w[8];
        for (std::size_t k4 = 0; k4 < 8; ++k4) w[k4] = vec(p, k4);
        const __m512 dw = _mm512_loadu_ps(p + 64 * 8);
#pragma GCC unroll 8
        for (std::size_t j = 0; j < MR; ++j) {
            const std::size_t row = (j0 + j) * blocks + b;
            const std::int8_t* a = act_qs(acts, j0 + j, b);
            __m512i acc = _mm512_set1_epi32(-zero * acts.sums_at[row]);
#pragma GCC unroll 8
            for (std::size_t k4 = 0; k4 < 8; ++k4) acc = _mm512_dpbusd_epi32(acc, w[k4], bcast4(a + 4 * k4));
            if constexpr (Q4_0) {  // sumf = fma(sumi * d_w, d_a, sumf)
                facc[j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc), dw), _mm512_set1_ps(acts.d_at[row]), facc[j]);
            } else {  // sumf = fma(sumi, d_w * d_a, sumf)
                const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(acts.d_at[row]));
                facc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), scale, facc[j]);
            }
        }
    }
    for (std::size_t j = 0; j < MR; ++j) _mm512_mask_storeu_ps(out + (j0 + j) * ldo, mask, facc[j]);
}

// --- q4_K, q5_K and q6_K: per super-block, 64 vectors of 4 quant bytes per row, the sub-blocks'
// scales (int32), 8 vectors of int16 pairs that take the offsets back through the activations'
// bsums (q4_K, q5_K: (min, min) per sub-block of 32; q6_K: (32 scale, 32 scale') per pair of
// 16), d, dmin.

template <std::size_t Sub>  // 32: q4_K and q5_K, 16: q6_K
struct KLayout {
    static constexpr std::size_t subs = qk_k / Sub, per_sub = Sub / 4;
    static constexpr std::size_t scales = 64, pairs = scales + subs, d = pairs + 8, dmin = d + 1, vectors = dmin + 1;
};

template <std::size_t Sub>
void pack_K(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, std::size_t blocks,
            std::uint8_t* pack) {
    using L = KLayout<Sub>;
    std::memset(pack, 0, blocks * L::vectors * 64);
    KInts x;
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t b = 0; b < blocks; ++b) {
            k_ints(type, w + i * row_bytes, b, x);
            std::uint8_t* out = pack + b * L::vectors * 64;
            const int offset = type == ggml_q6_K ? 32 : 0;
            for (std::size_t e = 0; e < qk_k; ++e) out[64 * (e / 4) + 4 * i + e % 4] = static_cast<std::uint8_t>(x.q[e] + offset);
            for (std::size_t s = 0; s < L::subs; ++s) std::memcpy(out + 64 * (L::scales + s) + 4 * i, &x.scale[s], 4);
            for (std::size_t p = 0; p < 8; ++p) {
                const std::int16_t pair[2] = {
                    static_cast<std::int16_t>(type != ggml_q6_K ? x.min[p] : 32 * x.scale[2 * p]),
                    static_cast<std::int16_t>(type != ggml_q6_K ? x.min[p] : 32 * x.scale[2 * p + 1])};
                std::memcpy(out + 64 * (L::pairs + p) + 4 * i, pair, 4);
            }
            std::memcpy(out + 64 * L::d + 4 * i, &x.d, 4);
            std::memcpy(out + 64 * L::dmin + 4 * i, &x.dmin, 4);
        }
}

// One super-block's integer sums for MR activation rows: ISC = sum over sub-blocks of scale *
// (quants . activations), IMN = sum of the offset pairs times the bsum pairs.
template <std::size_t Sub, std::size_t MR>
void k_superblock(const std::uint8_t* p, const QuantizedActs& acts, std::size_t j0, std::size_t b, __m512i* isc,
                  __m512i* imn) {
    using L = KLayout<Sub>;
    const std::int8_t* a[MR];
    for (std::size_t j = 0; j < MR; ++j) a[j] = act_qs(acts, j0 + j, b), isc[j] = _mm512_setzero_si512();
    for (std::size_t s = 0; s < L::subs; ++s) {
        __m512i isub[MR];
        for (auto& v : isub) v = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (std::size_t k4 = 0; k4 < L::per_sub; ++k4) {
            const __m512i w = vec(p, s * L::per_sub + k4);
#pragma GCC unroll 8
            for (std::size_t j = 0; j < MR; ++j) isub[j] = _mm512_dpbusd_epi32(isub[j], w, bcast4(a[j] + s * Sub + 4 * k4));
        }
        const __m512i scale = vec(p, L::scales + s);
        for (std::size_t j = 0; j < MR; ++j) isc[j] = _mm512_add_epi32(isc[j], _mm512_mullo_epi32(isub[j], scale));
    }
    for (std::size_t j = 0; j < MR; ++j) {
        const std::int8_t* bsums = a[j] + qk_k;  // int16[16] after the quants
        imn[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (std::size_t q = 0; q < 8; ++q) imn[j] = _mm512_dpwssd_epi32(imn[j], vec(p, L::pairs + q), bcast4(bsums + 4 * q));
    }
}

template <std::size_t Sub, std::size_t MR>
void k_rows(const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j0, float* out, std::size_t ldo,
            __mmask16 mask) {
    using L = KLayout<Sub>;
    const std::size_t blocks = acts.k / qk_k;
    __m512 facc[MR];
    for (auto& f : facc) f = _mm512_setzero_ps();
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::uint8_t* p = pack + b * L::vectors * 64;
        __m512i isc[MR], imn[MR];
        k_superblock<Sub, MR>(p, acts, j0, b, isc, imn);
        const __m512 d = _mm512_loadu_ps(p + 64 * L::d), dmin = _mm512_loadu_ps(p + 64 * L::dmin);
        for (std::size_t j = 0; j < MR; ++j) {
            const __m512 da = _mm512_set1_ps(acts.d_at[(j0 + j) * blocks + b]);
            if constexpr (Sub == 32) {  // q4_K, q5_K: sums += d * scaled, sumf -= dmin * mins
                facc[j] = _mm512_add_ps(facc[j], _mm512_mul_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isc[j])));
                facc[j] = _mm512_sub_ps(facc[j], _mm512_mul_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(imn[j])));
            } else {  // q6_K: the offsets in the integers
                const __m512i total = _mm512_sub_epi32(isc[j], imn[j]);
                facc[j] = _mm512_add_ps(facc[j], _mm512_mul_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(total)));
            }
        }
    }
    for (std::size_t j = 0; j < MR; ++j) _mm512_mask_storeu_ps(out + (j0 + j) * ldo, mask, facc[j]);
}

// Every activation row against the packed tile, 8 rows a pass, then 4, then 1.
template <template <std::size_t> class Rows>
void all_rows(const std::uint8_t* pack, const QuantizedActs& acts, float* out, std::size_t ldo, __mmask16 mask) {
    std::size_t j = 0;
    for (; j + 8 <= acts.m; j += 8) Rows<8>::run(pack, acts, j, out, ldo, mask);
    for (; j + 4 <= acts.m; j += 4) Rows<4>::run(pack, acts, j, out, ldo, mask);
    for (; j < acts.m; ++j) Rows<1>::run(pack, acts, j, out, ldo, mask);
}

template <std::size_t MR>
struct Q8_0Rows {
    static void run(const std::uint8_t* p, const QuantizedActs& a, std::size_t j, float* o, std::size_t l, __mmask16 m) {
        q8_0_rows<false, MR>(p, a, j, o, l, m);
    }
};
template <std::size_t MR>
struct Q4_0Rows {
    static void run(const std::uint8_t* p, const QuantizedActs& a, std::size_t j, float* o, std::size_t l, __mmask16 m) {
        q8_0_rows<true, MR>(p, a, j, o, l, m);
    }
};
template <std::size_t MR>
struct Q4_KRows {
    static void run(const std::uint8_t* p, const QuantizedActs& a, std::size_t j, float* o, std::size_t l, __mmask16 m) {
        k_rows<32, MR>(p, a, j, o, l, m);
    }
};
template <std::size_t MR>
struct Q6_KRows {
    static void run(const std::uint8_t* p, const QuantizedActs& a, std::size_t j, float* o, std::size_t l, __mmask16 m) {
        k_rows<16, MR>(p, a, j, o, l, m);
    }
};

}  // namespace

std::size_t tile_avx512_vnni_bytes(std::uint32_t type, std::size_t k) {
    if (type == ggml_q8_0 || type == ggml_q4_0) return k / qk * q8_0_vectors * 64;
    return k / qk_k * (type == ggml_q6_K ? KLayout<16>::vectors : KLayout<32>::vectors) * 64;
}

void tile_avx512_vnni(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                      const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack) {
    const auto mask = static_cast<__mmask16>((1u << rows) - 1u);
    const std::size_t blocks = acts.k / acts.block;
    if (type == ggml_q8_0) {
        pack_q8_0<false>(w, row_bytes, rows, blocks, pack);
        all_rows<Q8_0Rows>(pack, acts, out, ldo, mask);
    } else if (type == ggml_q4_0) {
        pack_q8_0<true>(w, row_bytes, rows, blocks, pack);
        all_rows<Q4_0Rows>(pack, acts, out, ldo, mask);
    } else if (type == ggml_q6_K) {
        pack_K<16>(type, w, row_bytes, rows, blocks, pack);
        all_rows<Q6_KRows>(pack, acts, out, ldo, mask);
    } else {
        pack_K<32>(type, w, row_bytes, rows, blocks, pack);
        all_rows<Q4_KRows>(pack, acts, out, ldo, mask);
    }
}

}  // namespace attntrace::ggml

#endif  // __x86_64__
