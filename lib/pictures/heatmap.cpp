#include "attntrace/pictures/heatmap.hpp"

#include <algorithm>
#include <cstdio>

#include "attntrace/pictures/colormap.hpp"
#include "attntrace/pictures/plot.hpp"

namespace attntrace {

char ramp_char(double v, double vmax) {
    const std::size_t levels = std::char_traits<char>::length(kAsciiRamp);
    if (!(vmax > 0) || !(v > 0)) return kAsciiRamp[0];
    const auto k = static_cast<std::size_t>(std::min(1.0, v / vmax) * double(levels - 1) + 0.5);
    return kAsciiRamp[std::min(k, levels - 1)];
}

namespace {

std::string colour_escape(Rgb c, bool foreground) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "\x1b[%d;2;%d;%d;%dm", foreground ? 38 : 48, c.r, c.g, c.b);
    return buf;
}

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

std::string cell_text(std::size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Rows of one head: the query index at the left (WIDTH_Q digits), then the cells.
std::string head_rows(const PooledWeights& g, const float* w, double vmax, bool truecolor, std::size_t width_q) {
    std::string out;
    char index[32];
    const std::size_t step = truecolor ? 2 : 1;
    for (std::size_t r = 0; r < g.rows; r += step) {
        std::snprintf(index, sizeof index, "%*zu ", int(width_q), r * g.q_block);
        out += index;
        for (std::size_t c = 0; c < g.cols; ++c) {
            const double up = w[r * g.cols + c];
            if (!truecolor) {
                out.append(2, ramp_char(up, vmax));
                continue;
            }
            out += colour_escape(viridis(up / vmax), true);
            out += r + 1 < g.rows ? colour_escape(viridis(w[(r + 1) * g.cols + c] / vmax), false) : "\x1b[49m";
            out += "\u2580";
        }
        out += truecolor ? "\x1b[0m\n" : "\n";
    }
    return out;
}

std::string scale_line(double vmax, bool truecolor) {
    if (!truecolor) return "scale: ramp \"" + std::string(kAsciiRamp) + "\" from 0 to " + number(vmax) + "\n";
    std::string bar;
    for (int k = 0; k < 24; ++k) bar += colour_escape(viridis(k / 23.0), false) + " ";
    return "scale: 0 " + bar + "\x1b[0m " + number(vmax) + "\n";
}

}  // namespace

std::string render_heatmaps(const PooledWeights& weights, const HeatmapStyle& style) {
    const auto heads = chosen_heads(weights, style.batch, style.heads);
    const std::size_t width_q = std::to_string(weights.lq ? weights.lq - 1 : 0).size();
    const std::size_t room = style.width > width_q + 2 ? style.width - width_q - 2 : 1;
    const std::size_t max_cols = std::max<std::size_t>(1, style.truecolor ? room : room / 2);
    // Square cells: truecolor half-blocks are as tall as wide; an ASCII cell is two characters wide.
    const PooledWeights g = repool(weights, max_cols, max_cols);
    double vmax = 0;
    for (auto h : heads) {
        const float* w = g.plane(style.batch, h);
        for (std::size_t i = 0; i < g.rows * g.cols; ++i) vmax = std::max(vmax, double(w[i]));
    }
    std::string out = "heatmaps of batch " + std::to_string(style.batch) + ": rows are queries, columns keys; one cell = " +
                      cell_text(g.q_block, "query", "queries") + " x " + cell_text(g.k_block, "key", "keys") +
                      (g.q_block * g.k_block > 1 ? " (mean weight)" : "") + "\n" + scale_line(vmax, style.truecolor);
    for (auto h : heads) {
        out += "head ";
        out += std::to_string(h);
        if (h < style.names.size() && !style.names[h].empty()) out.append(" (").append(style.names[h]).append(")");
        out += '\n';
        out += head_rows(g, g.plane(style.batch, h), vmax, style.truecolor, width_q);
    }
    return out;
}

}  // namespace attntrace
