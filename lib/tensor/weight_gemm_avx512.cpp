// weight_product's AVX-512F kernels (weight_gemm.hpp). This file alone is compiled with -mavx512f;
// weight_gemm.cpp calls it only on a CPU that has it. Y (rows, out) is made by blocks of 512 rows,
// in each by chunks of 384 of its columns, in each by blocks of 192 k, each cut in panels of 48
// columns: W's panel (192 k × 48 columns) is copied into a 36 KB buffer that stays in L1 (a Conv1D
// W's rows copied as they are, an (out, in) W's transposed 16 × 16 in registers) and used by every
// row of the block, 8 rows × 3 vectors a tile (24 accumulators, X[r, k] broadcast against
// W[k, n:n+48]). Each weight is read from memory once per block of rows, 36 KB at a time, with no
// pass over all of it before the products start (OpenBLAS's packing). (Fetching the next panel into
// L2 with prefetch instructions while one is used was measured and made no difference: the
// hardware's prefetchers already follow the panel's rows.)
// (Blocks of 128 and 256 k measured within 2% of 192 in the whole model's CPU time. Without the
// blocks of rows, 4096 rows × 512 in × 1536 out ran at 167 GFLOP/s on one Zen 5 core against 187
// with them (medians of 30 interleaved calls): X's rows for a block of k and Y's chunk no longer
// stayed in L2. Chunks of 384 columns against 768: 0-2% faster at 256 rows, where the blocks of rows
// change nothing.) Sums: k in blocks of 192 in order, within a block k in order, one fused
// multiply-add each.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>
#include <vector>

#include "attntrace/tensor/avx512_transpose.hpp"
#include "attntrace/tensor/buffer.hpp"

namespace attntrace::weight_kernels {
namespace {

constexpr std::size_t kLanes = 16;
// A tile's rows and column vectors; W is taken kPanelK k at a time, 48 columns a panel.
constexpr std::size_t kTileRows = 8, kTileColVectors = 3, kPanelCols = kTileColVectors * kLanes, kPanelK = 192;
// ... and Y kChunkCols columns of kBlockRows rows at a time, which stay in L2 while all of W's
// blocks of k add to them; W's panels are packed again for each block of rows.
constexpr std::size_t kChunkCols = 8 * kPanelCols, kBlockRows = 512;

// Y (R, 16 NV, the last vector's columns LAST) := X's R rows (at LDX, K of them) · WP (K, 48) +
// beta · Y; WP is a packed panel (rows of 48 floats, zeros past the columns).
template <std::size_t R, std::size_t NV>
void tile_cols_major(const float* x, std::size_t ldx, std::size_t kc, const float* wp, __mmask16 last, float beta,
                     float* y, std::size_t ldy) {
    __m512 sums[R][NV];  // sums[r][c]: Y[r, 16 c .. 16 c + 15]
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < NV; ++c) sums[r][c] = _mm512_setzero_ps();
    for (std::size_t k = 0; k < kc; ++k) {
        __m512 wv[NV];
        for (std::size_t c = 0; c < NV; ++c) wv[c] = _mm512_loadu_ps(wp + k * kPanelCols + c * kLanes);
        for (std::size_t r = 0; r < R; ++r) {
            const __m512 xr = _mm512_set1_ps(x[r * ldx + k]);
            for (std::size_t c = 0; c < NV; ++c) sums[r][c] = _mm512_fmadd_ps(xr, wv[c], sums[r][c]);
        }
    }
    const __m512 b = _mm512_set1_ps(beta);
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < NV; ++c) {
            float* yc = y + r * ldy + c * kLanes;
            const __mmask16 m = c + 1 < NV ? __mmask16(0xffff) : last;
            const __m512 s = beta == 0.0f ? sums[r][c] : _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m, yc), sums[r][c]);
            _mm512_mask_storeu_ps(yc, m, s);
        }
}

using ColsTile = void (*)(const float*, std::size_t, std::size_t, const float*, __mmask16, float, float*, std::size_t);

template <std::size_t... R, std::size_t... V>
constexpr auto cols_tiles(std::index_sequence<R...>, std::index_sequence<V...>) {
    std::array<std::array<ColsTile, kTileColVectors>, kTileRows> table{};
    const auto row = [&]<std::size_t NR>(std::integral_constant<std::size_t, NR>) {
        table[NR - 1] = {&tile_cols_major<NR, V + 1>...};
    };
    (row(std::integral_constant<std::size_t, R + 1>{}), ...);
    return table;
}
const auto kColsTiles = cols_tiles(std::make_index_sequence<kTileRows>{}, std::make_index_sequence<kTileColVectors>{});

// The first N lanes of a vector (all 16 for N >= 16).
__mmask16 first_lanes(std::size_t n) { return n >= kLanes ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// WP (KC, 48) := W[0:KC, 0:COLS] (at LDW), zeros past COLS.
void pack_panel(const float* w, std::size_t ldw, std::size_t kc, std::size_t cols, float* wp) {
    for (std::size_t k = 0; k < kc; ++k)
        for (std::size_t c = 0; c < kPanelCols; c += kLanes)
            _mm512_storeu_ps(wp + k * kPanelCols + c,
                             _mm512_maskz_loadu_ps(first_lanes(cols > c ? cols - c : 0), w + k * ldw + c));
}

// WP (KC, 48) := W[0:COLS, 0:KC]ᵀ, W (out, in) at LDW, zeros past COLS: 16 × 16 blocks transposed.
void pack_panel_transposed(const float* w, std::size_t ldw, std::size_t kc, std::size_t cols, float* wp) {
    for (std::size_t c = 0; c < kPanelCols; c += kLanes)
        for (std::size_t k = 0; k < kc; k += kLanes) {
            const __mmask16 km = first_lanes(kc - k);
            __m512 block[kLanes];  // block[i]: W[c + i, k .. k + 15]
            for (std::size_t i = 0; i < kLanes; ++i)
                block[i] = c + i < cols ? _mm512_maskz_loadu_ps(km, w + (c + i) * ldw + k) : _mm512_setzero_ps();
            transpose16(block);
            for (std::size_t i = 0; i < std::min(kLanes, kc - k); ++i) _mm512_storeu_ps(wp + (k + i) * kPanelCols + c, block[i]);
        }
}

// This thread's (kPanelK, 48) panel buffer (64-byte aligned, from allocate_buffer), made at its
// first product. (As a thread_local array it was 36 KiB of static TLS, which every thread, the
// process's first one included, had zeroed at its start, products or not: 9 page faults of each
// start-up, docs/performance.md.)
float* thread_panel() {
    thread_local std::vector<float, BufferAllocator<float>> panel(kPanelK * kPanelCols);
    return panel.data();
}

// Y (ROWS, OUT) := X · Wᵀ + beta · Y, W (OUT, IN) at LDW or with CONV1D (IN, OUT), ROWS <= kBlockRows:
// by chunks of Y's columns, in each by blocks of kPanelK k, each cut in panels of 48 columns packed
// into L1 and used by all the rows.
void product_panels(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, const float* w,
                    std::size_t ldw, bool conv1d, std::size_t out, float beta, float* y, std::size_t ldy) {
    float* const panel = thread_panel();
    for (std::size_t n0 = 0; n0 < out; n0 += kChunkCols)
        for (std::size_t k0 = 0; k0 < std::max<std::size_t>(in, 1); k0 += kPanelK) {
            const std::size_t kc = std::min(kPanelK, in - k0);
            const float b = k0 == 0 ? beta : 1.0f;  // later blocks add to the sums so far
            for (std::size_t n = n0; n < std::min(out, n0 + kChunkCols); n += kPanelCols) {
                const std::size_t cols = std::min(kPanelCols, out - n), nv = (cols + kLanes - 1) / kLanes;
                const __mmask16 last = first_lanes(cols - (nv - 1) * kLanes);
                if (conv1d) pack_panel(w + k0 * ldw + n, ldw, kc, cols, panel);
                else pack_panel_transposed(w + n * ldw + k0, ldw, kc, cols, panel);
                for (std::size_t r = 0; r < rows; r += kTileRows)
                    kColsTiles[std::min(kTileRows, rows - r) - 1][nv - 1](x + r * ldx + k0, ldx, kc, panel, last, b,
                                                                          y + r * ldy + n, ldy);
            }
        }
}

}  // namespace

void product_avx512(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, const float* w,
                    std::size_t ldw, bool conv1d, std::size_t out, float beta, float* y, std::size_t ldy) {
    for (std::size_t r0 = 0; r0 < rows; r0 += kBlockRows)
        product_panels(x + r0 * ldx, ldx, std::min(kBlockRows, rows - r0), in, w, ldw, conv1d, out, beta, y + r0 * ldy,
                       ldy);
}

}  // namespace attntrace::weight_kernels
#endif
