// quantized_gemm's AVX-512 VNNI kernel: ggml_matmul_tile.hpp over 16 lanes, vpdpbusd for the
// 4-byte dot products (the weights made unsigned, q8_0's by + 128), vpdpwssd for the offsets; and
// its AMX variant (tdpbssd) for the 32-element types, q4_K and q5_K.
#if defined(__x86_64__)
#include <immintrin.h>

#include "attntrace/tensor/amx.hpp"
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
    // The 32 bytes at BASE + i * STRIDE of the rows i < ROWS as 8 dwords each, transposed: OUT[k]
    // holds row i's dword k in lane i (the lanes past ROWS zero). Rows p and p + 8 share a vector
    // (one per half), and each half's 8 x 8 dwords are transposed by swapping the off-diagonal
    // blocks of 4, then 2, then 1 (two permutes per pair of vectors a stage): three stages of
    // vpermt2d instead of 8 gathers, which the packs spent most of their time in.
    static void transpose_rows(const std::uint8_t* base, std::size_t stride, std::size_t rows, I* out) {
        const auto row = [&](std::size_t i) {
            return i < rows ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + i * stride)) : _mm256_setzero_si256();
        };
        for (std::size_t p = 0; p < 8; ++p) out[p] = _mm512_inserti64x4(_mm512_castsi256_si512(row(p)), row(p + 8), 1);
        // Stage s swaps blocks of h = 4 >> s: lane l of a takes a[l] or b[l - h] (vpermt2d's 16 + l - h),
        // of b: a[l + h] or b[l].
        alignas(64) static constexpr std::int32_t swap[3][2][16] = {
            {{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27}, {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}},
            {{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}, {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}},
            {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}, {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}}};
        for (std::size_t stage = 0; stage < 3; ++stage) {
            const std::size_t h = std::size_t{4} >> stage;
            const I pa = _mm512_load_si512(swap[stage][0]), pb = _mm512_load_si512(swap[stage][1]);
            for (std::size_t a = 0; a < 8; ++a) {
                if (a & h) continue;
                const std::size_t b = a | h;
                const I na = _mm512_permutex2var_epi32(out[a], pa, out[b]);
                out[b] = _mm512_permutex2var_epi32(out[a], pb, out[b]);
                out[a] = na;
            }
        }
    }
    // pack_small for q8_0: a block's 32 quant bytes of each of the ROWS rows as its 8 vectors
    // (transpose_rows: 4 bytes of every row in each), the bytes + ZERO (0 or 128: the top bit
    // flipped), the scales gathered and widened from fp16 (exact); the lanes past ROWS zero, as
    // pack_small leaves them.
    static bool pack_q8_0(const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, std::size_t blocks,
                          std::uint8_t* pack, int zero) {
        const auto live = static_cast<__mmask16>((1u << rows) - 1u);
        const I at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                        _mm512_set1_epi32(static_cast<std::int32_t>(row_bytes)));
        const I flip = _mm512_set1_epi32(zero ? static_cast<std::int32_t>(0x80808080u) : 0);
        for (std::size_t b = 0; b < blocks; ++b) {
            const std::uint8_t* block = w + b * sizeof(BlockQ8_0);
            std::uint8_t* out = pack + b * 10 * bytes;
            I q[8];
            transpose_rows(block + 2, row_bytes, rows, q);
            for (std::size_t k4 = 0; k4 < 8; ++k4) _mm512_storeu_si512(out + bytes * k4, _mm512_maskz_xor_epi32(live, q[k4], flip));
            const I d = _mm512_mask_i32gather_epi32(izero(), live, at, block, 1);  // d in the low half
            _mm512_storeu_ps(out + bytes * 8, _mm512_maskz_mov_ps(live, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d))));
            _mm512_storeu_ps(out + bytes * 9, fzero());
        }
        return true;
    }
    // pack_K for q4_K (ggml-quants.c dequantize_row_q4_K's nibbles, get_scale_min_k4's 6-bit
    // scales and mins), the ROWS rows' quants transposed 32 bytes at a time (transpose_rows), the
    // scales and d gathered a dword at a time: sub-block 2j's quants are
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
            for (std::size_t j = 0; j < 4; ++j) {
                I q[8];
                transpose_rows(block + 16 + 32 * j, row_bytes, rows, q);
                for (std::size_t k4 = 0; k4 < 8; ++k4) {
                    _mm512_storeu_si512(out + bytes * (16 * j + k4), _mm512_and_si512(q[k4], nibble));
                    _mm512_storeu_si512(out + bytes * (16 * j + 8 + k4), _mm512_and_si512(_mm512_srli_epi32(q[k4], 4), nibble));
                }
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

constexpr TileConfig tile_config() {
    TileConfig c;
    for (int t = 0; t < 4; ++t) c.colsb[t] = 64, c.rows[t] = 16;  // C (16, 16) int32
    for (int t = 4; t < 6; ++t) c.colsb[t] = 32, c.rows[t] = 16;  // A (16, 32) int8
    for (int t = 6; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 8;   // B (8, 16 x 4) int8
    return c;
}

// (A constant in memory: GCC does not see ldtilecfg read a local's stores, and may drop them.)
constexpr TileConfig the_tile_config = tile_config();

// The K4 tiles (amx_k4_products): C as above; A (16, 64) int8, B (16, 16 x 4) int8.
constexpr TileConfig k4_tile_config() {
    TileConfig c = tile_config();
    for (int t = 4; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
    return c;
}
constexpr TileConfig the_k4_tile_config = k4_tile_config();

constexpr std::size_t c_tile = 16 * 16;             // int32 sums (or float accumulators) of one C tile
constexpr std::size_t a_tile_bytes = amx_group * qk;  // 512
constexpr std::size_t b_block_bytes = q8_0_vectors * Avx512::bytes;  // a block of the pack: B tile, d, m

constexpr std::size_t k_block_bytes = KLayout<32>::vectors * Avx512::bytes;  // a q4_K / q5_K super-block of the pack

// The next task's weights (Ahead) asked into L2 (prefetcht1) STEP lines at each tile product, so
// that its packing, which reads them from memory, finds them there: measured, the packs' time went
// mostly to waiting on those loads.
struct Prefetcher {
    const char* at;
    const char* end;
    std::size_t step;
    void next() {
        for (std::size_t i = 0; i < step && at < end; ++i, at += 64) _mm_prefetch(at, _MM_HINT_T1);
    }
};

// Where a panel is: activation group G (of 16 rows), the pack's two halves HALF bytes apart;
// BLOCKS blocks of the dot type a row, PIECES tiles of 32 a row (K / 32: the blocks of the
// 32-element types, 8 sub-blocks of each super-block of q4_K and q5_K: K_TYPES); AHEAD, the
// next task's prefetches.
struct Panel {
    const std::uint8_t* pack;
    std::size_t half;
    const QuantizedActs* acts;
    std::size_t g, blocks, pieces;
    bool k_types;
    Prefetcher* ahead;
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
    // piece U of group G: the left or right half of tile rows TILE_K bytes long (QuantizedActs::tile_k)
    const std::size_t tile_k = p.acts->tile_k, wide = tile_k == qk ? 0 : 1;  // log2 of the pieces a tile row
    const std::int8_t* group = p.acts->tiles_at + p.g * p.pieces * a_tile_bytes;
    const std::int8_t* a0 = group + (u >> wide) * amx_group * tile_k + (u & wide) * qk;
    const std::uint8_t* b0 = b_piece(p, u);
    p.ahead->next();
    if (u + ahead < p.pieces) {
        const std::uint8_t* next = b_piece(p, u + ahead);
        for (std::size_t mb = 0; mb < MB; ++mb)
            prefetch(group + (mb * p.pieces + ((u + ahead) >> wide << wide)) * a_tile_bytes, a_tile_bytes << wide);
        for (std::size_t nb = 0; nb < NB; ++nb) prefetch(next + nb * p.half, p.k_types ? a_tile_bytes : b_block_bytes);
    }
    _tile_loadd(4, a0, tile_k);
    _tile_loadd(6, b0, Avx512::bytes);
    _tile_zero(0);
    _tile_dpbssd(0, 4, 6);
    if constexpr (NB == 2) {
        _tile_loadd(7, b0 + p.half, Avx512::bytes);
        _tile_zero(1);
        _tile_dpbssd(1, 4, 7);
    }
    if constexpr (MB == 2) {
        _tile_loadd(5, a0 + p.pieces * a_tile_bytes, tile_k);
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

// ---- q4_K with the sub-block scales inside the B tiles: each 6-bit scale split as 8 * hi + lo (hi,
// lo in 0..7), the B tiles of a piece are q * hi and q * lo (0..105: signed bytes), so the tile
// products add up a whole super-block's scaled sums in two C tiles, HI and LO, and 8 * HI + LO is
// k_rows' ISC to the integer: no store and no scaling per sub-block (amx_k_step), one per
// super-block. A task's two weight halves run one after the other (C: 4 tiles for 2 activation
// groups x HI, LO). (q5_K's q * lo would reach 217: it stays on amx_k_panel.)
//
// The tiles are K = 64 deep (no scaling between sub-blocks, so two of them a product: half the
// tile products of K = 32; the activations in QuantizedActs' tiles of 64 bytes a row). K4Layout,
// per super-block of 16 weight rows: for each pair t of sub-blocks, the B tile HI (16 vectors:
// sub-block 2t's 8, then 2t + 1's) and LO (the same), so vector 32 t + 16 h + 8 (s % 2) + k4 for
// sub-block s = 2t or 2t + 1, part h (0: HI, 1: LO); then pack_K's offset pairs, d and dmin.
struct K4Layout {
    static constexpr std::size_t pairs = 128, d = pairs + 8, dmin = d + 1, vectors = dmin + 1;
};
constexpr std::size_t k4_block_bytes = K4Layout::vectors * Avx512::bytes;

// The ROWS (<= 16) rows of q4_K at W in K4Layout: pack_q4_K's layout a super-block at a time, each
// quant vector times its lanes' hi and lo by shifts and masked adds (the bytes stay below 128, so
// no carry crosses a byte).
void pack_q4_K_split(const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, std::size_t blocks,
                     std::uint8_t* pack) {
    using L = KLayout<32>;
    using V = Avx512;
    alignas(64) std::uint8_t k[L::vectors * V::bytes];
    for (std::size_t b = 0; b < blocks; ++b) {
        V::pack_q4_K(w + b * sizeof(BlockQ4_K), row_bytes, rows, 1, k);
        std::uint8_t* out = pack + b * k4_block_bytes;
        for (std::size_t s = 0; s < 8; ++s) {
            const __m512i scale = V::load(k + V::bytes * (L::scales + s));
            const __m512i hi = _mm512_srli_epi32(scale, 3), lo = _mm512_and_si512(scale, _mm512_set1_epi32(7));
            for (std::size_t k4 = 0; k4 < 8; ++k4) {
                const __m512i q = V::load(k + V::bytes * (8 * s + k4));
                __m512i qh = V::izero(), ql = V::izero();
                for (unsigned bit = 0; bit < 3; ++bit) {
                    const __m512i shifted = _mm512_slli_epi32(q, bit), one = _mm512_set1_epi32(1 << bit);
                    qh = _mm512_mask_add_epi32(qh, _mm512_test_epi32_mask(hi, one), qh, shifted);
                    ql = _mm512_mask_add_epi32(ql, _mm512_test_epi32_mask(lo, one), ql, shifted);
                }
                _mm512_storeu_si512(out + V::bytes * (32 * (s / 2) + 8 * (s % 2) + k4), qh);
                _mm512_storeu_si512(out + V::bytes * (32 * (s / 2) + 16 + 8 * (s % 2) + k4), ql);
            }
        }
        std::memcpy(out + V::bytes * K4Layout::pairs, k + V::bytes * L::pairs, 10 * V::bytes);  // pairs, d, dmin
    }
}

constexpr std::size_t k4_a_tile = amx_group * 64, k4_b_tile = 16 * Avx512::bytes;  // 1024 bytes each

// Pair T's (sub-blocks 2T, 2T + 1 of the row) products of the panel's MB groups by weight half NB:
// C tile 2 mb (HI) and 2 mb + 1 (LO).
template <std::size_t MB>
void amx_k4_products(const Panel& p, std::size_t nb, std::size_t t) {
    const std::size_t pairs = p.pieces / 2;
    const std::int8_t* a0 = p.acts->tiles_at + (p.g * pairs + t) * k4_a_tile;
    const auto b_pair = [&](std::size_t at) { return p.pack + nb * p.half + at / 4 * k4_block_bytes + at % 4 * 2 * k4_b_tile; };
    const std::uint8_t* b0 = b_pair(t);
    if (t + 1 < pairs) {
        for (std::size_t mb = 0; mb < MB; ++mb) prefetch(a0 + (mb * pairs + 1) * k4_a_tile, k4_a_tile);
        prefetch(b_pair(t + 1), 2 * k4_b_tile);
    }
    p.ahead->next();
    _tile_loadd(6, b0, Avx512::bytes);
    _tile_loadd(7, b0 + k4_b_tile, Avx512::bytes);
    _tile_loadd(4, a0, 64);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    if constexpr (MB == 2) {
        _tile_loadd(5, a0 + pairs * k4_a_tile, 64);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
}

// FACC (= if FIRST, else +=) super-block B's floats from its sums (HI, LO of group mb at
// (2 mb, 2 mb + 1) * c_tile), as amx_k_float makes them from ISC = 8 * HI + LO.
template <std::size_t MB, bool First>
void amx_k4_float(const Panel& p, std::size_t nb, std::size_t b, const std::int32_t* sums, float* facc) {
    using V = Avx512;
    const std::uint8_t* w = p.pack + nb * p.half + b * k4_block_bytes;
    const __m512 d = V::loadf(w + V::bytes * K4Layout::d), dmin = V::loadf(w + V::bytes * K4Layout::dmin);
    __m512i pairs[8];
    for (std::size_t q = 0; q < 8; ++q) pairs[q] = V::load(w + V::bytes * (K4Layout::pairs + q));
    for (std::size_t mb = 0; mb < MB; ++mb) {
        const std::size_t at = ((p.g + mb) * p.blocks + b) * amx_group;
        const std::int32_t* hi = sums + 2 * mb * c_tile;
        for (std::size_t r = 0; r < amx_group; ++r) {
            const std::int16_t* bsums = p.acts->tile_bsums_at + (at + r) * 16;
            __m512i imn = V::izero();
#pragma GCC unroll 8
            for (std::size_t q = 0; q < 8; ++q) imn = V::dot_pairs(imn, pairs[q], V::bcast4(bsums + 2 * q));
            const __m512i isc = V::add(_mm512_slli_epi32(_mm512_load_si512(hi + 16 * r), 3), _mm512_load_si512(hi + c_tile + 16 * r));
            const __m512 da = V::set1f(p.acts->tile_d_at[at + r]);
            __m512 f = First ? V::fzero() : _mm512_load_ps(facc + mb * c_tile + 16 * r);
            f = V::add(f, V::mul(V::mul(d, da), V::cvt(isc)));
            _mm512_store_ps(facc + mb * c_tile + 16 * r, V::sub(f, V::mul(V::mul(dmin, da), V::cvt(imn))));
        }
    }
}

// C tiles 0 .. 2 MB - 1 stored to SUMS (tile t at t * c_tile).
template <std::size_t MB>
void amx_k4_store(std::int32_t* sums) {
    _tile_stored(0, sums, 64);
    _tile_stored(1, sums + c_tile, 64);
    if constexpr (MB == 2) {
        _tile_stored(2, sums + 2 * c_tile, 64);
        _tile_stored(3, sums + 3 * c_tile, 64);
    }
}

// The panel of MB groups against weight half NB (ROWS of its rows) into OUT: super-block b - 1's
// floats made while super-block b's products run (its sums stored before they start).
template <std::size_t MB>
void amx_k4_panel(const Panel& p, std::size_t nb, float* out, std::size_t ldo, std::size_t rows) {
    alignas(64) float facc[MB * c_tile];
    alignas(64) std::int32_t sums[2][2 * MB * c_tile];
    for (std::size_t b = 0; b < p.blocks; ++b) {
        if (b > 0) amx_k4_store<MB>(sums[(b - 1) & 1]);
        _tile_zero(0);
        _tile_zero(1);
        if constexpr (MB == 2) {
            _tile_zero(2);
            _tile_zero(3);
        }
        for (std::size_t t = 0; t < 4; ++t) amx_k4_products<MB>(p, nb, 4 * b + t);
        if (b == 1) amx_k4_float<MB, true>(p, nb, 0, sums[0], facc);
        else if (b > 1) amx_k4_float<MB, false>(p, nb, b - 1, sums[(b - 1) & 1], facc);
    }
    amx_k4_store<MB>(sums[(p.blocks - 1) & 1]);
    if (p.blocks == 1) amx_k4_float<MB, true>(p, nb, 0, sums[0], facc);
    else amx_k4_float<MB, false>(p, nb, p.blocks - 1, sums[(p.blocks - 1) & 1], facc);
    for (std::size_t mb = 0; mb < MB; ++mb)
        for (std::size_t r = 0; r < amx_group; ++r) {
            const std::size_t j = (p.g + mb) * amx_group + r;
            if (j >= p.acts->m) return;
            Avx512::store(out + j * ldo + 16 * nb, _mm512_load_ps(facc + mb * c_tile + 16 * r), rows);
        }
}

// Every activation group, two at a time, against each weight half of the pack (ROWS <= 32 rows).
void amx_k4_groups(Panel p, float* out, std::size_t ldo, std::size_t rows) {
    const std::size_t groups = (p.acts->m + amx_group - 1) / amx_group;
    for (std::size_t nb = 0; 16 * nb < rows; ++nb) {
        const std::size_t here = rows - 16 * nb < 16 ? rows - 16 * nb : 16;
        for (p.g = 0; p.g < groups; p.g += 2) {
            if (p.g + 1 < groups) amx_k4_panel<2>(p, nb, out, ldo, here);
            else amx_k4_panel<1>(p, nb, out, ldo, here);
        }
    }
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
              const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack, Ahead ahead) {
    if (type == ggml_q6_K || !acts.tiles_at) return tile<Avx512>(type, w, row_bytes, rows, acts, out, ldo, pack);
    const bool k_types = acts.dot_type == ggml_q8_K, split = type == ggml_q4_K;  // q4_K, q5_K; q4_K: K4Layout
    const std::size_t blocks = acts.k / acts.block;
    const std::size_t half = split ? blocks * k4_block_bytes : tile_pack_bytes<Avx512>(type, acts.k);
    const std::size_t top = rows < 16 ? rows : 16;
    for (std::size_t nb = 0; 16 * nb < rows; ++nb) {
        const std::uint8_t* wn = w + 16 * nb * row_bytes;
        const std::size_t here = nb == 0 ? top : rows - 16;
        if (split) pack_q4_K_split(wn, row_bytes, here, blocks, pack + nb * half);
        else if (k_types) pack_K<Avx512, 32>(type, wn, row_bytes, here, blocks, pack + nb * half);
        else pack_small<Avx512>(type, wn, row_bytes, here, blocks, pack + nb * half, 0);
    }
    _tile_loadconfig(split ? &the_k4_tile_config : &the_tile_config);
    // AHEAD's lines spread over the tile products: one call per piece of each pair of groups (q4_K:
    // per pair of pieces, of each weight half)
    const std::size_t calls = (acts.m + 2 * amx_group - 1) / (2 * amx_group) * (acts.k / qk) / (split ? 2 : 1) *
                              (split && rows > 16 ? 2 : 1);
    const auto* first = reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(ahead.bytes) / 64 * 64);
    const std::size_t lines = ahead.bytes ? (reinterpret_cast<const char*>(ahead.bytes) + ahead.size - first + 63) / 64 : 0;
    Prefetcher prefetcher{first, first + 64 * lines, (lines + calls - 1) / calls};
    const Panel p{pack, half, &acts, 0, blocks, acts.k / qk, k_types, &prefetcher};
    if (split) amx_k4_groups(p, out, ldo, rows);
    else if (k_types) amx_groups<ggml_q4_K>(p, out, ldo, rows);  // q5_K
    else if (type == ggml_q8_0) amx_groups<ggml_q8_0>(p, out, ldo, rows);
    else if (type == ggml_q4_0) amx_groups<ggml_q4_0>(p, out, ldo, rows);
    else if (type == ggml_q5_0) amx_groups<ggml_q5_0>(p, out, ldo, rows);
    else if (type == ggml_q4_1) amx_groups<ggml_q4_1>(p, out, ldo, rows);
    else amx_groups<ggml_q5_1>(p, out, ldo, rows);
    _tile_release();
}

std::size_t tile_amx_bytes(std::uint32_t type, std::size_t k) {
    return 2 * (type == ggml_q4_K ? k / qk_k * k4_block_bytes : tile_pack_bytes<Avx512>(type, k));
}

std::size_t tile_avx512_vnni_bytes(std::uint32_t type, std::size_t k) { return tile_pack_bytes<Avx512>(type, k); }

void tile_avx512_vnni(std::uint32_t type, const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                      const QuantizedActs& acts, float* out, std::size_t ldo, std::uint8_t* pack, Ahead) {
    tile<Avx512>(type, w, row_bytes, rows, acts, out, ldo, pack);
}

}  // namespace attntrace::ggml

#endif  // __x86_64__
