#include "attntrace/pictures/heatmap.hpp"

#include <algorithm>
#include <cstdio>

#include "attntrace/pictures/colormap.hpp"
#include "attntrace/pictures/plot.hpp"
#include "terminal_text.hpp"

namespace attntrace {

char ramp_char(double v, double vmax) {
    const std::size_t levels = std::char_traits<char>::length(kAsciiRamp);
    if (!(vmax > 0) || !(v > 0)) return kAsciiRamp[0];
    const auto k = static_cast<std::size_t>(std::min(1.0, v / vmax) * double(levels - 1) + 0.5);
    return kAsciiRamp[std::min(k, levels - 1)];
}

std::string colour_escape(Rgb c, bool foreground) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "\x1b[%d;2;%d;%d;%dm", foreground ? 38 : 48, c.r, c.g, c.b);
    return buf;
}

std::string cell_text(std::size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string wrapped(const std::vector<std::string>& words, std::size_t width) {
    std::string out, line;
    for (std::string word : words) {
        if (!line.empty() && line.size() + 1 + word.size() > width) out += line + "\n", line.clear();
        for (; word.size() > width; word.erase(0, width)) out += word.substr(0, width) + "\n";
        line += (line.empty() ? "" : " ") + word;
    }
    return out + line + "\n";
}

std::vector<std::string> words_of(const std::string& text) {
    std::vector<std::string> words;
    for (std::size_t at = 0; at <= text.size();) {
        const std::size_t end = std::min(text.find(' ', at), text.size());
        if (end > at) words.push_back(text.substr(at, end - at));
        at = end + 1;
    }
    return words;
}

namespace {

// Rows of one head: the query index at the left (WIDTH_Q digits), then the cells, T (rows, cols)
// their places on the colour map.
std::string head_rows(const PooledWeights& g, const std::vector<float>& t, bool truecolor, std::size_t width_q) {
    std::string out;
    char index[32];
    const std::size_t step = truecolor ? 2 : 1;
    for (std::size_t r = 0; r < g.rows; r += step) {
        std::snprintf(index, sizeof index, "%*zu ", int(width_q), r * g.q_block);
        out += index;
        for (std::size_t c = 0; c < g.cols; ++c) {
            const double up = t[r * g.cols + c];
            if (!truecolor) {
                out.append(2, ramp_char(up, 1));
                continue;
            }
            out += colour_escape(viridis(up), true);
            out += r + 1 < g.rows ? colour_escape(viridis(t[(r + 1) * g.cols + c]), false) : "\x1b[49m";
            out += "\u2580";
        }
        out += truecolor ? "\x1b[0m\n" : "\n";
    }
    return out;
}

}  // namespace

std::string scale_line(const ColourMapping& mapping, bool truecolor, std::size_t width) {
    std::vector<std::string> words = words_of(mapping.legend());
    words.insert(words.begin(), "scale:");
    if (!truecolor) {  // the quoted ramp is one word: it starts with a space
        std::string ramp = kAsciiRamp;
        words.back() += ",";
        words.insert(words.end(), {"ramp", ramp.insert(0, 1, '"').append(1, '"')});
        return wrapped(words, width);
    }
    // the words, then a viridis bar of up to 24 cells from the lowest weight to the highest
    const std::size_t cells = std::min<std::size_t>(width, 24);
    std::string bar;
    for (std::size_t k = 0; k < cells; ++k)
        bar += colour_escape(viridis(cells > 1 ? double(k) / double(cells - 1) : 1.0), false) + " ";
    return wrapped(words, width) + bar + "\x1b[0m\n";
}

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
    const ColourMapping mapping = ColourMapping::of(style.scale, vmax);
    // Every line within the width: the header and the scale wrapped, the rows fitted by the pooling.
    const std::size_t width = std::max<std::size_t>(style.width, 1);
    std::string out = wrapped(words_of("heatmaps of batch " + std::to_string(style.batch) + ": rows are queries, columns keys; one cell = " +
                                  cell_text(g.q_block, "query", "queries") + " x " + cell_text(g.k_block, "key", "keys") +
                                  (g.q_block * g.k_block > 1 ? " (mean weight)" : "")),
                              width) +
                      scale_line(mapping, style.truecolor, width);
    for (auto h : heads) {
        std::string title = "head " + std::to_string(h);
        if (h < style.names.size() && !style.names[h].empty()) title += " (" + style.names[h] + ")";
        out += wrapped(words_of(title), width);
        out += head_rows(g, mapping.positions(g.plane(style.batch, h), g.rows, g.cols), style.truecolor, width_q);
    }
    return out;
}

}  // namespace attntrace
