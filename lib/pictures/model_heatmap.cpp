// Every head of a whole model as a terminal heatmap (model_pictures.hpp's model_heatmaps).
#include <algorithm>
#include <cstdio>

#include "attntrace/pictures/heatmap.hpp"
#include "attntrace/pictures/model_pictures.hpp"
#include "terminal_text.hpp"

namespace attntrace {

std::size_t ModelPictures::head_count() const { return weights.empty() ? 0 : weights.front().heads(); }

const std::string& ModelPictures::role(std::size_t k, std::size_t h) const {
    static const std::string none;
    const std::size_t at = k * head_count() + h;
    return at < heads.size() ? heads[at].role : none;
}

namespace {

constexpr std::size_t kRowLabelColumns = 10;  // a row's token at most
constexpr std::size_t kColumnLabelLines = 6;  // a column's token at most, one character a line

// One character of a label as a terminal shows it: its bytes (a code point with the zero-width
// ones after it) and the columns it takes.
struct Glyph {
    std::string bytes;
    std::size_t width = 1;
};

// Columns code point C takes: 2 for East Asian wide and full-width characters and emoji, 0 for
// combining marks, joiners and variation selectors, else 1.
std::size_t char_width(char32_t c) {
    if ((c >= 0x300 && c < 0x370) || (c >= 0x200B && c <= 0x200F) || (c >= 0xFE00 && c <= 0xFE0F) ||
        (c >= 0x20D0 && c < 0x2100) || (c >= 0xE0100 && c <= 0xE01EF))
        return 0;
    const bool wide = (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) || (c >= 0xAC00 && c <= 0xD7A3) ||
                      (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
                      (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1FAFF) || (c >= 0x20000 && c <= 0x3FFFD);
    return wide ? 2 : 1;
}

// The code point at S[I] and its length (an invalid byte reads as U+FFFD, one byte).
std::pair<char32_t, std::size_t> next_char(const std::string& s, std::size_t i) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return {0xFFFD, 1};
    char32_t c = n == 1 ? b : b & (0x7F >> n);
    for (std::size_t k = 1; k < n; ++k) {
        const auto cont = static_cast<unsigned char>(s[i + k]);
        if ((cont & 0xC0) != 0x80) return {0xFFFD, 1};
        c = c << 6 | (cont & 0x3F);
    }
    return {c, n};
}

// LABEL as glyphs; ASCII: the space mark U+2423 as '_', every other non-ASCII character as '?'.
std::vector<Glyph> glyphs(const std::string& label, bool ascii) {
    std::vector<Glyph> out;
    for (std::size_t i = 0; i < label.size();) {
        const auto [c, n] = next_char(label, i);
        const std::size_t w = char_width(c);
        if (ascii) {
            if (w > 0) out.push_back({c < 0x80 ? std::string(1, char(c)) : c == 0x2423 ? "_" : "?", 1});
        } else if (w == 0 && !out.empty()) {
            out.back().bytes += label.substr(i, n);
        } else if (w > 0) {
            out.push_back({label.substr(i, n), w});
        }
        i += n;
    }
    return out;
}

// LABEL cut to at most COLUMNS columns (a '~' marking a cut), right-aligned in COLUMNS.
std::string row_label(const std::string& label, std::size_t columns, bool ascii) {
    if (columns == 0) return "";
    std::string text;
    std::size_t used = 0;
    const auto g = glyphs(label, ascii);
    std::size_t total = 0;
    for (const auto& x : g) total += x.width;
    for (const auto& x : g) {
        if (used + x.width > columns - (total > columns ? 1 : 0)) break;
        text += x.bytes, used += x.width;
    }
    if (total > columns && columns > 0) text += '~', ++used;
    return std::string(columns - std::min(columns, used), ' ') + text;
}

// The tokens written down the columns: line k holds the k-th character of each column's label,
// each column two terminal columns wide, after INDENT spaces.
std::string column_labels(const std::vector<std::string>& labels, std::size_t indent, bool ascii) {
    std::vector<std::vector<Glyph>> cols;
    std::size_t lines = 0;
    for (const auto& label : labels) {
        cols.push_back(glyphs(label, ascii));
        if (cols.back().size() > kColumnLabelLines) cols.back().resize(kColumnLabelLines);
        lines = std::max(lines, cols.back().size());
    }
    std::string out;
    for (std::size_t k = 0; k < lines; ++k) {
        std::string line(indent, ' ');
        for (const auto& g : cols)
            line += k < g.size() ? g[k].bytes + (g[k].width == 1 ? " " : "") : "  ";
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

// How one head's block is laid out within a width.
struct Frame {
    std::size_t index_w = 1, label_w = 0, cols = 1;
    std::vector<std::string> row_labels, col_labels;  // (rows), (cols) of the pooled grid
};

Frame make_frame(const ModelPictures& m, std::size_t width, bool ascii) {
    Frame f;
    const std::size_t l = m.tokens.size();
    f.index_w = std::to_string(l ? l - 1 : 0).size();
    const std::size_t avail = width > f.index_w + 2 ? width - f.index_w - 2 : 0;
    std::size_t longest = 0;
    for (const auto& t : m.tokens) {
        std::size_t w = 0;
        for (const auto& g : glyphs(t, ascii)) w += g.width;
        longest = std::max(longest, w);
    }
    f.label_w = std::min({longest, kRowLabelColumns, avail / 3});
    f.cols = std::max<std::size_t>(1, (avail - f.label_w) / 2);
    return f;
}

std::string head_block(const ModelPictures& m, const PooledWeights& g, std::size_t k, std::size_t h,
                       const ColourMapping& mapping, const Frame& f, bool truecolor, std::size_t width) {
    std::string title = "layer " + std::to_string(m.layers[k]) + " head " + std::to_string(h);
    if (!m.role(k, h).empty()) title += " (" + m.role(k, h) + ")";
    std::string out(1, '\n');
    out += wrapped(words_of(title), width);
    out += column_labels(f.col_labels, f.index_w + 1 + f.label_w + (f.label_w ? 1 : 0), !truecolor);
    const std::vector<float> t = mapping.positions(g.plane(0, h), g.rows, g.cols);
    char index[32];
    for (std::size_t r = 0; r < g.rows; ++r) {
        std::snprintf(index, sizeof index, "%*zu ", int(f.index_w), r * g.q_block);
        out += index;
        if (f.label_w) out += f.row_labels[r] + " ";
        for (std::size_t c = 0; c < g.cols; ++c) {
            if (truecolor) out += colour_escape(viridis(t[r * g.cols + c]), false) + "  ";
            else out.append(2, ramp_char(t[r * g.cols + c], 1));
        }
        if (!truecolor)  // the darkest cells at the end of a row are spaces: none trail a line
            while (out.back() == ' ') out.pop_back();
        out += truecolor ? "\x1b[0m\n" : "\n";
    }
    return out;
}

// The label of each cell of an axis: the first token it covers.
std::vector<std::string> cell_labels(const std::vector<std::string>& tokens, std::size_t cells, std::size_t block) {
    std::vector<std::string> out(cells);
    for (std::size_t c = 0; c < cells; ++c) out[c] = c * block < tokens.size() ? tokens[c * block] : std::to_string(c * block);
    return out;
}

}  // namespace

std::string model_heatmaps(const ModelPictures& m, bool truecolor, std::size_t width) {
    width = std::max<std::size_t>(width, 1);
    Frame f = make_frame(m, width, !truecolor);
    std::vector<PooledWeights> grids;
    double vmax = 0;
    for (const auto& w : m.weights) {
        grids.push_back(repool(w, f.cols, f.cols));
        for (float v : grids.back().cells) vmax = std::max(vmax, double(v));
    }
    const ColourMapping mapping = ColourMapping::of(m.scale, vmax);
    std::string out = wrapped(words_of(m.title), width);
    if (grids.empty()) return out;
    const PooledWeights& g0 = grids.front();
    for (const auto& label : cell_labels(m.tokens, g0.rows, g0.q_block)) f.row_labels.push_back(row_label(label, f.label_w, !truecolor));
    f.col_labels = cell_labels(m.tokens, g0.cols, g0.k_block);
    out += wrapped(words_of("every head: rows are queries, columns keys; one cell = " + cell_text(g0.q_block, "query", "queries") +
                            " x " + cell_text(g0.k_block, "key", "keys") + (g0.q_block * g0.k_block > 1 ? " (mean weight)" : "")),
                   width);
    out += scale_line(mapping, truecolor, width);
    for (std::size_t k = 0; k < grids.size(); ++k)
        for (std::size_t h = 0; h < grids[k].heads(); ++h) out += head_block(m, grids[k], k, h, mapping, f, truecolor, width);
    return out;
}

}  // namespace attntrace
