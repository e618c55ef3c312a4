// scores -> mask -> softmax -> context: the attention stages between the projections, one named
// function per stage, run per (head, query block) on two paths:
//   weights kept: the whole (rows, Lk) block at once, in the weights buffer;
//   tiled: an online softmax over (rows, kKeyBlock) key blocks (the FlashAttention recurrence), so
//          memory is (rows, kKeyBlock) per thread whatever Lk is.
// Both give PyTorch's numbers, with one documented difference: a row whose keys are all masked
// gets zero weights and a zero context (PyTorch: NaN). A NaN score in an allowed key makes its
// row NaN, as in PyTorch, and such a row is not empty.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "attention_stages.hpp"
#include "fused_attention.hpp"
#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/weight_gemm.hpp"
#include "attntrace/tensor/threads.hpp"
#include "softmax_kernels.hpp"
#include "tile_pictures.hpp"
#include "attntrace/attention/detectors.hpp"

namespace attntrace::stages {
namespace {

// Query rows per task: one (kQueryBlock, Lk) block of scores per thread when the weights are not
// kept, so memory grows with Lk, not Lq*Lk.
constexpr std::size_t kQueryBlock = 256;
// Keys per block of the tiled path: a (kQueryBlock, kKeyBlock) block of scores stays in cache.
constexpr std::size_t kKeyBlock = 1024;

template <class T>
constexpr T minus_inf = -std::numeric_limits<T>::infinity();

template <class T>
bool has_nan(const T* x, std::size_t n) {
    return std::any_of(x, x + n, [](T v) { return std::isnan(v); });
}

// One task: query rows [i0, i0 + rows) of head n.
struct Block {
    std::size_t n = 0, i0 = 0, rows = 0;
};

// scores: S (rows, cols) := Q_n[i0 : i0+rows] · K_n[j0 : j0+cols]ᵀ · scale, S with leading dim cols;
// with a soft cap C > 0, then S := tanh(S / C) · C (Gemma 2's attn_logit_softcapping, before the
// masks: transformers models/gemma2/modeling_gemma2.py eager_attention_forward).
template <class T>
void scores(const HeadBatch<T>& hb, const Block& blk, std::size_t j0, std::size_t cols, T scale, T softcap, T* s) {
    gemm<T>(false, true, blk.rows, cols, hb.p, scale, hb.q + hb.q_off[blk.n] + blk.i0 * hb.ldq, hb.ldq,
            hb.k + hb.k_off[blk.n] + j0 * hb.ldk, hb.ldk, T(0), s, cols);
    if (softcap > T(0))
        for (std::size_t x = 0; x < blk.rows * cols; ++x) s[x] = std::tanh(s[x] / softcap) * softcap;
}

// mask: S (rows, cols) of keys [j0, j0 + cols) through the plan.
template <class T>
void mask(const MaskPlan<T>& masks, const Block& blk, std::size_t j0, std::size_t cols, T* s) {
    if (!masks.any()) return;
    for (std::size_t r = 0; r < blk.rows; ++r) masks.apply(s + r * cols, blk.n, blk.i0 + r, j0, j0 + cols);
}

// context: O_n[i0 : i0+rows] (rows, Pv) := P (rows, cols) · V_n[j0 : j0+cols] + beta · O.
template <class T>
void context(const HeadBatch<T>& hb, const Block& blk, std::size_t j0, std::size_t cols, const T* p, T beta) {
    gemm<T>(false, false, blk.rows, hb.pv, cols, T(1), p, cols, hb.v + hb.v_off[blk.n] + j0 * hb.ldv, hb.ldv, beta,
            hb.o + hb.o_off[blk.n] + blk.i0 * hb.ldo, hb.ldo);
}

// Row r of the block's context (Pv) set to X.
template <class T>
void fill_context_row(const HeadBatch<T>& hb, const Block& blk, std::size_t r, T x) {
    T* o = hb.o + hb.o_off[blk.n] + (blk.i0 + r) * hb.ldo;
    std::fill(o, o + hb.pv, x);
}

// ---- the weights-kept path ----------------------------------------------------------------------

enum class RowKind { allowed, empty, nan };

// softmax of one row W (Lk) in place, max-subtracted. Every key masked: zeros (empty). A NaN
// among the allowed scores: all NaN, as PyTorch.
template <class T>
RowKind softmax(T* w, std::size_t lk) {
    const T max = kernels::row_max(w, lk);  // ignores NaN
    if (max == minus_inf<T>) {
        const bool nan = has_nan(w, lk);
        std::fill(w, w + lk, nan ? std::numeric_limits<T>::quiet_NaN() : T(0));
        return nan ? RowKind::nan : RowKind::empty;
    }
    kernels::scale_row(w, lk, T(1) / kernels::exp_shift_sum(w, lk, max));  // a NaN makes the sum NaN
    return RowKind::allowed;
}

// Row ROW (query I) statistics from its weights W (Lk): entropy, most-attended key, its weight, the
// detector values (SQUARE: Lq == Lk). An empty row: 0, -1, 0; a NaN row: NaN, -1, NaN.
template <class T>
void record_row_stats(RowStats& stats, std::size_t row, const T* w, std::size_t lk, RowKind kind, std::size_t i,
                      bool square) {
    if (kind == RowKind::allowed && !std::isnan(w[0])) {  // the detectors: NaN (preset) for other rows
        const RowScores d = row_scores(w, i, lk, square);
        stats.previous_token[row] = d.previous_token, stats.diagonal[row] = d.diagonal;
        stats.first_token[row] = d.first_token;
    }
    double entropy = 0, best = 0;
    std::int64_t arg = -1;
    for (std::size_t j = 0; kind == RowKind::allowed && j < lk; ++j) {
        const double x = w[j];
        if (x > 0) entropy -= x * std::log(x);
        if (x > best) best = x, arg = static_cast<std::int64_t>(j);
    }
    if (kind == RowKind::nan || (kind == RowKind::allowed && std::isnan(w[0])))
        entropy = best = std::numeric_limits<double>::quiet_NaN(), arg = -1;
    stats.entropy[row] = entropy;
    stats.argmax[row] = arg;
    stats.max_weight[row] = best;
}

// Row I of plane N, weights W (Lk), into the pooled grid.
template <class T>
void pool_row(PooledSums& pooled, std::size_t n, std::size_t i, const T* w, std::size_t lk) {
    const std::size_t kb = pooled.grid().k_block;
    std::vector<double> bins(pooled.grid().cols, 0.0);
    for (std::size_t j = 0; j < lk; ++j) bins[j / kb] += double(w[j]);
    pooled.add_row(n, i, bins.data());
}

// The block's rows over every key at once, S (rows, Lk) being its rows of the weights buffer, or
// of ROWS (kQueryBlock * Lk, reused) when the weights are streamed to the sink.
template <class T>
std::size_t attend_block(const HeadBatch<T>& hb, const MaskPlan<T>& masks, T scale, T softcap, Kept<T>& kept,
                         const Block& blk, std::vector<T>& rows) {
    const std::size_t lk = hb.lk, at = (blk.n * hb.lq + blk.i0) * lk;
    if (!kept.weights) rows.resize(blk.rows * lk);
    T* s = kept.weights ? kept.weights->data() + at : rows.data();
    scores(hb, blk, 0, lk, scale, softcap, s);
    if (kept.scores) std::copy(s, s + blk.rows * lk, kept.scores->data() + at);
    mask(masks, blk, 0, lk, s);
    if (kept.masked_scores) std::copy(s, s + blk.rows * lk, kept.masked_scores->data() + at);
    std::array<bool, kQueryBlock> empty{};
    std::size_t empties = 0;
    for (std::size_t r = 0; r < blk.rows; ++r) {
        const RowKind kind = softmax(s + r * lk, lk);
        empty[r] = kind == RowKind::empty;
        empties += empty[r];
        if (kept.stats)
            record_row_stats(*kept.stats, blk.n * hb.lq + blk.i0 + r, s + r * lk, lk, kind, blk.i0 + r, hb.lq == lk);
        if (kept.pooled && kind == RowKind::allowed && !std::isnan(s[r * lk]))  // a NaN row adds nothing
            pool_row(*kept.pooled, blk.n, blk.i0 + r, s + r * lk, lk);
    }
    if (kept.sink) (*kept.sink)(at, s, blk.rows * lk);
    context(hb, blk, 0, lk, s, T(0));
    for (std::size_t r = 0; r < blk.rows; ++r)  // zero weights · a NaN or Inf in V: still zero
        if (empty[r]) fill_context_row(hb, blk, r, T(0));
    return empties;
}

// ---- the tiled path -----------------------------------------------------------------------------

// Per-thread state of the tiled path.
template <class T>
struct TileScratch {
    std::vector<T> s;        // (rows, kKeyBlock) scores, then exp(scores - running max)
    std::vector<T> row_max;  // (rows) running maximum m (NaN once a NaN score was seen)
    std::vector<T> row_sum;  // (rows) running sum l of exp(score - m)
    std::vector<T> row_dot;  // (rows) running sum of exp(score - m) * (score - m), for the entropy
    std::vector<std::int64_t> row_arg;  // (rows) the key holding the running maximum
    TilePictureRows<T> pictures{nullptr, nullptr, 0, false};  // pooled cells and detector values

    void reset(std::size_t rows) {
        s.resize(rows * kKeyBlock);
        row_max.assign(rows, minus_inf<T>);
        row_sum.assign(rows, T(0));
        row_dot.assign(rows, T(0));
        row_arg.assign(rows, -1);
        if (pictures.active()) pictures.start(rows);
    }
};

// softmax, online: row r's block of scores S (cols) for keys from j0 becomes exp(S - m') with
// m' = max(m, rowmax S), and l, the row's context O and the entropy sums are re-based on m'.
template <class T>
void online_softmax(const HeadBatch<T>& hb, const Block& blk, std::size_t r, std::size_t j0, T* row,
                    std::size_t cols, TileScratch<T>& t, bool stats) {
    const T block_max = kernels::row_max(row, cols);  // ignores NaN
    T m = std::max(t.row_max[r], block_max);          // NaN stays NaN
    if (m == minus_inf<T>) {                          // nothing allowed so far
        if (!has_nan(row, cols)) {
            std::fill(row, row + cols, T(0));  // this block adds nothing
            return;
        }
        m = std::numeric_limits<T>::quiet_NaN();  // a NaN score: the row is NaN from here on
    }
    const T correction = std::exp(t.row_max[r] - m);  // 0 on the first allowed block
    if (stats) {
        if (block_max > t.row_max[r])
            t.row_arg[r] = static_cast<std::int64_t>(j0 + (std::find(row, row + cols, block_max) - row));
        // re-base the running sum of e*(s - m) on the new maximum m
        if (t.row_sum[r] > T(0)) t.row_dot[r] = correction * (t.row_dot[r] + (t.row_max[r] - m) * t.row_sum[r]);
        t.row_sum[r] = t.row_sum[r] * correction + kernels::exp_shift_sum_dot(row, cols, m, &t.row_dot[r]);
    } else {
        t.row_sum[r] = t.row_sum[r] * correction + kernels::exp_shift_sum(row, cols, m);
    }
    t.row_max[r] = m;
    if (correction != T(1)) kernels::scale_row(hb.o + hb.o_off[blk.n] + (blk.i0 + r) * hb.ldo, hb.pv, correction);
    if (t.pictures.active()) t.pictures.add(r, blk.i0 + r, j0, row, cols, correction);  // same re-basing as O
}

// The end of the online softmax: O /= l, statistics from l and the running sums; an empty row
// (l = 0) gets a zero context. Returns the number of empty rows.
template <class T>
std::size_t finish_rows(const HeadBatch<T>& hb, const Block& blk, TileScratch<T>& t, RowStats* stats,
                        const NonFiniteValues& bad, std::size_t stop) {
    std::size_t empty = 0;
    for (std::size_t r = 0; r < blk.rows; ++r) {
        const T l = t.row_sum[r];
        if (l == T(0)) {
            fill_context_row(hb, blk, r, T(0));
            ++empty;
        } else {
            kernels::scale_row(hb.o + hb.o_off[blk.n] + (blk.i0 + r) * hb.ldo, hb.pv, T(1) / l);
            poison_skipped(hb.o + hb.o_off[blk.n] + (blk.i0 + r) * hb.ldo, bad, 0, stop);
        }
        if (stats) {  // w_j = e_j / l: entropy = ln l - sum e_j (s_j - m) / l; the top weight is 1 / l
            const std::size_t row = blk.n * hb.lq + blk.i0 + r;
            stats->entropy[row] = l == T(0) ? 0.0 : std::log(double(l)) - double(t.row_dot[r]) / double(l);
            stats->argmax[row] = l == T(0) || std::isnan(l) ? -1 : t.row_arg[r];
            stats->max_weight[row] = l == T(0) ? 0.0 : 1.0 / double(l);
        }
        if (t.pictures.active()) t.pictures.finish(r, blk.n, blk.i0 + r, blk.n * hb.lq + blk.i0 + r, l);
    }
    return empty;
}

// The block's rows over key blocks of kKeyBlock: for each, scores -> mask -> online softmax ->
// O += P·V_block.
template <class T>
std::size_t attend_block_tiled(const HeadBatch<T>& hb, const MaskPlan<T>& masks, T scale, T softcap, const Block& blk,
                               TileScratch<T>& t, RowStats* stats, const NonFiniteValues& bad) {
    t.reset(blk.rows);
    for (std::size_t r = 0; r < blk.rows; ++r) fill_context_row(hb, blk, r, T(0));
    // Causal and valid lengths: no key at or past `stop` is visible to any row of the block.
    std::size_t stop = 0;
    for (std::size_t r = 0; r < blk.rows; ++r) stop = std::max(stop, masks.key_end(blk.n, blk.i0 + r));
    for (std::size_t j0 = 0; j0 < stop; j0 += kKeyBlock) {
        const std::size_t cols = std::min(kKeyBlock, stop - j0);
        T* s = t.s.data();
        scores(hb, blk, j0, cols, scale, softcap, s);
        mask(masks, blk, j0, cols, s);
        for (std::size_t r = 0; r < blk.rows; ++r) online_softmax(hb, blk, r, j0, s + r * cols, cols, t, stats != nullptr);
        context(hb, blk, j0, cols, s, T(1));
    }
    return finish_rows(hb, blk, t, stats, bad, stop);
}

}  // namespace

template <class T>
NonFiniteValues nonfinite_values(const T* v, std::size_t ldv, std::size_t lk, std::size_t pv) {
    NonFiniteValues bad{std::vector<std::uint32_t>(pv, std::numeric_limits<std::uint32_t>::max()),
                        std::vector<std::uint32_t>(pv, 0), false};
    for (std::size_t j = 0; j < lk; ++j) {
        const T* row = v + j * ldv;
        bool finite = true;
#pragma omp simd reduction(&& : finite)
        for (std::size_t c = 0; c < pv; ++c) finite = finite && std::isfinite(row[c]);
        if (finite) continue;
        bad.any = true;
        for (std::size_t c = 0; c < pv; ++c)
            if (!std::isfinite(row[c])) bad.first[c] = std::min<std::uint32_t>(bad.first[c], std::uint32_t(j)), bad.last[c] = std::uint32_t(j);
    }
    return bad;
}

template <class T>
Kept<T> plan_kept(const Reporter<T>& rep, const AttentionOptions& options, const Shape& plane_shape) {
    Kept<T> kept;
    if (options.row_stats) {
        std::size_t rows = 1;
        for (std::size_t d = 0; d + 1 < plane_shape.size(); ++d) rows *= plane_shape[d];
        kept.stats = RowStats{Shape(plane_shape.begin(), plane_shape.end() - 1), RowValues<double>(rows),
                              RowValues<std::int64_t>(rows), RowValues<double>(rows)};
        const double nan = std::numeric_limits<double>::quiet_NaN();
        kept.stats->previous_token.assign(rows, nan);
        kept.stats->diagonal.assign(rows, nan);
        kept.stats->first_token.assign(rows, nan);
    }
    if (options.pooled_cells > 0 && plane_shape.size() >= 2)
        kept.pooled.emplace(Shape(plane_shape.begin(), plane_shape.end() - 2), plane_shape[plane_shape.size() - 2],
                            plane_shape.back(), options.pooled_cells);
    if (rep.wants("scores")) kept.scores = Array<T>::from_shape(plane_shape);
    if (rep.wants("masked_scores")) kept.masked_scores = Array<T>::from_shape(plane_shape);
    // The weights-kept path computes in the weights buffer, so any kept (Lq, Lk) stage needs it.
    if (options.need_weights || rep.wants("weights") || kept.scores || kept.masked_scores)
        kept.weights = Array<T>::from_shape(plane_shape);
    if (options.weights_sink) kept.sink = &options.weights_sink;  // from the weights buffer when there is one
    return kept;
}

template <class T>
std::size_t attend(const HeadBatch<T>& hb, const MaskPlan<T>& masks, T scale, T softcap, Kept<T>& kept,
                   std::size_t threads, const std::function<void(std::size_t, std::size_t)>& progress) {
    if constexpr (std::is_same_v<T, float>)  // scores, softmax and context in one pass of vector code
        if (runs_fused(hb, masks, softcap, kept)) return attend_fused(hb, masks, scale, kept, threads, progress);
    const std::size_t blocks = (hb.lq + kQueryBlock - 1) / kQueryBlock;
    const std::size_t tasks = hb.count() * blocks;
    if (tasks == 0) return 0;
    threads = std::max<std::size_t>(1, std::min(threads, tasks));
    std::vector<TileScratch<T>> tiles(kept.tiled() ? threads : 0);
    // Keys a block skips (causal, windows, valid lengths) with a non-finite value: NaN, as PyTorch.
    std::vector<NonFiniteValues> bad(hb.count());
    if (kept.tiled() && skips_keys(masks))
        for (std::size_t n = 0; n < hb.count(); ++n) bad[n] = nonfinite_values(hb.v + hb.v_off[n], hb.ldv, hb.lk, hb.pv);
    std::vector<std::vector<T>> streamed_rows(threads);  // per worker, reused; empty unless streamed
    std::vector<std::size_t> empty(threads, 0);
    RowStats* stats = kept.stats ? &*kept.stats : nullptr;
    for (auto& t : tiles) t.pictures = TilePictureRows<T>(kept.pooled ? &*kept.pooled : nullptr, stats, hb.lk, hb.lq == hb.lk);
    std::atomic<std::size_t> done{0};
    parallel_for(tasks, threads, [&](std::size_t task, std::size_t worker) {
        const std::size_t i0 = (task % blocks) * kQueryBlock;
        const Block blk{task / blocks, i0, std::min(kQueryBlock, hb.lq - i0)};
        empty[worker] += kept.tiled() ? attend_block_tiled(hb, masks, scale, softcap, blk, tiles[worker], stats, bad[blk.n])
                                      : attend_block(hb, masks, scale, softcap, kept, blk, streamed_rows[worker]);
        if (progress) progress(++done, tasks);
    });
    std::size_t total = 0;
    for (auto e : empty) total += e;
    return total;
}

namespace {

// y[r0:r1, 0:c1-c0] := x[r0:r1] · W[c0:c1]ᵀ + b[c0:c1], y at LDY (Y: where column c0's values go).
template <class T>
void project_block(const T* x, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1, const WeightInPlace<T>& w,
                   const T* b, T* y, std::size_t ldy) {
    if (b)
        for (std::size_t r = r0; r < r1; ++r) std::copy(b + c0, b + c1, y + r * ldy);
    const T* at = w.conv1d ? w.data + c0 : w.data + c0 * w.in;
    multiply_weight(x + r0 * w.in, w.in, r1 - r0, w.in, at, w.conv1d ? w.out : w.in, w.conv1d, c1 - c0,
                    b ? T(1) : T(0), y + r0 * ldy, ldy);
}

// The chunks of rows project_rows splits ROWS into: four per worker, so that a ROWS_DONE's work
// overlaps the rest, and none under 64 rows. Returns (chunks, rows per chunk).
std::pair<std::size_t, std::size_t> row_chunks(std::size_t rows, std::size_t threads, std::size_t per_worker = 4) {
    constexpr std::size_t min_rows = 64;  // below this a chunk is not worth a thread
    const std::size_t chunks = std::max<std::size_t>(1, std::min(threads * per_worker, rows / min_rows));
    return {chunks, (rows + chunks - 1) / chunks};
}

}  // namespace

template <class T>
void project_rows(const T* x, std::size_t rows, const WeightInPlace<T>& w, const T* b, T* y, std::size_t ldy,
                  std::size_t threads, const std::function<void(std::size_t, std::size_t)>& rows_done) {
    if (!rows_done && rows < w.out && threads > 1) {  // few rows: split W's rows, so each worker packs only its share
        split_product(rows, w.out, threads, [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
            project_block(x, r0, r1, c0, c1, w, b, y + c0, ldy);
        });
        return;
    }
    // the same split with or without ROWS_DONE, so a streamed output has the same bits as one written whole
    const auto [chunks, per_chunk] = row_chunks(rows, threads);
    const std::size_t per = per_chunk;  // clang before 16 cannot capture a structured binding in a lambda
    parallel_for(chunks, threads, [&](std::size_t c, std::size_t) {
        const std::size_t r0 = c * per, r1 = std::min(rows, r0 + per);
        if (r0 >= r1) return;
        project_block(x, r0, r1, 0, w.out, w, b, y, ldy);
        if (rows_done) rows_done(r0, r1);
    });
}

template <class T>
void project_rows_split(const T* x, std::size_t rows, const WeightInPlace<T>& w, const T* b, std::size_t split,
                        T* y1, T* y2, std::size_t threads) {
    // two chunks per worker (no ROWS_DONE to overlap): each chunk packs all of W again (medians of
    // 21 interleaved runs at L = 4096: 2 per worker 0.5-2 ms under 4, level with 1)
    const auto [chunks, per_chunk] = row_chunks(rows, threads, 2);
    const std::size_t per = per_chunk;  // as in project_rows
    parallel_for(chunks, threads, [&](std::size_t c, std::size_t) {
        const std::size_t r0 = c * per, r1 = std::min(rows, r0 + per);
        if (r0 >= r1) return;
        project_block(x, r0, r1, 0, split, w, b, y1, split);
        project_block(x, r0, r1, split, w.out, w, b, y2, w.out - split);
    });
}

template <class T>
bool runs_fused(const HeadBatch<T>& hb, const MaskPlan<T>& masks, T softcap, const Kept<T>& kept) {
    if constexpr (std::is_same_v<T, float>)
        return softcap <= T(0) && fused_applies(hb, kept, masks);  // soft-capping: the BLAS path
    else
        return false;
}

template <class T>
void project_rows(const T* x, std::size_t rows, const Array<T>& w, const std::optional<Array<T>>& b, T* y,
                  std::size_t ldy, std::size_t threads, const std::function<void(std::size_t, std::size_t)>& rows_done) {
    project_rows(x, rows, WeightInPlace<T>{w.data(), w.shape()[0], w.shape()[1], false}, b ? b->data() : nullptr, y, ldy,
                 threads, rows_done);
}

#define ATTNTRACE_STAGES(T)                                                                                    \
    template NonFiniteValues nonfinite_values(const T*, std::size_t, std::size_t, std::size_t);                \
    template Kept<T> plan_kept(const Reporter<T>&, const AttentionOptions&, const Shape&);                     \
    template std::size_t attend(const HeadBatch<T>&, const MaskPlan<T>&, T, T, Kept<T>&, std::size_t,          \
                                const std::function<void(std::size_t, std::size_t)>&);                        \
    template void project_rows(const T*, std::size_t, const Array<T>&, const std::optional<Array<T>>&, T*,     \
                               std::size_t, std::size_t, const std::function<void(std::size_t, std::size_t)>&); \
    template void project_rows(const T*, std::size_t, const WeightInPlace<T>&, const T*, T*, std::size_t,         \
                               std::size_t, const std::function<void(std::size_t, std::size_t)>&);          \
    template void project_rows_split(const T*, std::size_t, const WeightInPlace<T>&, const T*, std::size_t, T*, \
                                     T*, std::size_t);                                                         \
    template bool runs_fused(const HeadBatch<T>&, const MaskPlan<T>&, T, const Kept<T>&);
ATTNTRACE_STAGES(float)
ATTNTRACE_STAGES(double)

}  // namespace attntrace::stages
