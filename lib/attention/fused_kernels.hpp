#pragma once
// The fused attention kernel: scores -> mask -> online softmax -> context for one task (a block
// of query rows of one head), with no BLAS call and no (rows, keys) buffer beyond one key block,
// written over an instruction set's vector type I (fused_avx512.cpp compiles it for AVX-512F).
// Internal to lib/attention; fused_attention.hpp is its interface.
//
// The trick: W query rows at a time (a panel) live in the W lanes of a vector, so everything a
// row needs is one lane. The scores of the panel are held transposed, key by key (sp[j] = the W
// rows' scores at key j), which is the layout both products want:
//   S = Q Kᵀ      acc[jj] += qp[p] * K[j0 + jj][p]   (qp[p]: the W rows' q at dim p; K broadcast)
//   O += P V      acc[c]  += sp[j] * V[j][c]         (sp[j]: the W rows' weights at key j)
// and the row maximum, the exp and the sums are plain vector loops over keys. K is packed once per
// head as tiles of NR keys ([p][NR]: one tile's keys at dim p side by side), V as rows of pv_pad.
//
// Nothing here may use the standard library's out-of-line code: the kernel is compiled with
// AVX-512 in fused_avx512.cpp, and an out-of-line function shared with the rest of the program
// could end up compiled with it and run on a CPU without it. Only intrinsics, plain loops and
// this header's templates, whose symbols carry the anonymous-namespace type I.
//
// Legend: W lanes (rows per panel), P head dim, Pv value head dim, NR keys per score tile,
// NC value columns per context tile, BK keys per block.
#include <cstddef>
#include <cstdint>

namespace attntrace::fused {

// Keys per block: the panel's scores of one block, BK * W floats, stay in L1.
inline constexpr std::size_t kBlockKeys = 256;  // a multiple of NR
// Software prefetch distance, in loop iterations of the two products (one 64-byte line each): the
// K tile's next dims and the V rows of the keys ahead, which come from L2 (a block of K and V is
// 128 KiB at P = 64, more than L1 holds). Measured on a Sapphire Rapids Xeon, one thread, L = 4096:
// the kernel went from 60% to 68% of the FMA peak with it (4, 8 and 16 alike; docs/performance.md).
inline constexpr std::size_t kPrefetchLines = 8;
// Panels run side by side, key block by key block: a block of K and V (2 x 64 KiB at P = 64) is
// then read from L2 by each of them, where one panel running through all the keys alone reads a
// whole head's K and V (2 MiB at L = 4096, more than a core's L2 holds with the rest) from L3.
inline constexpr std::size_t kGroupPanels = 16;

// One task. Rows [0, rows) are query rows i0 .. i0 + rows - 1 of one head.
struct Task {
    const float* q = nullptr;  // row r at q + r * ldq, P values
    std::size_t ldq = 0;
    std::size_t rows = 0, i0 = 0;
    std::size_t p = 0, pv = 0, pv_pad = 0;  // pv_pad: Pv rounded up to the ISA's NC
    std::size_t lk = 0;                     // keys
    const float* kpack = nullptr;           // [ceil(lk / NR)][P][NR], keys past lk zero
    const float* vpack = nullptr;           // [ceil(lk / NR) * NR][pv_pad], zero padded
    float scale = 1;
    // Row r sees keys [key_begin[r], key_end[r]) (causal, window, valid lengths), and among them
    // not those whose key_padding is nonzero (null: none); ALiBi adds alibi_slope * j.
    const std::uint32_t* key_begin = nullptr;
    const std::uint32_t* key_end = nullptr;
    const float* key_padding = nullptr;
    bool alibi = false;
    double alibi_slope = 0;
    // For each value column c, the first and the last key whose V[j, c] is not finite (first >
    // last: none), or null: a row's context is NaN in a column with such a key its panel skipped,
    // as weights @ V over every key gives (attention_stages.hpp, poison_skipped).
    const std::uint32_t* bad_first = nullptr;
    const std::uint32_t* bad_last = nullptr;
    float* o = nullptr;  // context row r at o + r * ldo, Pv values
    std::size_t ldo = 0;
    float* scratch = nullptr;  // scratch_floats(W, P, pv_pad) floats, 64-byte aligned
    // Row statistics (null: not wanted), row r at [r]: entropy (nats), the most-attended key, its
    // weight; and the detector values w[i, i-1], w[i, i] (square planes only), w[i, 0] (null: not
    // wanted).
    double* entropy = nullptr;
    std::int64_t* argmax = nullptr;
    double* max_weight = nullptr;
    double* previous_token = nullptr;
    double* diagonal = nullptr;
    double* first_token = nullptr;
    bool square = false;
};

// The scratch a task needs for head dims P and pv_pad, in floats, for W lanes: one block's scores
// and each panel of a group's q, context and lanes.
constexpr std::size_t scratch_floats(std::size_t w, std::size_t p, std::size_t pv_pad) {
    return w * (kBlockKeys + kGroupPanels * (p + pv_pad + 16));
}

template <class I>
struct Kernel {
    using V = typename I::V;
    using Mask = typename I::Mask;
    static constexpr std::size_t W = I::W;
    static constexpr std::size_t NR = I::NR;
    static constexpr std::size_t NC = I::NC;

    // State of one panel across its key blocks; each array one value per lane.
    struct Panel {
        float* qp;  // (P, W) q * scale, dim by dim
        float* sp;  // (BK, W) the block's scores, then its exp
        float* op;  // (pv_pad, W) the context, column by column
        float* lanes;  // 16 * W: the per-lane values below
        std::size_t r0 = 0, n = 0;  // the panel's first row and its real rows (<= W)
        std::size_t begin = 0, end = 0;  // keys any row of the panel sees
        std::size_t tight_begin = 0, tight_end = 0;  // keys every row of the panel sees
        std::size_t covered_begin = 0, covered_end = 0;  // keys the panel's products covered
        float* beg() const { return lanes; }
        float* fin() const { return lanes + W; }
        float* prev() const { return lanes + 2 * W; }
        float* diag() const { return lanes + 3 * W; }
        float* first() const { return lanes + 4 * W; }
        float* arg() const { return lanes + 5 * W; }
        float* row() const { return lanes + 6 * W; }   // the query index of each lane
        float* tmp() const { return lanes + 7 * W; }
        float* max() const { return lanes + 8 * W; }   // the online softmax's m, l and dot
        float* sum() const { return lanes + 9 * W; }
        float* dot() const { return lanes + 10 * W; }
    };

    // q of the panel's rows, scaled, dim by dim; the padding lanes zero. W dims at a time as a
    // transpose of the W rows' loads (with write_context's transpose: a GGUF Llama's attention at
    // L = 256, 12 heads, 1.27 -> 1.15 ms a layer against scalar loops, docs/performance.md).
    static void pack_q(const Task& t, Panel& pn) {
        const V scale = I::set1(t.scale);
        std::size_t d0 = 0;
        for (; d0 + W <= t.p; d0 += W) {
            V r[W];
            for (std::size_t i = 0; i < W; ++i) r[i] = i < pn.n ? I::load(t.q + (pn.r0 + i) * t.ldq + d0) : I::zero();
            I::transpose(r);
            for (std::size_t j = 0; j < W; ++j) I::store(pn.qp + (d0 + j) * W, I::mul(r[j], scale));
        }
        for (std::size_t d = d0; d < t.p; ++d)
            for (std::size_t r = 0; r < W; ++r)
                pn.qp[d * W + r] = r < pn.n ? t.q[(pn.r0 + r) * t.ldq + d] * t.scale : 0.0f;
    }

    // Each lane's visible keys, and the panel's loose and tight ranges; padding lanes see none.
    static void key_ranges(const Task& t, Panel& pn) {
        pn.begin = t.lk, pn.end = 0, pn.tight_begin = 0, pn.tight_end = t.lk;
        for (std::size_t r = 0; r < W; ++r) {
            const bool real = r < pn.n;
            const std::size_t b = real ? t.key_begin[pn.r0 + r] : 0, e = real ? t.key_end[pn.r0 + r] : 0;
            pn.beg()[r] = static_cast<float>(b), pn.fin()[r] = static_cast<float>(e);
            pn.row()[r] = static_cast<float>(t.i0 + pn.r0 + r);
            if (!real) continue;
            if (b < e) pn.begin = b < pn.begin ? b : pn.begin, pn.end = e > pn.end ? e : pn.end;
            pn.tight_begin = b > pn.tight_begin ? b : pn.tight_begin;
            pn.tight_end = e < pn.tight_end ? e : pn.tight_end;
        }
        if (pn.begin > pn.end) pn.begin = pn.end;
    }

    // S (cols, W) := the panel's q against keys [j0, j0 + cols), cols a multiple of NR.
    static void scores(const Task& t, const Panel& pn, std::size_t j0, std::size_t cols) {
        for (std::size_t jt = 0; jt < cols; jt += NR) {
            V acc[NR];
            for (std::size_t jj = 0; jj < NR; ++jj) acc[jj] = I::zero();
            const float* kt = t.kpack + (j0 + jt) * t.p;  // the tile of keys j0 + jt .. + NR
            for (std::size_t d = 0; d < t.p; ++d) {
                const V a = I::load(pn.qp + d * W);
                I::prefetch(kt + (d + kPrefetchLines) * NR);  // past the tile: the next tile's first dims
                for (std::size_t jj = 0; jj < NR; ++jj) acc[jj] = I::fmadd(a, I::set1(kt[d * NR + jj]), acc[jj]);
            }
            for (std::size_t jj = 0; jj < NR; ++jj) I::store(pn.sp + (jt + jj) * W, acc[jj]);
        }
    }

    // The masks on S: keys outside a lane's range, padded keys -inf; ALiBi added.
    static void mask(const Task& t, const Panel& pn, std::size_t j0, std::size_t cols) {
        const bool ranges = j0 < pn.tight_begin || j0 + cols > pn.tight_end;
        if (!ranges && !t.key_padding && !t.alibi) return;
        const V beg = I::load(pn.beg()), fin = I::load(pn.fin()), minus_inf = I::set1(-__builtin_inff());
        for (std::size_t j = 0; j < cols; ++j) {
            const std::size_t key = j0 + j;
            V s = I::load(pn.sp + j * W);
            if (t.alibi) s = I::add(s, I::set1(static_cast<float>(t.alibi_slope * static_cast<double>(key))));
            if (key >= t.lk || (t.key_padding && t.key_padding[key] != 0.0f)) {
                s = minus_inf;
            } else if (ranges) {
                const V kv = I::set1(static_cast<float>(key));
                s = I::select(I::allowed(kv, beg, fin), s, minus_inf);
            }
            I::store(pn.sp + j * W, s);
        }
    }

    // The block's online softmax: sp := exp(S - m'), m' the new running maximum; returns the
    // correction exp(m - m') the earlier sums and context take. Statistics kept when asked.
    static V softmax(const Task& t, const Panel& pn, std::size_t j0, std::size_t cols, V& m, V& l, V& dot) {
        const V bm = block_max(pn, cols);
        const V m_new = I::max(bm, m);
        const V m_use = I::finite_or_zero(m_new);  // no key so far: 0, so -inf scores give exp 0
        const V corr = I::exp(I::sub(m, m_use));
        V sum = I::zero(), block_dot = I::zero();
        const bool stats = t.entropy != nullptr;
        if (stats) record_argmax(pn, j0, cols, bm, m);
        for (std::size_t j = 0; j < cols; ++j) {
            const V x = I::sub(I::load(pn.sp + j * W), m_use);
            const V e = I::exp(x);
            I::store(pn.sp + j * W, e);
            sum = I::add(sum, e);
            if (stats) block_dot = I::add(block_dot, I::positive_product(e, x));
        }
        if (stats) {
            dot = I::select_positive(l, I::mul(corr, I::fmadd(I::sub(m, m_use), l, dot)), dot);
            dot = I::add(dot, block_dot);
        }
        l = I::fmadd(l, corr, sum);
        m = m_new;
        return corr;
    }

    // Each lane's maximum of the block's scores, NaN ignored; four chains, since one max a key waits
    // on the last one's latency (4 cycles a key, 8% of the kernel's time with one chain).
    static V block_max(const Panel& pn, std::size_t cols) {
        V b0 = I::set1(-__builtin_inff()), b1 = b0, b2 = b0, b3 = b0;
        for (std::size_t j = 0; j < cols; j += 4) {  // cols is a multiple of NR, itself of 4
            b0 = I::max(I::load(pn.sp + j * W), b0);
            b1 = I::max(I::load(pn.sp + (j + 1) * W), b1);
            b2 = I::max(I::load(pn.sp + (j + 2) * W), b2);
            b3 = I::max(I::load(pn.sp + (j + 3) * W), b3);
        }
        return I::max(I::max(b0, b1), I::max(b2, b3));
    }

    // Lanes whose maximum grew take the first key of the block that holds it (S not yet exp'ed).
    static void record_argmax(const Panel& pn, std::size_t j0, std::size_t cols, V bm, V m_old) {
        const Mask grew = I::greater(bm, m_old);
        V arg = I::load(pn.arg());
        Mask found = I::none();
        for (std::size_t j = 0; j < cols; ++j) {
            const Mask hit = I::and_not(I::both(grew, I::equal(I::load(pn.sp + j * W), bm)), found);
            arg = I::select(hit, I::set1(static_cast<float>(j0 + j)), arg);
            found = I::either(found, hit);
        }
        I::store(pn.arg(), arg);
    }

    // The detector values: rescaled by the correction, then set from this block's keys i-1, i, 0.
    static void record_detectors(const Task& t, const Panel& pn, std::size_t j0, std::size_t cols, V corr) {
        I::store(pn.prev(), I::mul(I::load(pn.prev()), corr));
        I::store(pn.diag(), I::mul(I::load(pn.diag()), corr));
        I::store(pn.first(), I::mul(I::load(pn.first()), corr));
        for (std::size_t r = 0; r < pn.n; ++r) {
            const std::size_t i = t.i0 + pn.r0 + r;
            if (i >= 1 && i - 1 >= j0 && i - 1 < j0 + cols) pn.prev()[r] = pn.sp[(i - 1 - j0) * W + r];
            if (i >= j0 && i < j0 + cols) pn.diag()[r] = pn.sp[(i - j0) * W + r];
            if (j0 == 0 && cols > 0) pn.first()[r] = pn.sp[r];
        }
    }

    // O (pv_pad, W) := O * corr + P (cols, W) · V[j0 : j0 + cols], NC columns at a time.
    static void context(const Task& t, const Panel& pn, std::size_t j0, std::size_t cols, V corr) {
        for (std::size_t c0 = 0; c0 < t.pv_pad; c0 += NC) {
            V acc[NC];
            for (std::size_t cc = 0; cc < NC; ++cc) acc[cc] = I::mul(I::load(pn.op + (c0 + cc) * W), corr);
            const float* vt = t.vpack + j0 * t.pv_pad + c0;
            for (std::size_t j = 0; j < cols; ++j) {
                const V a = I::load(pn.sp + j * W);
                I::prefetch(vt + (j + kPrefetchLines) * t.pv_pad);
                for (std::size_t cc = 0; cc < NC; ++cc) acc[cc] = I::fmadd(a, I::set1(vt[j * t.pv_pad + cc]), acc[cc]);
            }
            for (std::size_t cc = 0; cc < NC; ++cc) I::store(pn.op + (c0 + cc) * W, acc[cc]);
        }
    }

    // The panel's rows written: O / l, or zeros for an empty row (no allowed key); the statistics.
    // Returns the number of empty rows.
    static std::size_t finish(const Task& t, const Panel& pn, V l, V dot) {
        float ls[W], dots[W];
        I::store(ls, l), I::store(dots, dot);
        write_context(t, pn, ls);
        std::size_t empty = 0;
        for (std::size_t r = 0; r < pn.n; ++r) {
            const float lr = ls[r];
            const bool is_empty = lr == 0.0f, is_nan = lr != lr;
            empty += is_empty;
            float* out = t.o + (pn.r0 + r) * t.ldo;
            if (t.bad_first && !is_empty && !is_nan) poison_skipped(t, pn, out);
            if (t.entropy) {
                const std::size_t at = pn.r0 + r;
                t.entropy[at] = is_empty ? 0.0 : __builtin_log(static_cast<double>(lr)) - static_cast<double>(dots[r]) / static_cast<double>(lr);
                t.argmax[at] = is_empty || is_nan ? -1 : static_cast<std::int64_t>(pn.arg()[r]);
                t.max_weight[at] = is_empty ? 0.0 : 1.0 / static_cast<double>(lr);
            }
            if (t.first_token) finish_detectors(t, pn, r, lr, is_empty);
        }
        return empty;
    }

    // The panel's context rows O / l (LS: each row's l), zeros for an empty row (l = 0, whatever
    // 0 * V left in O), W columns at a time as a transpose of O's column vectors.
    static void write_context(const Task& t, const Panel& pn, const float* ls) {
        for (std::size_t c0 = 0; c0 < t.pv; c0 += W) {  // pv_pad is a multiple of NC = W: O's rows exist
            V r[W];
            for (std::size_t j = 0; j < W; ++j) r[j] = I::load(pn.op + (c0 + j) * W);
            I::transpose(r);
            const std::size_t n = t.pv - c0 < W ? t.pv - c0 : W;
            for (std::size_t i = 0; i < pn.n; ++i) {
                const V row = ls[i] == 0.0f ? I::zero() : I::mul(r[i], I::set1(1.0f / ls[i]));
                I::store_n(t.o + (pn.r0 + i) * t.ldo + c0, row, n);
            }
        }
    }

    static void poison_skipped(const Task& t, const Panel& pn, float* out) {
        for (std::size_t c = 0; c < t.pv; ++c)
            if (t.bad_first[c] <= t.bad_last[c] && (t.bad_first[c] < pn.covered_begin || t.bad_last[c] >= pn.covered_end))
                out[c] = __builtin_nanf("");
    }

    static void finish_detectors(const Task& t, const Panel& pn, std::size_t r, float lr, bool is_empty) {
        const double nan = __builtin_nan(""), inv = is_empty ? 0.0 : 1.0 / static_cast<double>(lr);
        const std::size_t at = pn.r0 + r, i = t.i0 + at;
        t.previous_token[at] = is_empty || i == 0 || i - 1 >= t.lk ? nan : pn.prev()[r] * inv;
        t.diagonal[at] = is_empty || !t.square ? nan : pn.diag()[r] * inv;
        t.first_token[at] = is_empty || t.lk == 0 ? nan : pn.first()[r] * inv;
    }

    // A panel of rows [r0, r0 + n) made ready for its key blocks: q packed, the ranges, zero sums.
    static void start(const Task& t, Panel& pn) {
        pack_q(t, pn);
        key_ranges(t, pn);
        for (std::size_t x = 2 * W; x < 6 * W; ++x) pn.lanes[x] = 0.0f;  // prev, diag, first, arg
        for (std::size_t x = 0; x < t.pv_pad * W; ++x) pn.op[x] = 0.0f;
        I::store(pn.max(), I::set1(-__builtin_inff())), I::store(pn.sum(), I::zero()), I::store(pn.dot(), I::zero());
        pn.covered_begin = pn.covered_end = pn.begin / NR * NR;
    }

    // The panel's key block from J0 (its blocks start at covered_begin, kBlockKeys apart).
    static void block(const Task& t, Panel& pn, std::size_t j0) {
        const std::size_t left = pn.end - j0, keys = left < kBlockKeys ? left : kBlockKeys;
        const std::size_t cols = (keys + NR - 1) / NR * NR;  // the pack is zero past lk
        pn.covered_end = j0 + cols;
        scores(t, pn, j0, cols);
        mask(t, pn, j0, cols);
        V m = I::load(pn.max()), l = I::load(pn.sum()), dot = I::load(pn.dot());
        const V corr = softmax(t, pn, j0, cols, m, l, dot);
        I::store(pn.max(), m), I::store(pn.sum(), l), I::store(pn.dot(), dot);
        if (t.first_token) record_detectors(t, pn, j0, cols, corr);
        context(t, pn, j0, cols, corr);
    }

    // Panels G of the task (N of them, from row R0), side by side: key block by key block, each
    // panel's own block grid, so a panel's sums are what it alone would compute. Returns their
    // empty rows.
    static std::size_t group(const Task& t, Panel* g, std::size_t n, std::size_t r0) {
        for (std::size_t i = 0; i < n; ++i) {
            g[i].r0 = r0 + i * W;
            g[i].n = t.rows - g[i].r0 < W ? t.rows - g[i].r0 : W;
            start(t, g[i]);
        }
        for (std::size_t step = 0, busy = n; busy > 0; ++step) {
            busy = 0;
            for (std::size_t i = 0; i < n; ++i) {
                const std::size_t j0 = g[i].covered_begin + step * kBlockKeys;
                if (j0 >= g[i].end) continue;
                block(t, g[i], j0);
                ++busy;
            }
        }
        std::size_t empty = 0;
        for (std::size_t i = 0; i < n; ++i) empty += finish(t, g[i], I::load(g[i].sum()), I::load(g[i].dot()));
        return empty;
    }

    // The task: its panels in groups of kGroupPanels. Returns its empty rows.
    static std::size_t run(const Task& t) {
        Panel g[kGroupPanels];
        float* const sp = t.scratch;  // one block's scores, shared: each panel's are used at once
        for (std::size_t i = 0; i < kGroupPanels; ++i) {
            g[i].sp = sp;
            g[i].qp = sp + kBlockKeys * W + i * (t.p + t.pv_pad + 16) * W;
            g[i].op = g[i].qp + t.p * W;
            g[i].lanes = g[i].op + t.pv_pad * W;
        }
        std::size_t empty = 0;
        for (std::size_t r0 = 0; r0 < t.rows; r0 += kGroupPanels * W) {
            const std::size_t left = (t.rows - r0 + W - 1) / W;
            empty += group(t, g, left < kGroupPanels ? left : kGroupPanels, r0);
        }
        return empty;
    }

    // K of one head (lk, P) at K with leading dim LDK into tiles of NR keys, [tile][P][NR], zero
    // past lk; V (lk, Pv) into rows of pv_pad, zero padded to a whole number of tiles.
    static void pack(const float* k, std::size_t ldk, const float* v, std::size_t ldv, std::size_t lk, std::size_t p,
                     std::size_t pv, std::size_t pv_pad, float* kpack, float* vpack) {
        const std::size_t tiles = (lk + NR - 1) / NR;
        for (std::size_t tile = 0; tile < tiles; ++tile)
            for (std::size_t d = 0; d < p; ++d)
                for (std::size_t jj = 0; jj < NR; ++jj) {
                    const std::size_t j = tile * NR + jj;
                    kpack[(tile * p + d) * NR + jj] = j < lk ? k[j * ldk + d] : 0.0f;
                }
        for (std::size_t j = 0; j < tiles * NR; ++j)
            for (std::size_t c = 0; c < pv_pad; ++c) vpack[j * pv_pad + c] = j < lk && c < pv ? v[j * ldv + c] : 0.0f;
    }
};

}  // namespace attntrace::fused
