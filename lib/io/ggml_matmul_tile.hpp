#pragma once
// quantized_gemm's SIMD kernel over an instruction set's traits V (ggml_matmul_avx512.cpp: AVX-512
// VNNI, 16 lanes; ggml_matmul_avx2.cpp: AVX2, 8 lanes). A tile of weight rows, one per lane, is
// repacked so that each V::dot4 multiplies 4 unsigned weight bytes of every row by the same 4
// activation bytes (broadcast) and adds them to that row's int32 lane; V::mr activation rows share
// each weight load. The integer sums are exact; the weights are made unsigned (q4_0's nibbles, whose
// zero is 8, q5_0's 5 bits, zero 16; the K types' stored 0..63; q8_0 + 128 where V::offset_q8_0,
// else kept signed for V::dot4_signed) and the offset taken back through the activations' block
// sums, as ggml's K vec_dots take the mins. The 32-element types' floats are ggml's `_generic`
// ones to the bit (sumf = fma(sumi, d_w * d_a, sumf); q4_0: fma(sumi * d_w, d_a, sumf); q4_1,
// q5_1: sumf + fma(d_w * d_a, sumi, m_w * s_a), as the pinned build compiles them); the K types'
// scale their super-blocks in one sum rather than ggml's 8 lanes.
//
// Everything here is in an unnamed namespace and uses no standard library code beyond memcpy and
// memset: each including file compiles its own copy for its instruction set (ggml_blocks.hpp).
#include <cstring>

#include "attntrace/io/ggml_types.hpp"
#include "ggml_matmul_kernels.hpp"

namespace attntrace::ggml {
namespace {

// --- q8_0, q4_0, q5_0, q4_1, q5_1: per block, 8 vectors of 4 quant bytes per row, then the
// rows' d and m. The bytes are the integers plus ZERO (q4_0: 8, q5_0: 16, q4_1 and q5_1: 0, q8_0:
// 128 where V::offset_q8_0, else q8_0's signed bytes as they are, for V::dot4_signed).

constexpr std::size_t q8_0_vectors = 10;

template <class V>
constexpr int zero_of(std::uint32_t type) {
    return type == ggml_q4_0 ? 8 : type == ggml_q5_0 ? 16 : V::offset_q8_0 ? 128 : 0;
}

// ZERO: the offset the bytes get (zero_of<V>, or 0 for signed bytes: the AMX kernel's).
template <class V>
void pack_small(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, std::size_t blocks,
                std::uint8_t* pack, int zero) {
    constexpr std::size_t vb = V::bytes;
    if (type == ggml_q8_0 && V::pack_q8_0(w, row_bytes, rows, blocks, pack, zero)) return;
    const std::size_t block_bytes = ggml_block_bytes(type);
    std::memset(pack, 0, blocks * q8_0_vectors * vb);
    std::int8_t q[qk];
    std::uint8_t u[qk];  // the block's bytes as packed, then copied 4 at a time
    float m = 0;
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t b = 0; b < blocks; ++b) {
            std::uint8_t* out = pack + b * q8_0_vectors * vb;
            const std::uint8_t* block = w + i * row_bytes + b * block_bytes;
            float d;
            if (type == ggml_q8_0) {  // d, qs[32]: the signed bytes, + 128 (the top bit flipped) where offset
                d = fp16(block);
                const std::uint8_t flip = zero ? 0x80 : 0;
                for (std::size_t e = 0; e < qk; ++e) u[e] = static_cast<std::uint8_t>(block[2 + e] ^ flip);
            } else {
                d = small_ints(type, block, q, &m);
                for (std::size_t e = 0; e < qk; ++e) u[e] = static_cast<std::uint8_t>(q[e] + zero);
            }
            for (std::size_t k4 = 0; k4 < qk / 4; ++k4) std::memcpy(out + vb * k4 + 4 * i, u + 4 * k4, 4);
            std::memcpy(out + vb * 8 + 4 * i, &d, 4);
            std::memcpy(out + vb * 9 + 4 * i, &m, 4);
        }
}

// Rows [J0, J0 + MR) of the activations against the packed tile: out[j * ldo + lane], ROWS lanes.
template <class V, std::uint32_t Type, std::size_t MR>
void small_rows(const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j0, float* out, std::size_t ldo,
                std::size_t rows) {
    using I = typename V::I;
    using F = typename V::F;
    constexpr std::size_t vb = V::bytes;
    constexpr int zero = zero_of<V>(Type);
    constexpr bool signed_bytes = Type == ggml_q8_0 && !V::offset_q8_0;
    const std::size_t blocks = acts.k / qk;
    F facc[MR];
    for (auto& f : facc) f = V::fzero();
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::uint8_t* p = pack + b * q8_0_vectors * vb;
        I w[8];
        for (std::size_t k4 = 0; k4 < 8; ++k4) w[k4] = V::load(p + vb * k4);
        const F dw = V::loadf(p + vb * 8), mw = V::loadf(p + vb * 9);
#pragma GCC unroll 8
        for (std::size_t j = 0; j < MR; ++j) {
            const std::size_t at = (j0 + j) * blocks + b;
            const std::int8_t* a = act_qs(acts, j0 + j, b);
            I acc = zero ? V::set1(-zero * acts.sums_at[at]) : V::izero();
#pragma GCC unroll 8
            for (std::size_t k4 = 0; k4 < 8; ++k4)
                acc = signed_bytes ? V::dot4_signed(acc, w[k4], V::bcast4(a + 4 * k4)) : V::dot4(acc, w[k4], V::bcast4(a + 4 * k4));
            if constexpr (Type == ggml_q4_1 || Type == ggml_q5_1)  // sumf += fma(d_w * d_a, sumi, m_w * s_a)
                facc[j] = V::add(facc[j], V::fmadd(V::mul(dw, V::set1f(acts.d_at[at])), V::cvt(acc),
                                                   V::mul(mw, V::set1f(acts.s_at[at]))));
            else if constexpr (Type == ggml_q4_0)  // sumf = fma(sumi * d_w, d_a, sumf)
                facc[j] = V::fmadd(V::mul(V::cvt(acc), dw), V::set1f(acts.d_at[at]), facc[j]);
            else  // q8_0, q5_0: sumf = fma(sumi, d_w * d_a, sumf)
                facc[j] = V::fmadd(V::cvt(acc), V::mul(dw, V::set1f(acts.d_at[at])), facc[j]);
        }
    }
    for (std::size_t j = 0; j < MR; ++j) V::store(out + (j0 + j) * ldo, facc[j], rows);
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

template <class V, std::size_t Sub>
void pack_K(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, std::size_t blocks,
            std::uint8_t* pack) {
    using L = KLayout<Sub>;
    constexpr std::size_t vb = V::bytes;
    if (type == ggml_q4_K && V::pack_q4_K(w, row_bytes, rows, blocks, pack)) return;
    std::memset(pack, 0, blocks * L::vectors * vb);
    KInts x;
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t b = 0; b < blocks; ++b) {
            k_ints(type, w + i * row_bytes, b, x);
            std::uint8_t* out = pack + b * L::vectors * vb;
            const int offset = type == ggml_q6_K ? 32 : 0;
            std::uint8_t u[qk_k];  // the quants as packed, then copied 4 at a time
            for (std::size_t e = 0; e < qk_k; ++e) u[e] = static_cast<std::uint8_t>(x.q[e] + offset);
            for (std::size_t k4 = 0; k4 < qk_k / 4; ++k4) std::memcpy(out + vb * k4 + 4 * i, u + 4 * k4, 4);
            for (std::size_t s = 0; s < L::subs; ++s) std::memcpy(out + vb * (L::scales + s) + 4 * i, &x.scale[s], 4);
            for (std::size_t p = 0; p < 8; ++p) {
                const std::int16_t pair[2] = {
                    static_cast<std::int16_t>(type != ggml_q6_K ? x.min[p] : 32 * x.scale[2 * p]),
                    static_cast<std::int16_t>(type != ggml_q6_K ? x.min[p] : 32 * x.scale[2 * p + 1])};
                std::memcpy(out + vb * (L::pairs + p) + 4 * i, pair, 4);
            }
            std::memcpy(out + vb * L::d + 4 * i, &x.d, 4);
            std::memcpy(out + vb * L::dmin + 4 * i, &x.dmin, 4);
        }
}

// One super-block's integer sums for MR activation rows: ISC = sum over sub-blocks of scale *
// (quants . activations), IMN = sum of the offset pairs times the bsum pairs.
template <class V, std::size_t Sub, std::size_t MR>
void k_superblock(const std::uint8_t* p, const QuantizedActs& acts, std::size_t j0, std::size_t b,
                  typename V::I* isc, typename V::I* imn) {
    using L = KLayout<Sub>;
    using I = typename V::I;
    constexpr std::size_t vb = V::bytes;
    const std::int8_t* a[MR];
    for (std::size_t j = 0; j < MR; ++j) a[j] = act_qs(acts, j0 + j, b), isc[j] = V::izero();
    for (std::size_t s = 0; s < L::subs; ++s) {
        I isub[MR];
        for (auto& v : isub) v = V::izero();
#pragma GCC unroll 8
        for (std::size_t k4 = 0; k4 < L::per_sub; ++k4) {
            const I w = V::load(p + vb * (s * L::per_sub + k4));
#pragma GCC unroll 8
            for (std::size_t j = 0; j < MR; ++j) isub[j] = V::dot4(isub[j], w, V::bcast4(a[j] + s * Sub + 4 * k4));
        }
        const I scale = V::load(p + vb * (L::scales + s));
        for (std::size_t j = 0; j < MR; ++j) isc[j] = V::add(isc[j], V::mullo(isub[j], scale));
    }
    for (std::size_t j = 0; j < MR; ++j) {
        const std::int8_t* bsums = a[j] + qk_k;  // int16[16] after the quants
        imn[j] = V::izero();
#pragma GCC unroll 8
        for (std::size_t q = 0; q < 8; ++q) imn[j] = V::dot_pairs(imn[j], V::load(p + vb * (L::pairs + q)), V::bcast4(bsums + 4 * q));
    }
}

template <class V, std::size_t Sub, std::size_t MR>
void k_rows(const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j0, float* out, std::size_t ldo,
            std::size_t rows) {
    using L = KLayout<Sub>;
    using I = typename V::I;
    using F = typename V::F;
    constexpr std::size_t vb = V::bytes;
    const std::size_t blocks = acts.k / qk_k;
    F facc[MR];
    for (auto& f : facc) f = V::fzero();
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::uint8_t* p = pack + b * L::vectors * vb;
        I isc[MR], imn[MR];
        k_superblock<V, Sub, MR>(p, acts, j0, b, isc, imn);
        const F d = V::loadf(p + vb * L::d), dmin = V::loadf(p + vb * L::dmin);
        for (std::size_t j = 0; j < MR; ++j) {
            const F da = V::set1f(acts.d_at[(j0 + j) * blocks + b]);
            if constexpr (Sub == 32) {  // q4_K, q5_K: sums += d * scaled, sumf -= dmin * mins
                facc[j] = V::add(facc[j], V::mul(V::mul(d, da), V::cvt(isc[j])));
                facc[j] = V::sub(facc[j], V::mul(V::mul(dmin, da), V::cvt(imn[j])));
            } else {  // q6_K: the offsets in the integers
                facc[j] = V::add(facc[j], V::mul(V::mul(d, da), V::cvt(V::sub(isc[j], imn[j]))));
            }
        }
    }
    for (std::size_t j = 0; j < MR; ++j) V::store(out + (j0 + j) * ldo, facc[j], rows);
}

// Every activation row against the packed tile: V::mr rows a pass, then 1.
template <class V, std::size_t MR>
void rows_pass(std::uint32_t type, const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j, float* out,
               std::size_t ldo, std::size_t rows) {
    if (type == ggml_q8_0) small_rows<V, ggml_q8_0, MR>(pack, acts, j, out, ldo, rows);
    else if (type == ggml_q4_0) small_rows<V, ggml_q4_0, MR>(pack, acts, j, out, ldo, rows);
    else if (type == ggml_q5_0) small_rows<V, ggml_q5_0, MR>(pack, acts, j, out, ldo, rows);
    else if (type == ggml_q4_1) small_rows<V, ggml_q4_1, MR>(pack, acts, j, out, ldo, rows);
    else if (type == ggml_q5_1) small_rows<V, ggml_q5_1, MR>(pack, acts, j, out, ldo, rows);
    else if (type == ggml_q6_K) k_rows<V, 16, MR>(pack, acts, j, out, ldo, rows);
    else k_rows<V, 32, MR>(pack, acts, j, out, ldo, rows);
}

template <class V>
std::size_t tile_pack_bytes(std::uint32_t type, std::size_t k) {
    if (ggml_block_size(type) == qk) return k / qk * q8_0_vectors * V::bytes;
    return k / qk_k * (type == ggml_q6_K ? KLayout<16>::vectors : KLayout<32>::vectors) * V::bytes;
}

// A tile of up to 16 weight rows, V::lanes at a time.
template <class V>
void tile(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, const QuantizedActs& acts,
          float* out, std::size_t ldo, std::uint8_t* pack) {
    const std::size_t blocks = acts.k / acts.block;
    for (std::size_t i0 = 0; i0 < rows; i0 += V::lanes) {
        const std::size_t lanes = rows - i0 < V::lanes ? rows - i0 : V::lanes;
        const std::uint8_t* wi = w + i0 * row_bytes;
        if (acts.dot_type != ggml_q8_K) pack_small<V>(type, wi, row_bytes, lanes, blocks, pack, zero_of<V>(type));
        else if (type == ggml_q6_K) pack_K<V, 16>(type, wi, row_bytes, lanes, blocks, pack);
        else pack_K<V, 32>(type, wi, row_bytes, lanes, blocks, pack);
        std::size_t j = 0;
        for (; j + V::mr <= acts.m; j += V::mr) rows_pass<V, V::mr>(type, pack, acts, j, out + i0, ldo, lanes);
        for (; j < acts.m; ++j) rows_pass<V, 1>(type, pack, acts, j, out + i0, ldo, lanes);
    }
}

}  // namespace
}  // namespace attntrace::ggml
