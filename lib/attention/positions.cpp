// The norms, rotary embeddings, ALiBi slopes and key visibility declared in positions.hpp.
#include "attntrace/attention/positions.hpp"
#include "attntrace/tensor/threads.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <numbers>

namespace attntrace {

template <class T>
void layer_norm(T* x, std::size_t rows, std::size_t e, const T* w, const T* b, double eps) {
    for (std::size_t r = 0; r < rows; ++r) {
        T* row = x + r * e;
        double mean = 0;
        for (std::size_t i = 0; i < e; ++i) mean += row[i];
        mean /= static_cast<double>(e);
        double var = 0;
        for (std::size_t i = 0; i < e; ++i) var += (row[i] - mean) * (row[i] - mean);
        const double inv = 1.0 / std::sqrt(var / static_cast<double>(e) + eps);
        for (std::size_t i = 0; i < e; ++i)
            row[i] = static_cast<T>((row[i] - mean) * inv * w[i] + (b ? double(b[i]) : 0.0));
    }
}

template <class T>
void rms_norm(T* x, std::size_t rows, std::size_t d, std::size_t ld, const T* w, double eps) {
    for (std::size_t r = 0; r < rows; ++r) {
        T* row = x + r * ld;
        double sq = 0;
        for (std::size_t i = 0; i < d; ++i) sq += double(row[i]) * row[i];
        const double inv = 1.0 / std::sqrt(sq / static_cast<double>(d) + eps);
        for (std::size_t i = 0; i < d; ++i) row[i] = static_cast<T>(double(w[i]) * (row[i] * inv));
    }
}

std::vector<double> rope_inv_freq(std::size_t rotary_dims, double theta, const RopeScaling& s, bool long_factors) {
    std::vector<double> inv(rotary_dims / 2);
    for (std::size_t i = 0; i < inv.size(); ++i)
        inv[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(rotary_dims));
    if (s.type == "longrope") {  // _compute_longrope_parameters: 1 / (ext_factors * base^(2i / R))
        const std::vector<double>& ext = long_factors ? s.long_factor : s.short_factor;
        for (std::size_t i = 0; i < inv.size() && i < ext.size(); ++i) inv[i] /= ext[i];
    } else if (s.type == "linear") {
        for (double& f : inv) f /= s.factor;
    } else if (s.type == "llama3") {
        const double low_wavelen = s.original_max_position / s.low_freq_factor;
        const double high_wavelen = s.original_max_position / s.high_freq_factor;
        for (double& f : inv) {
            const double wavelen = 2 * std::numbers::pi / f;
            const double scaled = wavelen > low_wavelen ? f / s.factor : f;
            const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                                  (s.high_freq_factor - s.low_freq_factor);
            const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
            f = medium ? (1 - smooth) * scaled / s.factor + smooth * scaled : scaled;
        }
    }
    return inv;
}

namespace {

// cos and sin (times the attention scaling) of positions [pos0, pos0 + l) at each of the (R/2)
// frequencies, (l, R/2) each: what apply_rotary multiplies by.
struct RotaryTable {
    std::vector<double> inv_freq;
    double scaling = 1;
    std::size_t pos0 = 0, l = 0;
    std::vector<double> cos, sin;
};

// Tables up to this many (position, frequency) entries are kept for the next call (16 bytes each).
constexpr std::size_t kKeptTableEntries = std::size_t{1} << 18;
constexpr std::size_t kKeptTables = 4;

// The table for INV_FREQ, SCALING and positions [POS0, POS0 + L): made here, or (KEEP) the one a
// call with the same made (a forward's q and k, and every layer of a model, rotate the same
// positions: made for each, the 2 x L x R/2 sines and cosines in double had taken the rotary from
// 0.28 to 0.45 ms a layer at L = 256, R = 64 on the Xeon of docs/performance.md). Kept: the last
// few small tables.
std::shared_ptr<const RotaryTable> rotary_table(const std::vector<double>& inv_freq, double scaling, std::size_t pos0,
                                                std::size_t l, bool keep) {
    static std::mutex mutex;
    static std::vector<std::shared_ptr<const RotaryTable>> kept;  // newest last
    const std::size_t half = inv_freq.size();
    if (keep) {
        const std::lock_guard<std::mutex> lock(mutex);
        for (const auto& t : kept)
            if (t->pos0 == pos0 && t->l == l && t->scaling == scaling && t->inv_freq == inv_freq) return t;
    }
    auto t = std::make_shared<RotaryTable>(RotaryTable{inv_freq, scaling, pos0, l, std::vector<double>(l * half),
                                                       std::vector<double>(l * half)});
    for (std::size_t i = 0; i < l; ++i) {
        const double pos = static_cast<double>(pos0 + i);
        for (std::size_t f = 0; f < half; ++f) {
            t->cos[i * half + f] = std::cos(pos * inv_freq[f]) * scaling;
            t->sin[i * half + f] = std::sin(pos * inv_freq[f]) * scaling;
        }
    }
    if (keep) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (kept.size() == kKeptTables) kept.erase(kept.begin());
        kept.push_back(t);
    }
    return t;
}

// One head's R rotated dims at HEAD by the angles whose cos and sin are COS, SIN (R/2 each):
// rotate-half pairs (f, f + R/2), interleaved pairs (2f, 2f + 1).
template <class T>
void rotate_head(T* head, std::size_t half, RotaryStyle style, const double* cos, const double* sin) {
    if (style == RotaryStyle::half) {
        for (std::size_t f = 0; f < half; ++f) {
            const double x1 = head[f], x2 = head[f + half];
            head[f] = static_cast<T>(x1 * cos[f] - x2 * sin[f]);
            head[f + half] = static_cast<T>(x2 * cos[f] + x1 * sin[f]);
        }
        return;
    }
    for (std::size_t f = 0; f < half; ++f) {
        const double x1 = head[2 * f], x2 = head[2 * f + 1];
        head[2 * f] = static_cast<T>(x1 * cos[f] - x2 * sin[f]);
        head[2 * f + 1] = static_cast<T>(x2 * cos[f] + x1 * sin[f]);
    }
}

// The table's rows for positions [pos0 + i0, pos0 + i1) of a larger L: the part of a table too
// large to keep that one call makes at a time.
constexpr std::size_t kPositionsAtOnce = 1024;
// Rotated pairs a worker takes at least (a task's start is some microseconds).
constexpr std::size_t kPairsPerTask = 32768;

}  // namespace

template <class T>
void apply_rotary(T* x, std::size_t b, std::size_t l, std::size_t heads, std::size_t p, std::size_t ld,
                  const Rotary& rotary, std::size_t pos0, std::size_t threads) {
    const std::size_t half = rotary.dims / 2;
    const bool long_rope = !rotary.long_inv_freq.empty() && pos0 + l > rotary.long_after;
    const std::vector<double>& inv_freq = long_rope ? rotary.long_inv_freq : rotary.inv_freq;
    const bool whole = l * half <= kKeptTableEntries;
    for (std::size_t i0 = 0; i0 < l; i0 += whole ? l : kPositionsAtOnce) {
        const std::size_t i1 = whole ? l : std::min(l, i0 + kPositionsAtOnce);
        // a block of a longer L is not kept: the next call's first blocks would have pushed it out
        const auto table = rotary_table(inv_freq, rotary.attention_scaling, pos0 + i0, i1 - i0, whole);
        // positions in blocks over the workers: each row's rotation is its own (the same numbers on
        // any thread count); 0.28 ms a layer on one thread at L = 256, 24 heads of q and k
        const std::size_t rows = i1 - i0, blocks = std::min(threads, std::max<std::size_t>(1, rows * b * heads * half / kPairsPerTask));
        const std::size_t per = (rows + blocks - 1) / blocks;
        parallel_for(blocks, blocks, [&](std::size_t blk, std::size_t) {
            for (std::size_t i = i0 + blk * per; i < std::min(i1, i0 + (blk + 1) * per); ++i) {
                const double* cos = table->cos.data() + (i - i0) * half;
                const double* sin = table->sin.data() + (i - i0) * half;
                for (std::size_t bi = 0; bi < b; ++bi)
                    for (std::size_t h = 0; h < heads; ++h) rotate_head(x + (bi * l + i) * ld + h * p, half, rotary.style, cos, sin);
            }
        });
    }
}

std::vector<double> alibi_slopes(std::size_t heads) {
    std::vector<double> slopes;
    if (heads == 0) return slopes;
    const std::size_t closest = std::size_t{1} << static_cast<std::size_t>(std::floor(std::log2(double(heads))));
    const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(double(closest)) - 3)));
    for (std::size_t i = 1; i <= closest; ++i) slopes.push_back(std::pow(base, double(i)));
    if (closest != heads) {
        const double extra = std::pow(2.0, -std::pow(2.0, -(std::log2(double(2 * closest)) - 3)));
        const std::size_t remaining = std::min(closest, heads - closest);
        for (std::size_t i = 0; i < remaining; ++i) slopes.push_back(std::pow(extra, double(2 * i + 1)));
    }
    return slopes;
}

KeyRange visible_keys(const KeyVisibility& v, std::size_t i, std::size_t lq, std::size_t lk) {
    if (!v.any()) return {0, lk};
    // the query's position among the keys: i, or i + Lk - Lq (negative: it sees nothing)
    const std::ptrdiff_t pos = static_cast<std::ptrdiff_t>(i) +
                               (v.lower_right ? static_cast<std::ptrdiff_t>(lk) - static_cast<std::ptrdiff_t>(lq) : 0);
    if (pos < 0) return {0, 0};
    const std::size_t end = std::min(lk, static_cast<std::size_t>(pos) + 1);
    std::size_t begin = 0;
    if (v.window && static_cast<std::size_t>(pos) + 1 > *v.window) begin = static_cast<std::size_t>(pos) + 1 - *v.window;
    return {std::min(begin, end), end};
}

template void layer_norm<float>(float*, std::size_t, std::size_t, const float*, const float*, double);
template void layer_norm<double>(double*, std::size_t, std::size_t, const double*, const double*, double);
template void rms_norm<float>(float*, std::size_t, std::size_t, std::size_t, const float*, double);
template void rms_norm<double>(double*, std::size_t, std::size_t, std::size_t, const double*, double);
template void apply_rotary<float>(float*, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,
                                  const Rotary&, std::size_t, std::size_t);
template void apply_rotary<double>(double*, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,
                                   const Rotary&, std::size_t, std::size_t);

}  // namespace attntrace
