// weight_product's AMX kernel (weight_gemm.hpp): float32 products at float32 accuracy on the AMX-BF16
// unit, by splitting every float into three bfloat16 pieces. This file alone is compiled with
// -mamx-tile -mamx-bf16 -mavx512bw; weight_gemm.cpp calls it only on a CPU that has them and where
// Linux grants this process the tile data.
//
// The split (the "bf16x9" / "bf16x6" of Henry, Tang and Heinecke, "Leveraging the bfloat16
// artificial intelligence datatype for higher-precision computations", ARITH 2019; NVIDIA's cuBLAS
// calls its version CUBLAS_COMPUTE_32F_EMULATED_16BFX9): a = hi + mid + lo exactly, each a bfloat16
// (8 significant bits) cut from a by truncation: hi = a with its low 16 bits cleared, mid the same of
// a - hi, lo = a - hi - mid (8 bits left, so a bfloat16 as it is). Every product of two pieces is
// exact in float32 and the tile unit adds them into float32 sums (TDPBF16PS: round to nearest even).
// Of the nine products of a·b six are kept: hi·hi, hi·mid, hi·lo, mid·hi, mid·mid, lo·hi; the three
// dropped (mid·lo, lo·mid, lo·lo) are below 2^-24 of |a·b|, under float32's own rounding of a product.
// Measured against float64 (tests/unit/test_weight_gemm.cpp, tests/bench/weight_gemm): errors of
// the same size as OpenBLAS's sgemm. What differs from float32 arithmetic: the tile unit treats
// bfloat16 denormals as zero and flushes denormal sums, so pieces below 2^-126 (those of floats
// below about 2^-110) count as zero; and a non-finite weight or input would split into NaN pieces
// (Inf - Inf), so a block of W's columns or of X holding one is multiplied by the FMA kernel.
//
// Layout: X is taken kRowBlock rows and kChunkK k at a time, each block split into tiles of 16 rows ×
// 32 k (three pieces each, 1 KB a tile); W is split kWideCols columns at a time into panels of 32
// (two B tiles of 16 k-pairs × 16 columns a piece and 32 k), for all the block's k; then every 32
// rows of X run over all of it into 2 × 2 C tiles of 16 × 16 sums that stay in the unit (stored to
// Y, and reloaded from it for the next block of k).
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attntrace/tensor/amx.hpp"
#include "attntrace/tensor/avx512_transpose.hpp"

namespace attntrace::weight_kernels {

void product_avx512(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, const float* w,
                    std::size_t ldw, bool conv1d, std::size_t out, float beta, float* y, std::size_t ldy);

namespace {

constexpr std::size_t kTileRows = 16;   // rows of a C or A tile; columns of a C tile
constexpr std::size_t kTileK = 32;      // k of an A tile (bfloat16 pairs: 16 dwords a row)
constexpr std::size_t kTileWords = kTileRows * kTileK;  // bfloat16 in a tile (1 KB)
constexpr std::size_t kPieces = 3;      // hi, mid, lo
constexpr std::size_t kPanelCols = 32;  // two B tiles
constexpr std::size_t kPrefetchRows = 16;  // a Conv1D W's rows read this far ahead
constexpr std::size_t kPrefetchK = 128;  // an (out, in) W's rows read this far ahead
constexpr std::size_t kWideCols = 64;  // columns of W split at a time (a Conv1D W's rows read 256 bytes at a time; 32 and 128 measured slower)
constexpr std::size_t kBlockRows = 32;  // two A tiles
constexpr std::size_t kChunkK = 768;    // k per block: X's split block (1.2 MB) and a panel's (144 KB) in L2
constexpr std::size_t kRowBlock = 256;  // rows of X split at a time
// The pieces multiplied, as (piece of X, piece of W), grouped by X's piece so its tiles load once.
constexpr std::size_t kTerms[][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {2, 0}};

constexpr TileConfig tile_config() {  // 0-3: C (16, 16) float; 4-5: A (16, 32) bf16; 6-7: B (16, 16 x 2) bf16
    TileConfig c;
    for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
    return c;
}
// (A constant in memory: GCC does not see ldtilecfg read a local's stores, and may drop them.)
constexpr TileConfig the_tile_config = tile_config();

__mmask16 first_lanes(std::size_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// The three pieces of 16 floats, each as a float whose low 16 bits are zero.
struct Pieces {
    __m512i p[kPieces];
};
Pieces split(__m512 a) {
    const __m512i top = _mm512_set1_epi32(int(0xFFFF0000u));
    Pieces s;
    s.p[0] = _mm512_and_si512(_mm512_castps_si512(a), top);
    const __m512 r1 = _mm512_sub_ps(a, _mm512_castsi512_ps(s.p[0]));
    s.p[1] = _mm512_and_si512(_mm512_castps_si512(r1), top);
    s.p[2] = _mm512_castps_si512(_mm512_sub_ps(r1, _mm512_castsi512_ps(s.p[1])));  // 8 bits left: exact
    return s;
}

// The bfloat16 of 32 floats' pieces in order (the high halves of LO's and HI's 16 dwords).
__m512i high_halves(__m512i lo, __m512i hi) {
    const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                         25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_permutex2var_epi16(lo, odd, hi);
}

__mmask16 finite_mask(__m512 v) { return _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(INFINITY), _CMP_LT_OQ); }
bool finite(__m512 v) { return finite_mask(v) == 0xffff; }

// A: X's ROWS × IN split, tiles [row tile][k tile][piece] of 16 rows × 32 bfloat16 (zeros past
// ROWS, padded to whole blocks of 32 rows, and past IN). False when X holds a non-finite value.
bool split_rows(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, std::size_t k_tiles,
                std::uint16_t* a) {
    const std::size_t row_tiles = (rows + kBlockRows - 1) / kBlockRows * 2;
    __mmask16 finite_lanes = 0xffff;
    for (std::size_t rt = 0; rt < row_tiles; ++rt)
        for (std::size_t kt = 0; kt < k_tiles; ++kt)
            for (std::size_t i = 0; i < kTileRows; ++i) {
                const std::size_t r = rt * kTileRows + i, k = kt * kTileK;
                __m512 v[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
                if (r < rows)
                    for (std::size_t h = 0; h < 2; ++h)
                        if (k + 16 * h < in)
                            v[h] = _mm512_maskz_loadu_ps(first_lanes(in - k - 16 * h), x + r * ldx + k + 16 * h);
                finite_lanes &= finite_mask(v[0]) & finite_mask(v[1]);
                const Pieces lo = split(v[0]), hi = split(v[1]);
                for (std::size_t p = 0; p < kPieces; ++p)
                    _mm512_store_si512(a + ((rt * k_tiles + kt) * kPieces + p) * kTileWords + i * kTileK,
                                       high_halves(lo.p[p], hi.p[p]));
            }
    return finite_lanes == 0xffff;
}

// B tile's address: [panel][k tile][piece][column tile of the panel], 16 k-pairs × 16 columns × 2
// bfloat16; CT counts the column tiles of a wide block (two a panel).
std::uint16_t* b_tile(std::uint16_t* b, std::size_t k_tiles, std::size_t kt, std::size_t p, std::size_t ct) {
    return b + (ct / 2 * k_tiles * kPieces * 2 + (kt * kPieces + p) * 2 + ct % 2) * kTileWords;
}

// The B tiles of column tile CT of an (out, in) W (its rows from W): each row's 32 k split, then
// the 16 × 16 dword pairs transposed so that a tile's row is one k-pair across the columns.
bool split_panel_out_in(const float* w, std::size_t ldw, std::size_t in, std::size_t cols, std::size_t k_tiles,
                        std::size_t ct, std::uint16_t* b) {
    for (std::size_t kt = 0; kt < k_tiles; ++kt) {
        __m512i rows[kPieces][16];
        for (std::size_t n = 0; n < 16; ++n) {
            __m512 v[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
            for (std::size_t h = 0; h < 2; ++h) {
                const std::size_t k = kt * kTileK + 16 * h;
                if (n < cols && k < in) v[h] = _mm512_maskz_loadu_ps(first_lanes(in - k), w + n * ldw + k);
                if (n < cols && k + kPrefetchK < in)  // 16 rows read side by side: each its own stream
                    _mm_prefetch(reinterpret_cast<const char*>(w + n * ldw + k + kPrefetchK), _MM_HINT_T0);
            }
            if (!finite(v[0]) || !finite(v[1])) return false;
            const Pieces lo = split(v[0]), hi = split(v[1]);
            for (std::size_t p = 0; p < kPieces; ++p) rows[p][n] = high_halves(lo.p[p], hi.p[p]);
        }
        for (std::size_t p = 0; p < kPieces; ++p) {
            transpose16(rows[p]);
            for (std::size_t kp = 0; kp < 16; ++kp)
                _mm512_store_si512(b_tile(b, k_tiles, kt, p, ct) + kp * 32, rows[p][kp]);
        }
    }
    return true;
}

// The B tiles of a Conv1D W (in, out)'s COLS (at most kWideCols) columns from W: rows 2 kp and
// 2 kp + 1 of W interleaved into tile row kp, each row's columns read at once.
bool split_wide_conv1d(const float* w, std::size_t ldw, std::size_t in, std::size_t cols, std::size_t k_tiles,
                       std::uint16_t* b) {
    const __m512i top = _mm512_set1_epi32(int(0xFFFF0000u));
    const std::size_t col_tiles = (cols + 15) / 16;
    for (std::size_t kt = 0; kt < k_tiles; ++kt)
        for (std::size_t kp = 0; kp < 16; ++kp) {
            const std::size_t k = kt * kTileK + 2 * kp;
            if (k + kPrefetchRows + 1 < in)  // the rows kPrefetchRows on: each is in a page of its own
                for (std::size_t c = 0; c < cols; c += 16) {
                    _mm_prefetch(reinterpret_cast<const char*>(w + (k + kPrefetchRows) * ldw + c), _MM_HINT_T0);
                    _mm_prefetch(reinterpret_cast<const char*>(w + (k + kPrefetchRows + 1) * ldw + c), _MM_HINT_T0);
                }
            for (std::size_t ct = 0; ct < col_tiles; ++ct) {
                const __mmask16 m = first_lanes(cols - 16 * ct);
                const __m512 even = k < in ? _mm512_maskz_loadu_ps(m, w + k * ldw + 16 * ct) : _mm512_setzero_ps();
                const __m512 odd = k + 1 < in ? _mm512_maskz_loadu_ps(m, w + (k + 1) * ldw + 16 * ct) : _mm512_setzero_ps();
                if (!finite(even) || !finite(odd)) return false;
                const Pieces e = split(even), o = split(odd);
                for (std::size_t p = 0; p < kPieces; ++p)
                    _mm512_store_si512(b_tile(b, k_tiles, kt, p, ct) + kp * 32,
                                       _mm512_or_si512(_mm512_and_si512(o.p[p], top), _mm512_srli_epi32(e.p[p], 16)));
            }
            if (col_tiles % 2)  // the last panel's second tile: zeros
                for (std::size_t p = 0; p < kPieces; ++p)
                    _mm512_store_si512(b_tile(b, k_tiles, kt, p, col_tiles) + kp * 32, _mm512_setzero_si512());
        }
    return true;
}

// The B tiles of W's COLS (at most kWideCols) columns from W (at its column or row 0); false where
// one of them is not finite.
bool split_wide(const float* w, std::size_t ldw, bool conv1d, std::size_t in, std::size_t cols, std::size_t k_tiles,
                std::uint16_t* b) {
    if (conv1d) return split_wide_conv1d(w, ldw, in, cols, k_tiles, b);
    const std::size_t col_tiles = (cols + kPanelCols - 1) / kPanelCols * 2;
    for (std::size_t ct = 0; ct < col_tiles; ++ct)
        if (!split_panel_out_in(w + std::min(16 * ct, cols) * ldw, ldw, in, cols > 16 * ct ? cols - 16 * ct : 0, k_tiles,
                                ct, b))
            return false;
    return true;
}

// C tile T := Y's 16 × 16 block at (R, N) (zeros past ROWS and COLS), or zeros when ZERO.
void load_c(int t, const float* y, std::size_t ldy, std::size_t rows, std::size_t cols, bool zero, float* scratch) {
    if (zero) {
        if (t == 0) _tile_zero(0);
        if (t == 1) _tile_zero(1);
        if (t == 2) _tile_zero(2);
        if (t == 3) _tile_zero(3);
        return;
    }
    const float* from = y;
    std::size_t stride = ldy * sizeof(float);
    if (rows < kTileRows || cols < kTileRows) {
        for (std::size_t i = 0; i < kTileRows; ++i)
            _mm512_store_ps(scratch + i * 16, i < rows ? _mm512_maskz_loadu_ps(first_lanes(cols), y + i * ldy)
                                                       : _mm512_setzero_ps());
        from = scratch, stride = 64;
    }
    if (t == 0) _tile_loadd(0, from, stride);
    if (t == 1) _tile_loadd(1, from, stride);
    if (t == 2) _tile_loadd(2, from, stride);
    if (t == 3) _tile_loadd(3, from, stride);
}

// Y's 16 × 16 block := C tile T (ROWS × COLS of it).
void store_c(int t, float* y, std::size_t ldy, std::size_t rows, std::size_t cols, float* scratch) {
    const bool whole = rows >= kTileRows && cols >= kTileRows;
    float* to = whole ? y : scratch;
    const std::size_t stride = whole ? ldy * sizeof(float) : 64;
    if (t == 0) _tile_stored(0, to, stride);
    if (t == 1) _tile_stored(1, to, stride);
    if (t == 2) _tile_stored(2, to, stride);
    if (t == 3) _tile_stored(3, to, stride);
    if (!whole)
        for (std::size_t i = 0; i < std::min(rows, kTileRows); ++i)
            _mm512_mask_storeu_ps(y + i * ldy, first_lanes(cols), _mm512_load_ps(scratch + i * 16));
}

// The six products of one k tile into the 2 × 2 C tiles: A's row tiles A0 (rows 0-15) and A0 + 1
// tile's pieces, B's two column tiles.
void six_products(const std::uint16_t* a0, std::size_t a_row_tile_words, const std::uint16_t* b, std::size_t kt) {
    std::size_t loaded = kPieces;
    for (const auto& term : kTerms) {
        if (term[0] != loaded) {
            loaded = term[0];
            _tile_loadd(4, a0 + loaded * kTileWords, 64);
            _tile_loadd(5, a0 + a_row_tile_words + loaded * kTileWords, 64);
        }
        _tile_loadd(6, b + ((kt * kPieces + term[1]) * 2 + 0) * kTileWords, 64);
        _tile_loadd(7, b + ((kt * kPieces + term[1]) * 2 + 1) * kTileWords, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
}

// Y[:, N0 : N0 + COLS] (+)= X · the panel B, 32 rows at a time over all the k tiles (the C tiles
// stay in the unit: storing and reloading them every few k tiles waited on its pipeline).
void panel_products(const std::uint16_t* a, std::size_t rows, std::size_t k_tiles, const std::uint16_t* b,
                    std::size_t cols, bool add, float* y, std::size_t ldy) {
    alignas(64) float scratch[kTileRows * 16];
    const std::size_t a_row_tile_words = k_tiles * kPieces * kTileWords;
    for (std::size_t r = 0; r < rows; r += kBlockRows) {
        for (int t = 0; t < 4; ++t) {
            const std::size_t tr = r + 16 * std::size_t(t >> 1), tc = 16 * std::size_t(t & 1);
            load_c(t, y + tr * ldy + tc, ldy, tr < rows ? rows - tr : 0, tc < cols ? cols - tc : 0, !add, scratch);
        }
        const std::uint16_t* a_block = a + (r / kTileRows) * a_row_tile_words;
        for (std::size_t kt = 0; kt < k_tiles; ++kt)
            six_products(a_block + kt * kPieces * kTileWords, a_row_tile_words, b, kt);
        for (int t = 0; t < 4; ++t) {
            const std::size_t tr = r + 16 * std::size_t(t >> 1), tc = 16 * std::size_t(t & 1);
            if (tr < rows && tc < cols) store_c(t, y + tr * ldy + tc, ldy, rows - tr, cols - tc, scratch);
        }
    }
}

// A 64-byte aligned store of N bfloat16 for this thread (the tiles' rows are 64 bytes).
std::uint16_t* tile_store(std::vector<std::uint16_t>& v, std::size_t n) {
    v.resize(n + 32);
    return reinterpret_cast<std::uint16_t*>((reinterpret_cast<std::uintptr_t>(v.data()) + 63) & ~std::uintptr_t(63));
}

// Y's ROWS (at most kRowBlock) (+)= X[:, K0 : K0 + KC] · W[K0 : K0 + KC]ᵀ, ADD: onto Y, else over it.
void block_products(const float* x, std::size_t ldx, std::size_t rows, std::size_t kc, const float* w,
                    std::size_t ldw, bool conv1d, std::size_t out, bool add, float* y, std::size_t ldy) {
    static thread_local std::vector<std::uint16_t> a_store, b_store;
    const std::size_t k_tiles = std::max<std::size_t>((kc + kTileK - 1) / kTileK, 1);
    const std::size_t row_tiles = (rows + kBlockRows - 1) / kBlockRows * 2;
    std::uint16_t* a = tile_store(a_store, row_tiles * k_tiles * kPieces * kTileWords);
    const std::size_t panel_words = k_tiles * kPieces * 2 * kTileWords;
    std::uint16_t* b = tile_store(b_store, kWideCols / kPanelCols * panel_words);
    if (!split_rows(x, ldx, rows, kc, k_tiles, a)) {  // a non-finite input: float32 arithmetic for this block
        product_avx512(x, ldx, rows, kc, w, ldw, conv1d, out, add ? 1.0f : 0.0f, y, ldy);
        return;
    }
    for (std::size_t n = 0; n < out; n += kWideCols) {
        const std::size_t cols = std::min(kWideCols, out - n);
        if (split_wide(conv1d ? w + n : w + n * ldw, ldw, conv1d, kc, cols, k_tiles, b)) {
            for (std::size_t c = 0; c < cols; c += kPanelCols)
                panel_products(a, rows, k_tiles, b + c / kPanelCols * panel_words, std::min(kPanelCols, cols - c), add,
                               y + n + c, ldy);
        } else {  // a non-finite weight: float32 arithmetic for these columns and this block of k
            product_avx512(x, ldx, rows, kc, conv1d ? w + n : w + n * ldw, ldw, conv1d, cols, add ? 1.0f : 0.0f,
                           y + n, ldy);
            _tile_loadconfig(&the_tile_config);
        }
    }
}

}  // namespace

// Y (ROWS, OUT) := X · Wᵀ + BETA · Y on the tile unit, X's rows kRowBlock at a time and k kChunkK at
// a time (the block's split X and a panel's split W stay in L2); false, having done nothing, where
// BETA is neither 0 nor 1 (the caller runs the FMA kernel). A block of X (rows and k) holding a
// non-finite value, or a block of W's columns, is multiplied by the FMA kernel (from that block of k
// on, added to what the tiles summed before it: Inf and NaN come out as float32 arithmetic gives them).
bool product_amx(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, const float* w,
                 std::size_t ldw, bool conv1d, std::size_t out, float beta, float* y, std::size_t ldy) {
    if (beta != 0.0f && beta != 1.0f) return false;
    for (std::size_t r = 0; r < rows; r += kRowBlock) {
        _tile_loadconfig(&the_tile_config);
        for (std::size_t k = 0; k < std::max<std::size_t>(in, 1); k += kChunkK)
            block_products(x + r * ldx + k, ldx, std::min(kRowBlock, rows - r), std::min(kChunkK, in - k),
                           conv1d ? w + k * ldw : w + k, ldw, conv1d, out, k > 0 || beta == 1.0f, y + r * ldy, ldy);
        _tile_release();
    }
    return true;
}

}  // namespace attntrace::weight_kernels
#endif
