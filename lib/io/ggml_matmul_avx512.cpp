// quantized_gemm's AVX-512 VNNI kernel: ggml_matmul_tile.hpp over 16 lanes, vpdpbusd for the
// 4-byte dot products (the weights made unsigned, q8_0's by + 128), vpdpwssd for the offsets; and
// its AMX variant (tdpbssd) for the 32-element types, q4_K and q5_K.
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
    // pack_K for q4_K (ggml-quants.c dequantize_row_q4_K's nibbles, get_scale_min_k4's 6-bit
    // scales and mins), the ROWS rows' bytes gathered a dword at a time: sub-block 2j's quants are
    // the low nibbles of qs[32j, 32j + 32), 2j + 1's the high ones; the lanes past ROWS zero.
    static bool pack_q4_K(const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, std::size_t blocks,
                          std::uint8_t* pack) {
        using L = KLayout<32>;
        const auto live = static_cast<__mmask16>((1u << rows) - 1u);
        const I at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                        _mm512_set1_epi32(static_cast<std::int32_t>(row_bytes)));
        const I nibble = _mm512_set1_epi32(0x0F0F0F0F), six = _mm512_set1_epi32(63);
        for (std::size_t b = 0; b < blocks; ++b) {
            const std::uint8_t* block = w + b * sizeof(BlockQ4_K);
            std::uint8_t* out = pack + b * L::vectors * bytes;
            const auto gather = [&](std::size_t offset) { return _mm512_mask_i32gather_epi32(izero(), live, at, block + offset, 1); };
            for (std::size_t j = 0; j < 4; ++j)
                for (std::size_t k4 = 0; k4 < 8; ++k4) {
                    const I q = gather(16 + 32 * j + 4 * k4);
                    _mm512_storeu_si512(out + bytes * (16 * j + k4), _mm512_and_si512(q, nibble));
                    _mm512_storeu_si512(out + bytes * (16 * j + 8 + k4), _mm512_and_si512(_mm512_srli_epi32(q, 4), nibble));
                }
            I sc[12];  // scales[12], a byte a lane
            for (std::size_t d = 0; d < 3; ++d) {
                const I v = gather(4 + 4 * d);
                for (std::size_t i = 0; i < 4; ++i)
                    sc[4 * d + i] = _mm512_and_si512(_mm512_srli_epi32(v, static_cast<unsigned>(8 * i)), _mm512_set1_epi32(255));
            }
            for (std::size_t j = 0; j < 8; ++j) {  // get_scale_min_k4
                const I scale = j < 4 ? _mm512_and_si512(sc[j], six)
                                      : _mm512_or_si512(_mm512_and_si512(sc[j + 4], _mm512_set1_epi32(15)),
                                                        _mm512_slli_epi32(_mm512_srli_epi32(sc[j - 4], 6), 4));
                const I min = j < 4 ? _mm512_and_si512(sc[j + 4], six)
                                    : _mm512_or_si512(_mm512_srli_epi32(sc[j + 4], 4), _mm512_slli_epi32(_mm512_srli_epi32(sc[j], 6), 4));
                _mm512_storeu_si512(out + bytes * (L::scales + j), scale);
                _mm512_storeu_si512(out + bytes * (L::pairs + j), _mm512_or_si512(min, _mm512_slli_epi32(min, 16)));
            }
            const I dd = gather(0);  // d in the low half, dmin in the high
            _mm512_storeu_ps(out + bytes * L::d, _mm512_maskz_mov_ps(live, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd))));
            _mm512_storeu_ps(out + bytes * L::dmin,
                             _mm512_maskz_mov_ps(live, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)))));
        }
        return true;
    }
};

// ---- AMX, for the 32-element types. A task is up to 32 weight rows: two B tiles (the VNNI pack
// of each 16 rows with signed bytes, 8 rows of 4 bytes x 16 per block) against the activations'
// tiles (QuantizedActs::tiles: 16 rows x 32 bytes, contiguous), two groups of 16 activation rows
// at a time: per block, 4 tile products (2 x 2, each A and B tile loaded once for two) into 4 C
// tiles of 16 x 16 exact int32 sums. The sums are stored and scaled into float accumulators
// (32 x 32, in L1) as small_rows scales them, lane by lane: the same floats as the AVX-512 VNNI
// kernel. The scaling of block b - 1 runs while block b's products are in the tile unit (the C
// stores of block b come after it), as ggml-cpu/amx/mmq.cpp tinygemm_kernel_amx interleaves its
// acc_C with the next block's _tile_dpbssd (double-buffered C).
//
// Tiles: C 0 (group 0 x weights 0-15), 1 (group 0 x 16-31), 2 (group 1 x 0-15), 3 (group 1 x
// 16-31); A 4 (group 0), 5 (group 1); B 6 (weights 0-15), 7 (weights 16-31).

struct alignas(64) TileConfig {
    std::uint8_t palette = 1, start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};

constexpr TileConfig tile_config() {
    TileConfig c;
    for (int t = 0; t < 4; ++t) c.colsb[t] = 64, c.rows[t] = 16;  // C (16, 16) int32
    for (int t = 4; t < 6; ++t) c.colsb[t] = 32, c.rows[t] = 16;  // A (16, 32) int8
    for (int t = 6; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 8;   // B (8, 16 x 4) int8
    return c;
}

// (A constant in memory: GCC does not see ldtilecfg read a local's stores, and may drop them.)
constexpr TileConfig the_tile_config = tile_config();

void configure_tiles() { _tile_loadconfig(&the_tile_config); }

constexpr std::size_t c_tile = 16 * 16;             // int32 sums (or float accumulators) of one C tile
constexpr std::size_t a_tile_bytes = amx_group * qk;  // 512
constexpr std::size_t b_block_bytes = q8_0_vectors * Avx512::bytes;  // a block of the pack: B tile, d, m

constexpr std::size_t k_block_bytes = KLayout<32>::vectors * Avx512::bytes;  // a q4_K / q5_K super-block of the pack

// Where a panel is: activation group G (of 16 rows), the pack's two halves HALF bytes apart;
// BLOCKS blocks of the dot type a row, PIECES tiles of 32 a row (K / 32: the blocks of the
// 32-element types, 8 sub-blocks of each super-block of q4_K and q5_K: K_TYPES).
struct Panel {
    const std::uint8_t* pack;
    std::size_t half;
    const QuantizedActs* acts;
    std::size_t g, blocks, pieces;
    bool k_types;
};

// Where piece U's B tile (of the first weight half) is in the pack: pack_small's block U, or
// sub-block U % 8 of pack_K's super-block U / 8 (its vectors 8s to 8s + 7).
inline const std::uint8_t* b_piece(const Panel& p, std::size_t u) {
    return p.k_types ? p.pack + u / 8 * k_block_bytes + u % 8 * a_tile_bytes : p.pack + u * b_block_bytes;
}

// The BYTES at P asked into L1 (the tile loads are not followed by the hardware's prefetchers).
inline void prefetch(const void* p, std::size_t bytes) {
    for (std::size_t at = 0; at < bytes; at += 64) _mm_prefetch(static_cast<const char*>(p) + at, _MM_HINT_T0);
}

constexpr std::size_t ahead = 2;  // blocks prefetched ahead of the tile loads

// Piece U's tile products of the panel's MB groups by its NB weight tiles into C tiles 0-3.
template <std::size_t MB, std::size_t NB>
void amx_products(const Panel& p, std::size_t u) {
    const std::int8_t* a0 = p.acts->tiles_at + (p.g * p.pieces + u) * a_tile_bytes;
    const std::uint8_t* b0 = b_piece(p, u);
    if (u + ahead < p.pieces) {
        const std::uint8_t* next = b_piece(p, u + ahead);
        for (std::size_t mb = 0; mb < MB; ++mb) prefetch(a0 + (mb * p.pieces + ahead) * a_tile_bytes, a_tile_bytes);
        for (std::size_t nb = 0; nb < NB; ++nb) prefetch(next + nb * p.half, p.k_types ? a_tile_bytes : b_block_bytes);
    }
    _tile_loadd(4, a0, qk);
    _tile_loadd(6, b0, Avx512::bytes);
    _tile_zero(0);
    _tile_dpbssd(0, 4, 6);
    if constexpr (NB == 2) {
        _tile_loadd(7, b0 + p.half, Avx512::bytes);
        _tile_zero(1);
        _tile_dpbssd(1, 4, 7);
    }
    if constexpr (MB == 2) {
        _tile_loadd(5, a0 + p.pieces * a_tile_bytes, qk);
        _tile_zero(2);
        _tile_dpbssd(2, 5, 6);
        if constexpr (NB == 2) {
            _tile_zero(3);
            _tile_dpbssd(3, 5, 7);
        }
    }
}

// C tiles 0-3 stored to C: tile (mb, nb) at C + (mb * NB + nb) * c_tile.
template <std::size_t MB, std::size_t NB>
void amx_store(std::int32_t* c) {
    _tile_stored(0, c, 64);
    if constexpr (NB == 2) _tile_stored(1, c + c_tile, 64);
    if constexpr (MB == 2) _tile_stored(2, c + NB * c_tile, 64);
    if constexpr (MB == 2 && NB == 2) _tile_stored(3, c + 3 * c_tile, 64);
}

// FACC += the sums of blocks B, ..., B + COUNT - 1 in C[0], ..., C[COUNT - 1], each scaled as
// small_rows scales it, in that order (FACC and each C: tile (mb, nb) at (mb * NB + nb) * c_tile);
// FIRST: FACC is zero before (not read).
template <std::uint32_t Type, std::size_t MB, std::size_t NB, std::size_t Count, bool First>
[[gnu::always_inline]] inline void amx_scale(const Panel& p, std::size_t b, const std::int32_t* const* c, float* facc) {
    using V = Avx512;
    for (std::size_t mb = 0; mb < MB; ++mb)
        for (std::size_t nb = 0; nb < NB; ++nb) {
            const float *da[Count], *sa[Count];
            __m512 dw[Count], mw[Count];
            for (std::size_t i = 0; i < Count; ++i) {
                const std::size_t at = ((p.g + mb) * p.blocks + b + i) * amx_group;  // the rows' d (and s)
                da[i] = p.acts->tile_d_at + at, sa[i] = p.acts->tile_s_at + at;
                const std::uint8_t* w = p.pack + nb * p.half + (b + i) * b_block_bytes;
                dw[i] = V::loadf(w + V::bytes * 8), mw[i] = V::loadf(w + V::bytes * 9);
            }
            float* f = facc + (mb * NB + nb) * c_tile;
#pragma GCC unroll 16
            for (std::size_t r = 0; r < amx_group; ++r) {
                __m512 sum = First ? V::fzero() : _mm512_load_ps(f + 16 * r);
                for (std::size_t i = 0; i < Count; ++i) {
                    const __m512 acc = V::cvt(_mm512_load_si512(c[i] + (mb * NB + nb) * c_tile + 16 * r));
                    if constexpr (Type == ggml_q4_1 || Type == ggml_q5_1)  // sumf += fma(d_w * d_a, sumi, m_w * s_a)
                        sum = V::add(sum, V::fmadd(V::mul(dw[i], V::set1f(da[i][r])), acc, V::mul(mw[i], V::set1f(sa[i][r]))));
                    else if constexpr (Type == ggml_q4_0)  // sumf = fma(sumi * d_w, d_a, sumf)
                        sum = V::fmadd(V::mul(acc, dw[i]), V::set1f(da[i][r]), sum);
                    else  // q8_0, q5_0: sumf = fma(sumi, d_w * d_a, sumf)
                        sum = V::fmadd(acc, V::mul(dw[i], V::set1f(da[i][r])), sum);
                }
                _mm512_store_ps(f + 16 * r, sum);
            }
        }
}

// FACC (the panel's accumulators) into OUT[j * LDO + i]: its activation rows below M, weight rows below ROWS.
template <std::size_t MB, std::size_t NB>
void amx_out(const Panel& p, const float* facc, float* out, std::size_t ldo, std::size_t rows) {
    for (std::size_t mb = 0; mb < MB; ++mb)
        for (std::size_t r = 0; r < amx_group; ++r) {
            const std::size_t j = (p.g + mb) * amx_group + r;
            if (j >= p.acts->m) return;
            for (std::size_t nb = 0; nb < NB && 16 * nb < rows; ++nb)
                Avx512::store(out + j * ldo + 16 * nb, _mm512_load_ps(facc + (mb * NB + nb) * c_tile + 16 * r),
                              rows - 16 * nb < 16 ? rows - 16 * nb : 16);
        }
}

// The panel of MB groups x NB weight tiles over every block, into OUT: block b - 1's sums scaled
// while block b's products run (the C stores after), two buffers of sums in turn.
template <std::uint32_t Type, std::size_t MB, std::size_t NB>
void amx_panel(const Panel& p, float* out, std::size_t ldo, std::size_t rows) {
    alignas(64) float facc[MB * NB * c_tile];
    alignas(64) std::int32_t sums[2][MB * NB * c_tile];
    for (std::size_t b = 0; b < p.blocks; ++b) {
        amx_products<MB, NB>(p, b);
        const std::int32_t* c = sums[(b - 1) & 1];
        if (b == 1) amx_scale<Type, MB, NB, 1, true>(p, b - 1, &c, facc);
        else if (b > 1) amx_scale<Type, MB, NB, 1, false>(p, b - 1, &c, facc);
        amx_store<MB, NB>(sums[b & 1]);
    }
    const std::int32_t* c = sums[(p.blocks - 1) & 1];
    if (p.blocks == 1) amx_scale<Type, MB, NB, 1, true>(p, p.blocks - 1, &c, facc);
    else amx_scale<Type, MB, NB, 1, false>(p, p.blocks - 1, &c, facc);
    amx_out<MB, NB>(p, facc, out, ldo, rows);
}

// ---- q4_K and q5_K on the same tiles: a piece is a sub-block of 32 (pack_K's vectors 8s to 8s +
// 7 are its B tile, the quants 0..15 or 0..31 as signed bytes), its sums times the sub-block's
// scale added to ISC (int32, exact); after the 8th, the super-block's floats as k_rows makes them
// (the offsets' pairs times the activations' bsums, IMN), so the floats are the AVX-512 VNNI
// kernel's. (q6_K's sub-blocks of 16 stay on VNNI.)

// ISC (= if FIRST, else +=) piece U's sums C times its sub-block's scales (the layout of C).
template <std::size_t MB, std::size_t NB, bool First>
[[gnu::always_inline]] inline void amx_k_scale(const Panel& p, std::size_t u, const std::int32_t* c, std::int32_t* isc) {
    using L = KLayout<32>;
    for (std::size_t nb = 0; nb < NB; ++nb) {
        const __m512i scale = Avx512::load(p.pack + nb * p.half + u / 8 * k_block_bytes + (L::scales + u % 8) * Avx512::bytes);
        for (std::size_t mb = 0; mb < MB; ++mb) {
            const std::size_t t = (mb * NB + nb) * c_tile;
#pragma GCC unroll 16
            for (std::size_t r = 0; r < amx_group; ++r) {
                const __m512i v = _mm512_mullo_epi32(_mm512_load_si512(c + t + 16 * r), scale);
                _mm512_store_si512(isc + t + 16 * r, First ? v : _mm512_add_epi32(_mm512_load_si512(isc + t + 16 * r), v));
            }
        }
    }
}

// FACC (= if FIRST, else +=) super-block B's floats: d * d_a * ISC - dmin * d_a * IMN, as k_rows.
template <std::size_t MB, std::size_t NB, bool First>
void amx_k_float(const Panel& p, std::size_t b, const std::int32_t* isc, float* facc) {
    using L = KLayout<32>;
    using V = Avx512;
    for (std::size_t nb = 0; nb < NB; ++nb) {
        const std::uint8_t* w = p.pack + nb * p.half + b * k_block_bytes;
        const __m512 d = V::loadf(w + V::bytes * L::d), dmin = V::loadf(w + V::bytes * L::dmin);
        __m512i pairs[8];
        for (std::size_t q = 0; q < 8; ++q) pairs[q] = V::load(w + V::bytes * (L::pairs + q));
        for (std::size_t mb = 0; mb < MB; ++mb) {
            const std::size_t at = ((p.g + mb) * p.blocks + b) * amx_group, t = (mb * NB + nb) * c_tile;
            for (std::size_t r = 0; r < amx_group; ++r) {
                const std::int16_t* bsums = p.acts->tile_bsums_at + (at + r) * 16;
                __m512i imn = V::izero();
#pragma GCC unroll 8
                for (std::size_t q = 0; q < 8; ++q) imn = V::dot_pairs(imn, pairs[q], V::bcast4(bsums + 2 * q));
                const __m512 da = V::set1f(p.acts->tile_d_at[at + r]);
                __m512 f = First ? V::fzero() : _mm512_load_ps(facc + t + 16 * r);
                f = V::add(f, V::mul(V::mul(d, da), V::cvt(_mm512_load_si512(isc + t + 16 * r))));
                _mm512_store_ps(facc + t + 16 * r, V::sub(f, V::mul(V::mul(dmin, da), V::cvt(imn))));
            }
        }
    }
}

// Piece U's sums C into ISC, and after a super-block's last, into FACC.
template <std::size_t MB, std::size_t NB>
[[gnu::always_inline]] inline void amx_k_step(const Panel& p, std::size_t u, const std::int32_t* c, std::int32_t* isc,
                                              float* facc) {
    if (u % 8 == 0) amx_k_scale<MB, NB, true>(p, u, c, isc);
    else amx_k_scale<MB, NB, false>(p, u, c, isc);
    if (u % 8 != 7) return;
    if (u == 7) amx_k_float<MB, NB, true>(p, u / 8, isc, facc);
    else amx_k_float<MB, NB, false>(p, u / 8, isc, facc);
}

// amx_panel for q4_K and q5_K: piece u - 1's sums scaled while piece u's products run.
template <std::size_t MB, std::size_t NB>
void amx_k_panel(const Panel& p, float* out, std::size_t ldo, std::size_t rows) {
    alignas(64) float facc[MB * NB * c_tile];
    alignas(64) std::int32_t isc[MB * NB * c_tile];
    alignas(64) std::int32_t sums[2][MB * NB * c_tile];
    for (std::size_t u = 0; u < p.pieces; ++u) {
        amx_products<MB, NB>(p, u);
        if (u > 0) amx_k_step<MB, NB>(p, u - 1, sums[(u - 1) & 1], isc, facc);
        amx_store<MB, NB>(sums[u & 1]);
    }
    amx_k_step<MB, NB>(p, p.pieces - 1, sums[(p.pieces - 1) & 1], isc, facc);
    amx_out<MB, NB>(p, facc, out, ldo, rows);
}

template <std::uint32_t Type, std::size_t MB, std::size_t NB>
void amx_any_panel(const Panel& p, float* out, std::size_t ldo, std::size_t rows) {
    if constexpr (Type == ggml_q4_K) amx_k_panel<MB, NB>(p, out, ldo, rows);  // q4_K and q5_K
    else amx_panel<Type, MB, NB>(p, out, ldo, rows);
}

// Every activation group, two at a time, against the ROWS (<= 32) weight rows of the pack.
template <std::uint32_t Type>
void amx_groups(Panel p, float* out, std::size_t ldo, std::size_t rows) {
    const std::size_t groups = (p.acts->m + amx_group - 1) / amx_group;
    for (p.g = 0; p.g < groups; p.g += 2) {
        const bool two = p.g + 1 < groups;
        if (two && rows > 16) amx_any_panel<Type, 2, 2>(p, out, ldo, rows);
        else if (two) amx_any_panel<Type, 2, 1>(p, out, ldo, rows);
        else if (rows > 16) amx_any_panel<Type, 1, 2>(p, out, ldo, rows);
        else amx_any_panel<Type, 1, 1>(p, out, ldo, rows);
    }
}

}  // namespace

void tile_amx(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
              const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack) {
    if (type == ggml_q6_K || !acts.tiles_at) return tile<Avx512>(type, w, row_bytes, rows, acts, out, ldo, pack);
    const bool k_types = acts.dot_type == ggml_q8_K;  // q4_K, q5_K
    const std::size_t blocks = acts.k / acts.block, half = tile_pack_bytes<Avx512>(type, acts.k);
    const std::size_t top = rows < 16 ? rows : 16;
    if (k_types) {
        pack_K<Avx512, 32>(type, w, row_bytes, top, blocks, pack);
        if (rows > 16) pack_K<Avx512, 32>(type, w + 16 * row_bytes, row_bytes, rows - 16, blocks, pack + half);
    } else {
        pack_small<Avx512>(type, w, row_bytes, top, blocks, pack, 0);
        if (rows > 16) pack_small<Avx512>(type, w + 16 * row_bytes, row_bytes, rows - 16, blocks, pack + half, 0);
    }
    configure_tiles();
    const Panel p{pack, half, &acts, 0, blocks, acts.k / qk, k_types};
    if (k_types) amx_groups<ggml_q4_K>(p, out, ldo, rows);
    else if (type == ggml_q8_0) amx_groups<ggml_q8_0>(p, out, ldo, rows);
    else if (type == ggml_q4_0) amx_groups<ggml_q4_0>(p, out, ldo, rows);
    else if (type == ggml_q5_0) amx_groups<ggml_q5_0>(p, out, ldo, rows);
    else if (type == ggml_q4_1) amx_groups<ggml_q4_1>(p, out, ldo, rows);
    else amx_groups<ggml_q5_1>(p, out, ldo, rows);
    _tile_release();
}

std::size_t tile_avx512_vnni_bytes(std::uint32_t type, std::size_t k) { return tile_pack_bytes<Avx512>(type, k); }

void tile_avx512_vnni(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                      const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack) {
    tile<Avx512>(type, w, row_bytes, rows, acts, out, ldo, pack);
}

}  // namespace attntrace::ggml

#endif  // __x86_64__
