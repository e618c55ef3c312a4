// quantized_gemm's AVX-512 VNNI kernel: ggml_matmul_tile.hpp over 16 lanes, vpdpbusd for the
// 4-byte dot products (the weights made unsigned, q8_0's by + 128), vpdpwssd for the offsets; and
// its AMX variant (tdpbssd) for the 32-element types.
#if defined(__x86_64__)
#include <immintrin.h>

#include "ggml_matmul_tile.hpp"

namespace attntrace::ggml {
namespace {

struct Avx512 {
    using I = __m512i;
    using F = __m512;
    static constexpr std::size_t lanes = 16, bytes = 64, mr = 8;
    static constexpr bool offset_q8_0 = true;
    static I izero() { return _mm512_setzero_si512(); }
    static F fzero() { return _mm512_setzero_ps(); }
    static I load(const std::uint8_t* p) { return _mm512_loadu_si512(p); }
    static F loadf(const std::uint8_t* p) { return _mm512_loadu_ps(p); }
    static I set1(std::int32_t v) { return _mm512_set1_epi32(v); }
    static F set1f(float v) { return _mm512_set1_ps(v); }
    static I bcast4(const void* p) {
        std::int32_t v;
        std::memcpy(&v, p, 4);
        return _mm512_set1_epi32(v);
    }
    static I dot4(I acc, I w, I a) { return _mm512_dpbusd_epi32(acc, w, a); }
    static I dot4_signed(I acc, I, I) { return acc; }  // unused: q8_0 is offset
    static I dot_pairs(I acc, I pairs, I b) { return _mm512_dpwssd_epi32(acc, pairs, b); }
    static I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
    static I add(I a, I b) { return _mm512_add_epi32(a, b); }
    static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
    static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static void store(float* p, F v, std::size_t rows) {
        _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << rows) - 1u), v);
    }
    // pack_small for q8_0: each of a block's 8 vectors gathered (4 bytes of each of the ROWS rows),
    // the bytes + ZERO (0 or 128: the top bit flipped), the scales widened from fp16 (exact); the
    // lanes past ROWS zero, as pack_small leaves them.
    static bool pack_q8_0(const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, std::size_t blocks,
                          std::uint8_t* pack, int zero) {
        const auto live = static_cast<__mmask16>((1u << rows) - 1u);
        const I at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                        _mm512_set1_epi32(static_cast<std::int32_t>(row_bytes)));
        const I flip = _mm512_set1_epi32(zero ? static_cast<std::int32_t>(0x80808080u) : 0);
        for (std::size_t b = 0; b < blocks; ++b) {
            const std::uint8_t* block = w + b * sizeof(BlockQ8_0);
            std::uint8_t* out = pack + b * 10 * bytes;
            for (std::size_t k4 = 0; k4 < 8; ++k4) {
                const I v = _mm512_mask_i32gather_epi32(izero(), live, at, block + 2 + 4 * k4, 1);
                _mm512_storeu_si512(out + bytes * k4, _mm512_maskz_xor_epi32(live, v, flip));
            }
            const I d = _mm512_mask_i32gather_epi32(izero(), live, at, block, 1);  // d in the low half
            _mm512_storeu_ps(out + bytes * 8, _mm512_maskz_mov_ps(live, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d))));
            _mm512_storeu_ps(out + bytes * 9, fzero());
        }
        return true;
    }
};

// ---- AMX, for the 32-element types: per block, one tile product of 16 activation rows (A: 16 x
// 32 signed bytes, read where they lie) by the tile's 16 weight rows (B: the VNNI pack of the
// block with signed bytes, 8 rows of 4 bytes x 16), the 16 x 16 exact int32 sums (C) stored and
// scaled as small_rows scales them, lane by lane: the same floats as the AVX-512 VNNI kernel.

struct alignas(64) TileConfig {
    std::uint8_t palette = 1, start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};

void configure_tiles() {
    TileConfig c;
    c.colsb[0] = 64, c.rows[0] = 16;  // C (16, 16) int32
    c.colsb[1] = 32, c.rows[1] = 16;  // A (16, 32) int8
    c.colsb[2] = 64, c.rows[2] = 8;   // B (8, 16 x 4) int8
    c.colsb[3] = 64, c.rows[3] = 16;  // the same three again (amx_rows takes them in turn)
    c.colsb[4] = 32, c.rows[4] = 16;
    c.colsb[5] = 64, c.rows[5] = 8;
    _tile_loadconfig(&c);
}

// Where block B's A and B tiles start: activation rows [J0, J0 + 16) (ROW_BYTES apart), the packed weights.
inline const std::uint8_t* a_tile(const QuantizedActs& acts, std::size_t j0, std::size_t b) {
    return acts.bytes_at + j0 * acts.row_bytes + b * acts.block_bytes + (acts.dot_type == ggml_q8_0 ? 2 : 4);
}
inline const std::uint8_t* b_tile(const std::uint8_t* pack, std::size_t b) { return pack + b * q8_0_vectors * Avx512::bytes; }

// Block B's 16 x 16 sums of activation rows [J0, J0 + 16) into C tile 0 (A tile 1, B tile 2), or
// tile 3 (4, 5). (The tile numbers are immediates, spelt out: the intrinsics take no template
// parameter.)
void amx_block_0(const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j0, std::size_t b) {
    _tile_zero(0);
    _tile_loadd(1, a_tile(acts, j0, b), static_cast<long>(acts.row_bytes));
    _tile_loadd(2, b_tile(pack, b), static_cast<long>(Avx512::bytes));
    _tile_dpbssd(0, 1, 2);
}
void amx_block_3(const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j0, std::size_t b) {
    _tile_zero(3);
    _tile_loadd(4, a_tile(acts, j0, b), static_cast<long>(acts.row_bytes));
    _tile_loadd(5, b_tile(pack, b), static_cast<long>(Avx512::bytes));
    _tile_dpbssd(3, 4, 5);
}

// FACC (16 rows) += block B's sums C (16, 16), scaled as small_rows scales them.
template <std::uint32_t Type>
void amx_scale(const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j0, std::size_t b, const std::int32_t* c,
               __m512* facc) {
    using V = Avx512;
    const std::uint8_t* p = pack + b * q8_0_vectors * V::bytes;
    const std::size_t blocks = acts.k / qk;
    const __m512 dw = V::loadf(p + V::bytes * 8), mw = V::loadf(p + V::bytes * 9);
#pragma GCC unroll 16
    for (std::size_t j = 0; j < 16; ++j) {
        const std::size_t at = (j0 + j) * blocks + b;
        const __m512 acc = V::cvt(_mm512_load_si512(c + 16 * j));
        if constexpr (Type == ggml_q4_1 || Type == ggml_q5_1)
            facc[j] = V::add(facc[j], V::fmadd(V::mul(dw, V::set1f(acts.d_at[at])), acc, V::mul(mw, V::set1f(acts.s_at[at]))));
        else if constexpr (Type == ggml_q4_0)
            facc[j] = V::fmadd(V::mul(acc, dw), V::set1f(acts.d_at[at]), facc[j]);
        else
            facc[j] = V::fmadd(acc, V::mul(dw, V::set1f(acts.d_at[at])), facc[j]);
    }
}

// Activation rows [J0, J0 + 16) against the packed tile (signed bytes): out[j * ldo + lane], ROWS
// lanes. Two sets of tiles in turn, so that block B + 1's tile product runs while block B's sums
// are scaled.
template <std::uint32_t Type>
void amx_rows(const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j0, float* out, std::size_t ldo,
              std::size_t rows) {
    const std::size_t blocks = acts.k / qk;
    alignas(64) std::int32_t c[2][16 * 16];
    __m512 facc[16];
    for (auto& f : facc) f = Avx512::fzero();
    amx_block_0(pack, acts, j0, 0);
    for (std::size_t b = 0; b < blocks; b += 2) {
        _tile_stored(0, c[0], 64);
        if (b + 1 < blocks) amx_block_3(pack, acts, j0, b + 1);
        amx_scale<Type>(pack, acts, j0, b, c[0], facc);
        if (b + 1 == blocks) break;
        _tile_stored(3, c[1], 64);
        if (b + 2 < blocks) amx_block_0(pack, acts, j0, b + 2);
        amx_scale<Type>(pack, acts, j0, b + 1, c[1], facc);
    }
    for (std::size_t j = 0; j < 16; ++j) Avx512::store(out + (j0 + j) * ldo, facc[j], rows);
}

void amx_pass(std::uint32_t type, const std::uint8_t* pack, const QuantizedActs& acts, std::size_t j, float* out,
              std::size_t ldo, std::size_t rows) {
    if (type == ggml_q8_0) amx_rows<ggml_q8_0>(pack, acts, j, out, ldo, rows);
    else if (type == ggml_q4_0) amx_rows<ggml_q4_0>(pack, acts, j, out, ldo, rows);
    else if (type == ggml_q5_0) amx_rows<ggml_q5_0>(pack, acts, j, out, ldo, rows);
    else if (type == ggml_q4_1) amx_rows<ggml_q4_1>(pack, acts, j, out, ldo, rows);
    else amx_rows<ggml_q5_1>(pack, acts, j, out, ldo, rows);
}

}  // namespace

void tile_amx(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
              const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack) {
    if (acts.dot_type == ggml_q8_K || acts.m < 16) return tile<Avx512>(type, w, row_bytes, rows, acts, out, ldo, pack);
    pack_small<Avx512>(type, w, row_bytes, rows, acts.k / qk, pack, 0);
    configure_tiles();
    std::size_t j = 0;
    for (; j + 16 <= acts.m; j += 16) amx_pass(type, pack, acts, j, out, ldo, rows);
    _tile_release();
    if (j == acts.m) return;
    pack_small<Avx512>(type, w, row_bytes, rows, acts.k / qk, pack, zero_of<Avx512>(type));  // the rest: VNNI
    for (; j + Avx512::mr <= acts.m; j += Avx512::mr) rows_pass<Avx512, Avx512::mr>(type, pack, acts, j, out, ldo, rows);
    for (; j < acts.m; ++j) rows_pass<Avx512, 1>(type, pack, acts, j, out, ldo, rows);
}

std::size_t tile_avx512_vnni_bytes(std::uint32_t type, std::size_t k) { return tile_pack_bytes<Avx512>(type, k); }

void tile_avx512_vnni(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                      const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack) {
    tile<Avx512>(type, w, row_bytes, rows, acts, out, ldo, pack);
}

}  // namespace attntrace::ggml

#endif  // __x86_64__
