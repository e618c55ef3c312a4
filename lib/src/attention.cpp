// The attention core: named stages, BLAS for every product, threads over (head, query block).
#include "attntrace/attention.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "attntrace/errors.hpp"
#include "attntrace/gemm.hpp"
#include "attntrace/numbers.hpp"
#include "softmax_kernels.hpp"

namespace attntrace {

const std::vector<std::string>& mha_stage_names() {
    static const std::vector<std::string> names = {
        "query", "key", "value", "q", "k", "v", "q_heads", "k_heads", "v_heads", "scores",
        "masked_scores", "weights", "context", "merged", "output"};
    return names;
}

const std::vector<std::string>& sdpa_stage_names() {
    static const std::vector<std::string> names = {"query", "key", "value", "scores",
                                                   "masked_scores", "weights", "output"};
    return names;
}

namespace {

// Query rows per task: one (kQueryBlock, Lk) block of scores per thread when the weights are not
// kept, so memory grows with Lk, not Lq*Lk.
constexpr std::size_t kQueryBlock = 256;

Shape array_shape(const auto& a) { return Shape(a.shape().begin(), a.shape().end()); }

std::size_t product(const Shape& s, std::size_t from = 0, std::size_t to = SIZE_MAX) {
    std::size_t n = 1;
    for (std::size_t i = from; i < std::min(to, s.size()); ++i) n *= s[i];
    return n;
}

Shape concat(Shape a, const Shape& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// ---- one batch of independent heads ------------------------------------------------------------

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
    std::vector<std::size_t> q_off, k_off, v_off, o_off;
    std::size_t count() const { return q_off.size(); }
};

// Where each mask applies to score (n, i, j). `lead` is the shape of the head index n: (B, H) for
// mha, Q's leading dims for sdpa.
template <class T>
struct MaskPlan {
    bool causal = false;
    Shape lead;
    const T* attn = nullptr;         // broadcast view over (lead..., Lq, Lk)
    bool attn_is_bool = false;
    std::vector<std::size_t> attn_lead_strides;  // 0 where broadcast
    std::size_t attn_stride_i = 0, attn_stride_j = 0;
    std::size_t heads_per_batch = 1;  // n / heads_per_batch = batch index (mha)
    const T* key_padding = nullptr;   // (B, Lk)
    const T* valid_lens = nullptr;    // (B,) or (B, Lq)
    bool valid_lens_per_query = false;
    std::size_t lq = 0, lk = 0;

    bool any() const { return causal || attn || key_padding || valid_lens; }

    std::size_t attn_offset(std::size_t n, std::size_t i) const {
        std::size_t off = i * attn_stride_i;
        for (std::size_t d = lead.size(); d-- > 0;) {
            off += (n % lead[d]) * attn_lead_strides[d];
            n /= lead[d];
        }
        return off;
    }

    // The first key row I may not see because of causal / valid lengths (all keys from it on are
    // masked for that row).
    std::size_t key_end(std::size_t n, std::size_t i) const {
        std::size_t end = lk;
        if (causal) end = std::min(end, i + 1);
        if (valid_lens) {
            const std::size_t b = n / heads_per_batch;
            const T len = valid_lens_per_query ? valid_lens[b * lq + i] : valid_lens[b];
            end = std::min(end, static_cast<std::size_t>(len));
        }
        return end;
    }

    // Masked scores for keys [j0, j1) of row (n, i), ROW pointing at key j0: a disallowed score
    // becomes -inf, a float mask is added.
    void apply(T* row, std::size_t n, std::size_t i, std::size_t j0, std::size_t j1) const {
        const T minus_inf = -std::numeric_limits<T>::infinity();
        const std::size_t end = std::clamp(key_end(n, i), j0, j1);
        for (std::size_t j = end; j < j1; ++j) row[j - j0] = minus_inf;
        if (key_padding) {
            const T* pad = key_padding + (n / heads_per_batch) * lk;
            for (std::size_t j = j0; j < end; ++j)
                if (pad[j] != T(0)) row[j - j0] = minus_inf;
        }
        if (attn) {
            const T* m = attn + attn_offset(n, i);
            if (attn_is_bool) {
                for (std::size_t j = j0; j < end; ++j)
                    if (m[j * attn_stride_j] != T(0)) row[j - j0] = minus_inf;
            } else {
                for (std::size_t j = j0; j < end; ++j) row[j - j0] += m[j * attn_stride_j];
            }
        }
    }
};

// Weights, in place: max-subtracted softmax of one row. A row with no allowed key (every score
// -inf) becomes all zeros; returns whether it was empty.
template <class T>
bool softmax_row(T* row, std::size_t lk) {
    const T max = kernels::row_max(row, lk);
    if (max == -std::numeric_limits<T>::infinity()) {
        std::fill(row, row + lk, T(0));
        return true;
    }
    kernels::scale_row(row, lk, T(1) / kernels::exp_shift_sum(row, lk, max));
    return false;
}

// Runs fn(task, worker) for task in [0, tasks) on up to `threads` workers; each worker takes the
// next task when it is free, so a slow core or a causal block with few keys does not hold the rest.
template <class Fn>
void parallel_for(std::size_t tasks, std::size_t threads, Fn&& fn) {
    threads = std::max<std::size_t>(1, std::min(threads, tasks));
    if (threads == 1) {
        for (std::size_t t = 0; t < tasks; ++t) fn(t, 0);
        return;
    }
    std::atomic<std::size_t> next{0};
    auto work = [&](std::size_t worker) {
        for (std::size_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < tasks;) fn(t, worker);
    };
    std::vector<std::thread> pool;
    for (std::size_t w = 1; w < threads; ++w) pool.emplace_back(work, w);
    work(0);  // the calling thread is worker 0
    for (auto& t : pool) t.join();
}

// What the attention stages keep for the caller and the observer.
template <class T>
struct Kept {
    Array<T>* scores = nullptr;         // (N, Lq, Lk) before masks
    Array<T>* masked_scores = nullptr;  // (N, Lq, Lk) after masks
    Array<T>* weights = nullptr;        // (N, Lq, Lk)
    RowStats* stats = nullptr;          // (N, Lq) rows' entropy and most-attended key
};

// Records row (n, i)'s statistics from its weights W (Lk).
template <class T>
void record_row_stats(RowStats& stats, std::size_t row, const T* w, std::size_t lk) {
    double entropy = 0, best = 0;
    std::int64_t arg = -1;
    for (std::size_t j = 0; j < lk; ++j) {
        const double x = w[j];
        if (x > 0) entropy -= x * std::log(x);
        if (x > best) best = x, arg = static_cast<std::int64_t>(j);
    }
    stats.entropy[row] = entropy;
    stats.argmax[row] = arg;
    stats.max_weight[row] = best;
}

// One (rows, Lk) block of scores -> masks -> softmax -> context, with the whole key row at once:
// the path when the weights (or scores) are kept. S (rows, Lk) holds the scores, then the weights.
template <class T>
std::size_t attend_rows(const HeadBatch<T>& hb, const MaskPlan<T>& masks, T scale, const Kept<T>& kept,
                        std::size_t n, std::size_t i0, std::size_t rows, T* s) {
    const std::size_t plane = hb.lq * hb.lk;
    // scores = Q·Kᵀ·scale: (rows, P) x (P, Lk)
    gemm<T>(false, true, rows, hb.lk, hb.p, scale, hb.q + hb.q_off[n] + i0 * hb.ldq, hb.ldq, hb.k + hb.k_off[n],
            hb.ldk, T(0), s, hb.lk);
    if (kept.scores) std::copy(s, s + rows * hb.lk, kept.scores->data() + n * plane + i0 * hb.lk);
    if (masks.any())
        for (std::size_t r = 0; r < rows; ++r) masks.apply(s + r * hb.lk, n, i0 + r, 0, hb.lk);
    if (kept.masked_scores) std::copy(s, s + rows * hb.lk, kept.masked_scores->data() + n * plane + i0 * hb.lk);
    std::size_t empty = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        empty += softmax_row(s + r * hb.lk, hb.lk);
        if (kept.stats) record_row_stats(*kept.stats, n * hb.lq + i0 + r, s + r * hb.lk, hb.lk);
    }
    // context = weights·V: (rows, Lk) x (Lk, Pv)
    gemm<T>(false, false, rows, hb.pv, hb.lk, T(1), s, hb.lk, hb.v + hb.v_off[n], hb.ldv, T(0),
            hb.o + hb.o_off[n] + i0 * hb.ldo, hb.ldo);
    return empty;
}

// Keys per block of the tiled path: a (kQueryBlock, kKeyBlock) block of scores stays in cache.
constexpr std::size_t kKeyBlock = 1024;

// Per-thread state of the tiled path.
template <class T>
struct TileScratch {
    std::vector<T> s;        // (rows, kKeyBlock) scores, then exp(scores - running max)
    std::vector<T> row_max;  // (rows) running maximum m
    std::vector<T> row_sum;  // (rows) running sum l of exp(score - m)
    std::vector<T> row_dot;  // (rows) running sum of exp(score - m) * (score - m), for the entropy
    std::vector<std::int64_t> row_arg;  // (rows) the key holding the running maximum
};

// The same block with an online softmax over key blocks (the FlashAttention recurrence), for when
// no (Lq, Lk) stage is kept: memory is (rows, kKeyBlock) per thread, whatever Lk is. For each key
// block: S = Q·K_blockᵀ·scale, masks, m' = max(m, rowmax S), P = exp(S - m'),
// l = l·exp(m - m') + rowsum P, O = O·exp(m - m') + P·V_block; at the end O /= l.
template <class T>
std::size_t attend_rows_tiled(const HeadBatch<T>& hb, const MaskPlan<T>& masks, T scale, std::size_t n,
                              std::size_t i0, std::size_t rows, TileScratch<T>& t, RowStats* stats) {
    const T minus_inf = -std::numeric_limits<T>::infinity();
    t.s.resize(rows * kKeyBlock);
    t.row_max.assign(rows, minus_inf);
    t.row_sum.assign(rows, T(0));
    t.row_dot.assign(rows, T(0));
    t.row_arg.assign(rows, -1);
    T* o = hb.o + hb.o_off[n] + i0 * hb.ldo;
    for (std::size_t r = 0; r < rows; ++r) std::fill(o + r * hb.ldo, o + r * hb.ldo + hb.pv, T(0));
    // Causal and valid lengths: no key at or past `stop` is visible to any row of the block.
    std::size_t stop = 0;
    for (std::size_t r = 0; r < rows; ++r) stop = std::max(stop, masks.key_end(n, i0 + r));
    for (std::size_t j0 = 0; j0 < stop; j0 += kKeyBlock) {
        const std::size_t cols = std::min(kKeyBlock, stop - j0);
        T* s = t.s.data();
        gemm<T>(false, true, rows, cols, hb.p, scale, hb.q + hb.q_off[n] + i0 * hb.ldq, hb.ldq,
                hb.k + hb.k_off[n] + j0 * hb.ldk, hb.ldk, T(0), s, cols);
        for (std::size_t r = 0; r < rows; ++r) {
            T* row = s + r * cols;
            if (masks.any()) masks.apply(row, n, i0 + r, j0, j0 + cols);
            const T block_max = kernels::row_max(row, cols);
            const T m = std::max(t.row_max[r], block_max);
            if (m == minus_inf) {  // nothing allowed so far: this block adds nothing
                std::fill(row, row + cols, T(0));
                continue;
            }
            const T correction = std::exp(t.row_max[r] - m);  // 0 on the first allowed block
            if (stats) {
                if (block_max > t.row_max[r])
                    t.row_arg[r] = static_cast<std::int64_t>(j0 + (std::find(row, row + cols, block_max) - row));
                // re-base the running sum of e*(s - m) on the new maximum m
                if (t.row_sum[r] > T(0)) t.row_dot[r] = correction * (t.row_dot[r] + (t.row_max[r] - m) * t.row_sum[r]);
                const T sum = kernels::exp_shift_sum_dot(row, cols, m, &t.row_dot[r]);
                t.row_sum[r] = t.row_sum[r] * correction + sum;
            } else {
                t.row_sum[r] = t.row_sum[r] * correction + kernels::exp_shift_sum(row, cols, m);
            }
            t.row_max[r] = m;
            if (correction != T(1)) kernels::scale_row(o + r * hb.ldo, hb.pv, correction);
        }
        // O += P·V_block: (rows, cols) x (cols, Pv)
        gemm<T>(false, false, rows, hb.pv, cols, T(1), s, cols, hb.v + hb.v_off[n] + j0 * hb.ldv, hb.ldv, T(1), o,
                hb.ldo);
    }
    std::size_t empty = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        const T l = t.row_sum[r];
        if (l == T(0)) {  // no allowed key: zero context, never NaN
            std::fill(o + r * hb.ldo, o + r * hb.ldo + hb.pv, T(0));
            ++empty;
        } else {
            kernels::scale_row(o + r * hb.ldo, hb.pv, T(1) / l);
        }
        if (stats) {  // w_j = e_j / l: entropy = ln l - sum e_j (s_j - m) / l; the top weight is 1 / l
            const std::size_t row = n * hb.lq + i0 + r;
            stats->entropy[row] = l == T(0) ? 0.0 : std::log(double(l)) - double(t.row_dot[r]) / double(l);
            stats->argmax[row] = l == T(0) ? -1 : t.row_arg[r];
            stats->max_weight[row] = l == T(0) ? 0.0 : 1.0 / double(l);
        }
    }
    return empty;
}

// scores -> masks -> softmax -> context for every head, threaded over (head, query block).
// Returns the number of empty rows. Without a kept (Lq, Lk) stage it takes the tiled path.
template <class T>
std::size_t attend(const HeadBatch<T>& hb, const MaskPlan<T>& masks, T scale, const Kept<T>& kept,
                   std::size_t threads) {
    const std::size_t blocks = (hb.lq + kQueryBlock - 1) / kQueryBlock;
    const std::size_t tasks = hb.count() * blocks;
    if (tasks == 0) return 0;
    threads = std::max<std::size_t>(1, std::min(threads, tasks));
    const bool tiled = !kept.weights && !kept.scores && !kept.masked_scores;
    std::vector<TileScratch<T>> tiles(threads);
    std::vector<std::size_t> empty(threads, 0);
    parallel_for(tasks, threads, [&](std::size_t task, std::size_t worker) {
        const std::size_t n = task / blocks;
        const std::size_t i0 = (task % blocks) * kQueryBlock;
        const std::size_t rows = std::min(kQueryBlock, hb.lq - i0);
        if (tiled) {
            empty[worker] += attend_rows_tiled(hb, masks, scale, n, i0, rows, tiles[worker], kept.stats);
        } else {
            T* s = kept.weights->data() + n * hb.lq * hb.lk + i0 * hb.lk;
            empty[worker] += attend_rows(hb, masks, scale, kept, n, i0, rows, s);
        }
    });
    std::size_t total = 0;
    for (auto e : empty) total += e;
    return total;
}

// Our threads do all the parallel work (over heads, query blocks and projection rows) and BLAS
// runs single-threaded inside them: OpenBLAS's own pool, left spinning between calls, would
// fight our threads for the cores. The guard restores OpenBLAS's setting afterwards.
class SingleThreadedBlas {
public:
    SingleThreadedBlas() : saved_(blas_threads()) { set_blas_threads(1); }
    ~SingleThreadedBlas() { set_blas_threads(saved_); }
    SingleThreadedBlas(const SingleThreadedBlas&) = delete;
    SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

private:
    std::size_t saved_;
};

// ---- masks: validation and broadcasting ---------------------------------------------------------

// Checks that MASK broadcasts to TARGET (lead..., Lq, Lk) and fills the plan's strides.
template <class T>
void plan_attn_mask(MaskPlan<T>& plan, const Array<T>& mask, const std::string& name, const Shape& target,
                    const std::string& target_desc) {
    Shape ms = array_shape(mask);
    if (ms.size() > target.size() || ms.size() < 2)
        throw ShapeError(name + ": attention mask of shape " + shape_string(ms) +
                         " does not broadcast to " + target_desc + " " + shape_string(target));
    const std::size_t pad = target.size() - ms.size();
    std::vector<std::size_t> strides(target.size(), 0);
    std::size_t stride = 1;
    for (std::size_t d = target.size(); d-- > 0;) {
        const std::size_t dim = d >= pad ? ms[d - pad] : 1;
        if (dim != target[d] && dim != 1)
            throw ShapeError(name + ": attention mask of shape " + shape_string(ms) +
                             " does not broadcast to " + target_desc + " " + shape_string(target));
        strides[d] = dim == 1 ? 0 : stride;
        stride *= dim;
    }
    plan.attn = mask.data();
    plan.attn_lead_strides.assign(strides.begin(), strides.end() - 2);
    plan.attn_stride_i = strides[target.size() - 2];
    plan.attn_stride_j = strides[target.size() - 1];
}

template <class T>
void check_whole_numbers(const Array<T>& a, const std::string& name, T max) {
    for (T x : a)
        if (!(x >= 0) || x != std::floor(x) || x > max)
            throw InputError(name + ": valid lengths must be whole numbers from 0 to " +
                             std::to_string(static_cast<std::size_t>(max)) + ", found " +
                             std::to_string(x));
}

// ---- observer helpers ----------------------------------------------------------------------------

template <class T>
struct Reporter {
    Observer<T>* observer = nullptr;
    bool batched = true;  // mha with a 2-D input drops the B axis from every reported shape

    bool wants(std::string_view stage) const { return observer && observer->wants_values(stage); }

    Shape shown(Shape s) const {
        if (!batched && !s.empty()) s.erase(s.begin());
        return s;
    }

    // Reports a stage; VALUES (when given) must already have the full, batched shape.
    void report(std::string_view name, Shape shape, std::string note, nlohmann::json attributes,
                Array<T>* values = nullptr) const {
        if (!observer) return;
        StageView<T> view{name, shown(shape), std::move(note), std::move(attributes), nullptr};
        if (values && wants(name)) {
            if (!batched) values->reshape(view.shape);
            view.values = values;
        }
        observer->stage(view);
    }
};

// The three input stages. An input that is the same tensor as an earlier one says so
// (attribute "same_as"), and the text trace does not print its values again.
template <class T>
void report_inputs(const Reporter<T>& rep, const Array<T>& q, const Array<T>& k, const Array<T>& v, const Shape& qs,
                   const Shape& ks, const Shape& vs, const AttentionOptions& options) {
    auto attrs = [](const std::string& file, const char* same) {
        nlohmann::json a{{"file", file}};
        if (same) a["same_as"] = same;
        return a;
    };
    const char* k_same = &k == &q ? "query" : nullptr;
    const char* v_same = &v == &q ? "query" : &v == &k ? "key" : nullptr;
    rep.report("query", qs, options.query_name, attrs(options.query_name, nullptr), const_cast<Array<T>*>(&q));
    rep.report("key", ks, options.key_name + (k_same ? " (same as query)" : ""), attrs(options.key_name, k_same),
               const_cast<Array<T>*>(&k));
    rep.report("value", vs, options.value_name + (v_same ? std::string(" (same as ") + v_same + ")" : ""),
               attrs(options.value_name, v_same), const_cast<Array<T>*>(&v));
}

// "1 head", "2 heads"
std::string count_of(std::size_t n, const char* noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// (B, L, D) copied out of a buffer of rows with leading dim LD, starting at column COL.
template <class T>
Array<T> gather_rows(const T* base, std::size_t b, std::size_t l, std::size_t d, std::size_t ld,
                     std::size_t col) {
    Array<T> out = Array<T>::from_shape({b, l, d});
    for (std::size_t r = 0; r < b * l; ++r)
        std::copy(base + r * ld + col, base + r * ld + col + d, out.data() + r * d);
    return out;
}

// (B, H, L, D) gathered from rows (B*L, ld) where head h is columns [col + h*D, col + (h+1)*D).
template <class T>
Array<T> gather_heads(const T* base, std::size_t b, std::size_t h, std::size_t l, std::size_t d,
                      std::size_t ld, std::size_t col) {
    Array<T> out = Array<T>::from_shape({b, h, l, d});
    T* dst = out.data();
    for (std::size_t bi = 0; bi < b; ++bi)
        for (std::size_t hi = 0; hi < h; ++hi)
            for (std::size_t li = 0; li < l; ++li, dst += d) {
                const T* src = base + (bi * l + li) * ld + col + hi * d;
                std::copy(src, src + d, dst);
            }
    return out;
}

// ---- projections ------------------------------------------------------------------------------

// y (rows, W.rows) := x (rows, W.cols) · Wᵀ + b, written at Y with leading dim LDY; the rows are
// split over THREADS.
template <class T>
void project(const T* x, std::size_t rows, const Array<T>& w, const std::optional<Array<T>>& b, T* y,
             std::size_t ldy, std::size_t threads) {
    const std::size_t out = w.shape()[0], in = w.shape()[1];
    constexpr std::size_t min_rows = 64;  // below this a chunk is not worth a thread
    const std::size_t chunks = std::max<std::size_t>(1, std::min(threads, rows / min_rows));
    const std::size_t per = (rows + chunks - 1) / chunks;
    parallel_for(chunks, chunks, [&](std::size_t c, std::size_t) {
        const std::size_t r0 = c * per, r1 = std::min(rows, r0 + per);
        if (r0 >= r1) return;
        if (b)
            for (std::size_t r = r0; r < r1; ++r) std::copy(b->begin(), b->end(), y + r * ldy);
        gemm<T>(false, true, r1 - r0, out, in, T(1), x + r0 * in, in, w.data(), in, b ? T(1) : T(0), y + r0 * ldy,
                ldy);
    });
}

nlohmann::json shape_json(const auto& a) { return array_shape(a); }

std::string masks_description(bool causal, const std::string& attn, const std::string& kpm,
                              const std::string& valid) {
    std::string d;
    auto add = [&](const std::string& s) { d += (d.empty() ? "" : " & ") + s; };
    if (causal) add("causal");
    if (!attn.empty()) add(attn);
    if (!kpm.empty()) add(kpm);
    if (!valid.empty()) add(valid);
    return d;
}

// "query @ W_q^T + b_q   W_q (6, 6)": what a projection computed, with its weight's shape.
template <class T>
std::string projection_note(const char* input, const char* which, const Array<T>& w, const std::optional<Array<T>>& b) {
    std::string note = std::string(input) + " @ W_" + which + "^T";
    if (b) note += std::string(" + b_") + which;
    return note + "   W_" + which + " " + shape_string(w.shape());
}

template <class T>
T default_scale(std::size_t head_dim) {
    return head_dim == 0 ? T(1) : T(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

// The stages after the context: keeps and reports scores/masked_scores/weights.
template <class T>
struct AttnBuffers {
    std::optional<Array<T>> scores, masked_scores, weights;
    std::optional<RowStats> stats;
    Kept<T> kept() {
        return {scores ? &*scores : nullptr, masked_scores ? &*masked_scores : nullptr,
                weights ? &*weights : nullptr, stats ? &*stats : nullptr};
    }
};

template <class T>
AttnBuffers<T> make_buffers(const Reporter<T>& rep, const AttentionOptions& options, const Shape& plane_shape) {
    const bool need_weights = options.need_weights;
    AttnBuffers<T> buf;
    if (options.row_stats) {
        const std::size_t rows = product(plane_shape, 0, plane_shape.size() - 1);
        buf.stats = RowStats{Shape(plane_shape.begin(), plane_shape.end() - 1), std::vector<double>(rows),
                             std::vector<std::int64_t>(rows), std::vector<double>(rows)};
    }
    if (rep.wants("scores")) buf.scores = Array<T>::from_shape(plane_shape);
    if (rep.wants("masked_scores")) buf.masked_scores = Array<T>::from_shape(plane_shape);
    // The materialized path computes in the weights buffer, so any kept (Lq, Lk) stage needs it.
    if (need_weights || rep.wants("weights") || buf.scores || buf.masked_scores)
        buf.weights = Array<T>::from_shape(plane_shape);
    return buf;
}

template <class T>
void report_attention_stages(const Reporter<T>& rep, AttnBuffers<T>& buf, const Shape& plane_shape, T scale,
                             const std::string& mask_desc, std::size_t empty_rows) {
    rep.report("scores", plane_shape, "Q @ K^T * " + format_number(scale), {{"scale", scale}},
               buf.scores ? &*buf.scores : nullptr);
    rep.report("masked_scores", plane_shape,
               (mask_desc.empty() ? std::string("no mask") : mask_desc) + ", " + std::to_string(empty_rows) +
                   (empty_rows == 1 ? " row" : " rows") + " with no allowed key",
               {{"masks", mask_desc}, {"empty_rows", empty_rows}},
               buf.masked_scores ? &*buf.masked_scores : nullptr);
    rep.report("weights", plane_shape, "softmax over keys", {{"empty_rows", empty_rows}},
               buf.weights ? &*buf.weights : nullptr);
}

}  // namespace

// ---- sdpa -------------------------------------------------------------------------------------

template <class T>
AttentionResult<T> sdpa(const Array<T>& q, const Array<T>& k, const Array<T>& v, const Masks<T>& masks,
                        const AttentionOptions& options, Observer<T>* observer) {
    const Shape qs = array_shape(q), ks = array_shape(k), vs = array_shape(v);
    const auto& qn = options.query_name;
    const auto& kn = options.key_name;
    const auto& vn = options.value_name;
    if (qs.size() < 2) throw ShapeError(qn + ": query of shape " + shape_string(qs) + " needs at least 2 dims (..., Lq, E)");
    if (ks.size() != qs.size() || vs.size() != qs.size())
        throw ShapeError((ks.size() != qs.size() ? kn : vn) + ": shape " +
                         shape_string(ks.size() != qs.size() ? ks : vs) + " but query " + qn + " has shape " +
                         shape_string(qs) + " (Q, K and V need the same number of dims)");
    const std::size_t r = qs.size();
    const Shape lead(qs.begin(), qs.end() - 2);
    for (std::size_t d = 0; d + 2 < r; ++d) {
        if (ks[d] != qs[d] || vs[d] != qs[d])
            throw ShapeError((ks[d] != qs[d] ? kn : vn) + ": shape " + shape_string(ks[d] != qs[d] ? ks : vs) +
                             " but query has shape " + shape_string(qs) + " (leading dims must be equal)");
    }
    const std::size_t lq = qs[r - 2], e = qs[r - 1], lk = ks[r - 2], ev = vs[r - 1];
    if (ks[r - 1] != e)
        throw ShapeError(kn + ": shape " + shape_string(ks) + " but query has shape " + shape_string(qs) +
                         " (K's last dim must equal Q's E = " + std::to_string(e) + ")");
    if (vs[r - 2] != lk)
        throw ShapeError(vn + ": shape " + shape_string(vs) + " but key has shape " + shape_string(ks) +
                         " (V must have Lk = " + std::to_string(lk) + " rows)");
    if (masks.key_padding_mask || masks.valid_lens)
        throw UsageError("sdpa: key padding masks and valid lengths belong to mha");

    const std::size_t n_heads = product(lead);
    const Shape plane_shape = concat(lead, {lq, lk});
    MaskPlan<T> plan;
    plan.causal = masks.causal;
    plan.lead = lead;
    plan.lq = lq;
    plan.lk = lk;
    if (masks.attn_mask) {
        plan_attn_mask(plan, *masks.attn_mask, masks.attn_mask_name, plane_shape, "(..., Lq, Lk)");
        plan.attn_is_bool = masks.attn_mask_is_bool;
    }

    const SingleThreadedBlas blas;
    const std::size_t threads = options.threads ? options.threads : available_cores();
    Reporter<T> rep{observer, true};
    report_inputs(rep, q, k, v, qs, ks, vs, options);

    AttentionResult<T> result;
    const T scale = options.scale ? T(*options.scale) : default_scale<T>(e);
    result.scale = scale;
    result.output = Array<T>::from_shape(concat(lead, {lq, ev}));

    HeadBatch<T> hb;
    hb.lq = lq, hb.lk = lk, hb.p = e, hb.pv = ev;
    hb.q = q.data(), hb.k = k.data(), hb.v = v.data(), hb.o = result.output.data();
    hb.ldq = e, hb.ldk = e, hb.ldv = ev, hb.ldo = ev;
    for (std::size_t n = 0; n < n_heads; ++n) {
        hb.q_off.push_back(n * lq * e);
        hb.k_off.push_back(n * lk * e);
        hb.v_off.push_back(n * lk * ev);
        hb.o_off.push_back(n * lq * ev);
    }
    auto buf = make_buffers(rep, options, plane_shape);
    result.empty_rows = attend(hb, plan, scale, buf.kept(), threads);
    result.row_stats = std::move(buf.stats);
    const std::string mask_desc = masks_description(masks.causal, masks.attn_mask ? masks.attn_mask_name : "", "", "");
    report_attention_stages(rep, buf, plane_shape, scale, mask_desc, result.empty_rows);
    rep.report("output", array_shape(result.output), "weights @ V", {}, &result.output);
    if (options.need_weights) result.weights = std::move(buf.weights);
    return result;
}

// ---- mha --------------------------------------------------------------------------------------

template <class T>
AttentionResult<T> mha(const Array<T>& query, const Array<T>& key, const Array<T>& value,
                       const MhaParams<T>& params, const MhaConfig& config, const Masks<T>& masks,
                       const AttentionOptions& options, Observer<T>* observer) {
    const auto& qn = options.query_name;
    const auto& kn = options.key_name;
    const auto& vn = options.value_name;
    Shape qs = array_shape(query), ks = array_shape(key), vs = array_shape(value);
    if (qs.size() != 2 && qs.size() != 3)
        throw ShapeError(qn + ": query of shape " + shape_string(qs) + " must be (B, L, E) or (L, E)");
    const bool batched = qs.size() == 3;
    if (ks.size() != qs.size())
        throw ShapeError(kn + ": key of shape " + shape_string(ks) + " but query has shape " + shape_string(qs) +
                         " (both batched or both unbatched)");
    if (vs.size() != qs.size())
        throw ShapeError(vn + ": value of shape " + shape_string(vs) + " but query has shape " + shape_string(qs) +
                         " (both batched or both unbatched)");
    if (!batched) {
        qs.insert(qs.begin(), 1);
        ks.insert(ks.begin(), 1);
        vs.insert(vs.begin(), 1);
    }
    const std::size_t b = qs[0], lq = qs[1], eq = qs[2], lk = ks[1], ek = ks[2], ev = vs[2];
    if (ks[0] != b)
        throw ShapeError(kn + ": key of shape " + shape_string(key.shape()) + " has batch " + std::to_string(ks[0]) +
                         " but query " + shape_string(query.shape()) + " has batch " + std::to_string(b));
    if (vs[0] != b)
        throw ShapeError(vn + ": value of shape " + shape_string(value.shape()) + " has batch " +
                         std::to_string(vs[0]) + " but query " + shape_string(query.shape()) + " has batch " +
                         std::to_string(b));
    if (vs[1] != lk)
        throw ShapeError(vn + ": value of shape " + shape_string(value.shape()) + " has length " +
                         std::to_string(vs[1]) + " but key " + shape_string(key.shape()) + " has length " +
                         std::to_string(lk));
    if (config.heads == 0) throw UsageError("--heads: must be at least 1");
    const std::size_t h = config.heads;
    const std::size_t g = config.kv_heads == 0 ? h : config.kv_heads;
    if (h % g != 0)
        throw UsageError("--kv-heads: " + std::to_string(h) + " query heads cannot share " + std::to_string(g) +
                         " kv heads (" + std::to_string(h) + " % " + std::to_string(g) + " != 0)");
    const MhaDims dims{h, g, eq, ek, ev, config.out_proj};
    const HeadSizes sizes = check_mha_params(params, dims);
    const std::size_t p = sizes.head_dim, pv = sizes.value_head_dim;

    // Masks (batch axis already explicit).
    const Shape plane_shape{b, h, lq, lk};
    MaskPlan<T> plan;
    plan.causal = masks.causal;
    plan.lead = {b, h};
    plan.lq = lq;
    plan.lk = lk;
    plan.heads_per_batch = h;
    std::string attn_desc, kpm_desc, valid_desc;
    if (masks.attn_mask) {
        const Array<T>& m = *masks.attn_mask;
        const Shape ms = array_shape(m);
        // PyTorch's 3-D (B*H, Lq, Lk) mask is our (B, H, Lq, Lk).
        if (ms.size() == 3 && ms[0] == b * h && ms[0] != h && ms[0] != 1) {
            Array<T> reshaped = m;  // small: masks are (B*H, Lq, Lk)
            reshaped.reshape({b, h, lq, lk});
            plan_attn_mask(plan, reshaped, masks.attn_mask_name, plane_shape, "(B, H, Lq, Lk)");
            plan.attn = m.data();  // same memory layout as the reshaped copy
        } else {
            Shape target = batched ? plane_shape : Shape{h, lq, lk};
            plan_attn_mask(plan, m, masks.attn_mask_name, target, batched ? "(B, H, Lq, Lk)" : "(H, Lq, Lk)");
            if (!batched) plan.attn_lead_strides.insert(plan.attn_lead_strides.begin(), 0);
        }
        plan.attn_is_bool = masks.attn_mask_is_bool;
        attn_desc = (masks.attn_mask_is_bool ? "bool mask " : "float mask ") + masks.attn_mask_name;
    }
    if (masks.key_padding_mask) {
        const Shape ms = array_shape(*masks.key_padding_mask);
        const Shape want = batched ? Shape{b, lk} : Shape{lk};
        if (ms != want)
            throw ShapeError(masks.key_padding_mask_name + ": key padding mask of shape " + shape_string(ms) +
                             " but expected " + shape_string(want) + (batched ? " (B, Lk)" : " (Lk)"));
        plan.key_padding = masks.key_padding_mask->data();
        kpm_desc = "key padding " + masks.key_padding_mask_name;
    }
    if (masks.valid_lens) {
        const Shape ms = array_shape(*masks.valid_lens);
        if (ms == Shape{b}) {
            plan.valid_lens_per_query = false;
        } else if (ms == Shape{b, lq}) {
            plan.valid_lens_per_query = true;
        } else {
            throw ShapeError(masks.valid_lens_name + ": valid lengths of shape " + shape_string(ms) +
                             " but expected " + shape_string(Shape{b}) + " (B,) or " + shape_string(Shape{b, lq}) +
                             " (B, Lq)");
        }
        check_whole_numbers(*masks.valid_lens, masks.valid_lens_name, T(lk));
        plan.valid_lens = masks.valid_lens->data();
        valid_desc = "valid lens " + masks.valid_lens_name;
    }

    const SingleThreadedBlas blas;
    const std::size_t threads = options.threads ? options.threads : available_cores();
    Reporter<T> rep{observer, batched};
    report_inputs(rep, query, key, value, qs, ks, vs, options);

    // project: q (B*Lq, H*P), k (B*Lk, G*P), v (B*Lk, G*Pv). Self-attention on one input runs a
    // single GEMM against the stacked weights [W_q; W_k; W_v], as PyTorch's in_proj does.
    const std::size_t nq = h * p, nk = g * p, nv = g * pv;
    const bool self_attention = &query == &key && &key == &value;
    // Uninitialized (the GEMMs write every element) and freed right after the attention stages.
    struct Free {
        void operator()(T* p) const noexcept { free_buffer(p); }
    };
    using Buffer = std::unique_ptr<T[], Free>;
    auto buffer = [](std::size_t n) { return Buffer(BufferAllocator<T>().allocate(n)); };
    Buffer qkv_buf, q_buf, k_buf, v_buf;
    const T *qp, *kp, *vp;
    std::size_t ldq, ldk, ldv;
    if (self_attention) {
        const std::size_t total = nq + nk + nv;
        Array<T> w = Array<T>::from_shape({total, eq});
        std::copy(params.w_q.begin(), params.w_q.end(), w.begin());
        std::copy(params.w_k.begin(), params.w_k.end(), w.begin() + nq * eq);
        std::copy(params.w_v.begin(), params.w_v.end(), w.begin() + (nq + nk) * eq);
        std::optional<Array<T>> bias;
        if (params.b_q || params.b_k || params.b_v) {
            bias = Array<T>::from_shape({total});
            bias->fill(T(0));
            if (params.b_q) std::copy(params.b_q->begin(), params.b_q->end(), bias->begin());
            if (params.b_k) std::copy(params.b_k->begin(), params.b_k->end(), bias->begin() + nq);
            if (params.b_v) std::copy(params.b_v->begin(), params.b_v->end(), bias->begin() + nq + nk);
        }
        qkv_buf = buffer(b * lq * total);
        project(query.data(), b * lq, w, bias, qkv_buf.get(), total, threads);
        qp = qkv_buf.get(), kp = qp + nq, vp = qp + nq + nk;
        ldq = ldk = ldv = total;
    } else {
        q_buf = buffer(b * lq * nq);
        k_buf = buffer(b * lk * nk);
        v_buf = buffer(b * lk * nv);
        project(query.data(), b * lq, params.w_q, params.b_q, q_buf.get(), nq, threads);
        project(key.data(), b * lk, params.w_k, params.b_k, k_buf.get(), nk, threads);
        project(value.data(), b * lk, params.w_v, params.b_v, v_buf.get(), nv, threads);
        qp = q_buf.get(), kp = k_buf.get(), vp = v_buf.get();
        ldq = nq, ldk = nk, ldv = nv;
    }
    auto weight_attrs = [&](const char* which, const Array<T>& w, const std::optional<Array<T>>& bias) {
        return nlohmann::json{{"weight", which}, {"weight_shape", shape_json(w)}, {"bias", bias.has_value()},
                              {"fused", self_attention}};
    };
    auto report_projection = [&](const char* name, const T* base, std::size_t l, std::size_t d, std::size_t ld,
                                 const char* note, const char* which, const Array<T>& w,
                                 const std::optional<Array<T>>& bias) {
        std::optional<Array<T>> vals;
        if (rep.wants(name)) vals = gather_rows(base, b, l, d, ld, 0);
        rep.report(name, {b, l, d}, note, weight_attrs(which, w, bias), vals ? &*vals : nullptr);
    };
    report_projection("q", qp, lq, nq, ldq, projection_note("query", "q", params.w_q, params.b_q).c_str(), "w_q",
                      params.w_q, params.b_q);
    report_projection("k", kp, lk, nk, ldk, projection_note("key", "k", params.w_k, params.b_k).c_str(), "w_k",
                      params.w_k, params.b_k);
    report_projection("v", vp, lk, nv, ldv, projection_note("value", "v", params.w_v, params.b_v).c_str(), "w_v",
                      params.w_v, params.b_v);

    // split_heads: head h of q is columns [h*P, (h+1)*P) of its rows; no data moves.
    auto report_heads = [&](const char* name, const T* base, std::size_t heads, std::size_t l, std::size_t d,
                            std::size_t ld) {
        std::optional<Array<T>> vals;
        if (rep.wants(name)) vals = gather_heads(base, b, heads, l, d, ld, 0);
        rep.report(name, {b, heads, l, d}, "split into " + count_of(heads, "head") + " of " + std::to_string(d),
                   {{"heads", heads}, {"head_dim", d}}, vals ? &*vals : nullptr);
    };
    report_heads("q_heads", qp, h, lq, p, ldq);
    report_heads("k_heads", kp, g, lk, p, ldk);
    report_heads("v_heads", vp, g, lk, pv, ldv);

    // scores -> masks -> softmax -> context, each head's context written into its block of merged.
    AttentionResult<T> result;
    result.sizes = sizes;
    const T scale = options.scale ? T(*options.scale) : default_scale<T>(p);
    result.scale = scale;
    Array<T> merged = Array<T>::from_shape({b, lq, h * pv});  // (B, Lq, H*Pv)
    HeadBatch<T> hb;
    hb.lq = lq, hb.lk = lk, hb.p = p, hb.pv = pv;
    hb.q = qp, hb.k = kp, hb.v = vp, hb.o = merged.data();
    hb.ldq = ldq, hb.ldk = ldk, hb.ldv = ldv, hb.ldo = h * pv;
    const std::size_t group = h / g;
    for (std::size_t bi = 0; bi < b; ++bi)
        for (std::size_t hi = 0; hi < h; ++hi) {
            hb.q_off.push_back(bi * lq * ldq + hi * p);
            hb.k_off.push_back(bi * lk * ldk + (hi / group) * p);
            hb.v_off.push_back(bi * lk * ldv + (hi / group) * pv);
            hb.o_off.push_back(bi * lq * h * pv + hi * pv);
        }
    auto buf = make_buffers(rep, options, plane_shape);
    result.empty_rows = attend(hb, plan, scale, buf.kept(), threads);
    qkv_buf.reset(), q_buf.reset(), k_buf.reset(), v_buf.reset();  // peak memory: before W_o's output
    result.row_stats = std::move(buf.stats);
    if (result.row_stats && !batched) result.row_stats->shape = {h, lq};
    report_attention_stages(rep, buf, plane_shape, scale,
                            masks_description(masks.causal, attn_desc, kpm_desc, valid_desc), result.empty_rows);
    {
        std::optional<Array<T>> vals;
        if (rep.wants("context")) vals = gather_heads(merged.data(), b, h, lq, pv, h * pv, 0);
        rep.report("context", {b, h, lq, pv}, "weights @ V per head", {}, vals ? &*vals : nullptr);
    }
    rep.report("merged", {b, lq, h * pv}, "heads concatenated", {}, rep.wants("merged") ? &merged : nullptr);

    // out_project: output (B*Lq, PO) := merged · W_oᵀ + b_o
    std::size_t out_cols = h * pv;
    if (params.w_o && config.out_proj) {
        const std::size_t po = params.w_o->shape()[0];
        out_cols = po;
        result.output = Array<T>::from_shape({b, lq, po});
        project(merged.data(), b * lq, *params.w_o, params.b_o, result.output.data(), po, threads);
        rep.report("output", {b, lq, po}, projection_note("merged", "o", *params.w_o, params.b_o),
                   weight_attrs("w_o", *params.w_o, params.b_o), &result.output);
    } else {
        result.output = std::move(merged);
        rep.report("output", {b, lq, h * pv}, "merged (no output projection)", {}, &result.output);
    }
    if (!batched) result.output.reshape({lq, out_cols});

    if (options.need_weights && buf.weights) {
        Array<T>& w = *buf.weights;
        if (options.average_heads) {
            Array<T> avg = Array<T>::from_shape({b, lq, lk});
            avg.fill(T(0));
            const std::size_t plane = lq * lk;
            for (std::size_t bi = 0; bi < b; ++bi)
                for (std::size_t hi = 0; hi < h; ++hi) {
                    const T* src = w.data() + (bi * h + hi) * plane;
                    T* dst = avg.data() + bi * plane;
                    for (std::size_t x = 0; x < plane; ++x) dst[x] += src[x];
                }
            const T inv = T(1) / T(h);
            for (auto& x : avg) x *= inv;
            if (!batched) avg.reshape({lq, lk});
            result.weights = std::move(avg);
        } else {
            if (!batched) w.reshape({h, lq, lk});
            result.weights = std::move(w);
        }
    }
    return result;
}

template AttentionResult<float> sdpa(const Array<float>&, const Array<float>&, const Array<float>&,
                                     const Masks<float>&, const AttentionOptions&, Observer<float>*);
template AttentionResult<double> sdpa(const Array<double>&, const Array<double>&, const Array<double>&,
                                      const Masks<double>&, const AttentionOptions&, Observer<double>*);
template AttentionResult<float> mha(const Array<float>&, const Array<float>&, const Array<float>&,
                                    const MhaParams<float>&, const MhaConfig&, const Masks<float>&,
                                    const AttentionOptions&, Observer<float>*);
template AttentionResult<double> mha(const Array<double>&, const Array<double>&, const Array<double>&,
                                     const MhaParams<double>&, const MhaConfig&, const Masks<double>&,
                                     const AttentionOptions&, Observer<double>*);

}  // namespace attntrace
