// The norms, rotary embeddings, ALiBi slopes and key visibility declared in positions.hpp.
#include "attntrace/attention/positions.hpp"

#include <algorithm>
#include <cmath>
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

template <class T>
void apply_rotary(T* x, std::size_t b, std::size_t l, std::size_t heads, std::size_t p, std::size_t ld,
                  const Rotary& rotary, std::size_t pos0) {
    const std::size_t half = rotary.dims / 2;
    const bool long_rope = !rotary.long_inv_freq.empty() && pos0 + l > rotary.long_after;
    const std::vector<double>& inv_freq = long_rope ? rotary.long_inv_freq : rotary.inv_freq;
    std::vector<double> cos(half), sin(half);
    for (std::size_t i = 0; i < l; ++i) {
        const double pos = static_cast<double>(pos0 + i);
        for (std::size_t f = 0; f < half; ++f) {
            cos[f] = std::cos(pos * inv_freq[f]) * rotary.attention_scaling;
            sin[f] = std::sin(pos * inv_freq[f]) * rotary.attention_scaling;
        }
        for (std::size_t bi = 0; bi < b; ++bi)
            for (std::size_t h = 0; h < heads; ++h) {
                T* head = x + (bi * l + i) * ld + h * p;
                for (std::size_t f = 0; f < half; ++f) {
                    // rotate-half pairs (f, f + R/2); interleaved pairs (2f, 2f + 1)
                    const std::size_t a = rotary.style == RotaryStyle::half ? f : 2 * f;
                    const std::size_t c = rotary.style == RotaryStyle::half ? f + half : 2 * f + 1;
                    const double x1 = head[a], x2 = head[c];
                    head[a] = static_cast<T>(x1 * cos[f] - x2 * sin[f]);
                    head[c] = static_cast<T>(x2 * cos[f] + x1 * sin[f]);
                }
            }
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
                                  const Rotary&, std::size_t);
template void apply_rotary<double>(double*, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,
                                   const Rotary&, std::size_t);

}  // namespace attntrace
