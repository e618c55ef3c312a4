#pragma once
// The stages of the forward pass that mha and sdpa share (internal to lib/attention). Legend as in
// attention.hpp: B batch, Lq/Lk query/key lengths, H heads, G kv heads, P head dim, Pv value head
// dim, N the number of independent heads (B*H for mha, the product of Q's leading dims for sdpa).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <functional>
#include <optional>
#include <vector>

#include "attntrace/attention/attention.hpp"
#include "attntrace/attention/masks.hpp"
#include "attntrace/attention/pooled.hpp"
#include "attntrace/attention/stage_report.hpp"
#include "attntrace/tensor/errors.hpp"

namespace attntrace::stages {

// N attention problems ("heads"): head n reads Q_n (Lq, P) at q + q_off[n] with leading dim ldq,
// K_n (Lk, P), V_n (Lk, Pv) likewise, and writes its context (Lq, Pv) at o + o_off[n], ldo.
template <class T>
struct HeadBatch {
    std::size_t lq = 0, lk = 0, p = 0, pv = 0;
    const T* q = nullptr;
    const T* k = nullptr;
    const T* v = nullptr;
    T* o = nullptr;
    std::size_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;
    std::vector<std::size_t> q_off, k_off, v_off, o_off;  // (N) each
    std::size_t count() const { return q_off.size(); }
};

// The (N, Lq, Lk) stages kept for the caller and the observer, and the (N, Lq) row statistics.
template <class T>
struct Kept {
    std::optional<Array<T>> scores;         // (N, Lq, Lk) before masks
    std::optional<Array<T>> masked_scores;  // (N, Lq, Lk) after masks
    std::optional<Array<T>> weights;        // (N, Lq, Lk); the weights-kept path computes in it
    std::optional<RowStats> stats;          // (N, Lq) rows' entropy, most-attended key, detector values
    std::optional<PooledSums> pooled;       // (N, <= cells, <= cells) for pictures, on both paths
    // Weights streamed instead of kept (AttentionOptions::weights_sink); null when not.
    const std::function<void(std::size_t, const void*, std::size_t)>* sink = nullptr;

    // Nothing (Lq, Lk)-sized kept or streamed: the tiled path.
    bool tiled() const { return !weights && !sink; }
    AttentionReport<T> report() {
        return {scores ? &*scores : nullptr, masked_scores ? &*masked_scores : nullptr, weights ? &*weights : nullptr};
    }
};

// What to keep for PLANE_SHAPE (lead..., Lq, Lk): what the options and the observer ask for.
template <class T>
Kept<T> plan_kept(const Reporter<T>& rep, const AttentionOptions& options, const Shape& plane_shape);

// Whether attend runs the fused kernels (float, no soft cap, fused_applies) on heads of HB's Lq
// and Lk: each task then reads a panel's q rows before it writes their context, so the context may
// overwrite q where both are the same head's columns of the same rows (mha's context_over_q).
template <class T>
bool runs_fused(const HeadBatch<T>& hb, const MaskPlan<T>& masks, T softcap, const Kept<T>& kept);

// scores -> mask -> softmax -> context for every head, threaded over (head, query block); returns
// the number of empty rows (every key masked). Tiled (online softmax over key blocks) unless KEPT
// holds weights. SOFTCAP > 0: the scores soft-capped, tanh(s / softcap) * softcap, before the masks
// (on the BLAS kernels: the fused kernels do not cap).
// PROGRESS (may be empty) is called as (tasks done, tasks) from the worker threads.
template <class T>
std::size_t attend(const HeadBatch<T>& heads, const MaskPlan<T>& masks, T scale, T softcap, Kept<T>& kept,
                   std::size_t threads,
                   const std::function<void(std::size_t, std::size_t)>& progress = {});

// y (rows, W.rows) := x (rows, W.cols) · Wᵀ + b, written at Y with leading dim LDY; the rows are
// split over THREADS. ROWS_DONE (may be empty) is called as (first row, end row) from the worker
// that computed them, for each block of rows as soon as it is done (about a quarter of a worker's
// share), so that it overlaps the rest. Without ROWS_DONE and with fewer rows than W has, W's rows
// are split instead (split_product), so no worker packs all of W.
template <class T>
void project_rows(const T* x, std::size_t rows, const Array<T>& w, const std::optional<Array<T>>& b, T* y,
                  std::size_t ldy, std::size_t threads,
                  const std::function<void(std::size_t, std::size_t)>& rows_done = {});

// The same with W where it lies ((out, in), or (in, out) as GPT-2's Conv1D stores it) and its
// bias B (out) as a pointer (or null).
template <class T>
void project_rows(const T* x, std::size_t rows, const WeightInPlace<T>& w, const T* b, T* y, std::size_t ldy,
                  std::size_t threads, const std::function<void(std::size_t, std::size_t)>& rows_done = {});


// project_rows for one weight whose output columns go to two buffers: y1 (rows, SPLIT) at Y1 and
// y2 (rows, W.out - SPLIT) at Y2, each with its width as leading dim, in project_rows' row chunks.
template <class T>
void project_rows_split(const T* x, std::size_t rows, const WeightInPlace<T>& w, const T* b, std::size_t split,
                        T* y1, T* y2, std::size_t threads);

// For each value column c of one head's V (Lk, Pv), the first and the last key j whose V[j, c] is
// not finite (first > last: none). The tiled paths skip keys no row of a block can see; weights @ V
// over every key, as PyTorch computes it, gives 0 · Inf = NaN there, and poison_skipped says so.
struct NonFiniteValues {
    std::vector<std::uint32_t> first, last;  // (Pv)
    bool any = false;
};
template <class T>
NonFiniteValues nonfinite_values(const T* v, std::size_t ldv, std::size_t lk, std::size_t pv);

// Whether MASKS can leave keys out of a block's products: causal, windows, valid lengths.
template <class T>
bool skips_keys(const MaskPlan<T>& masks) {
    return masks.causal || masks.visibility.any() || masks.valid_lens;
}

// The context row O (Pv) of a row that is not empty, whose product covered keys [BEGIN, END): NaN
// in each column where a key outside them holds a non-finite value.
template <class T>
void poison_skipped(T* o, const NonFiniteValues& bad, std::size_t begin, std::size_t end) {
    if (!bad.any) return;
    for (std::size_t c = 0; c < bad.first.size(); ++c)
        if (bad.first[c] <= bad.last[c] && (bad.first[c] < begin || bad.last[c] >= end))
            o[c] = std::numeric_limits<T>::quiet_NaN();
}

// The options' soft cap (0: none); UsageError "softcap: ..." unless it is positive and finite.
template <class T>
T checked_softcap(const AttentionOptions& options) {
    if (!options.softcap) return T(0);
    const double c = *options.softcap;
    if (!(c > 0) || !std::isfinite(c))
        throw UsageError("softcap: " + std::to_string(c) + " is not a positive number (the scores become tanh(s / c) * c)");
    return T(c);
}

// 1/sqrt(P), or 1 for P = 0.
template <class T>
T default_scale(std::size_t head_dim) {
    return head_dim == 0 ? T(1) : T(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

}  // namespace attntrace::stages
