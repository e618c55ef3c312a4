// A labelled table of values as a picture (matrix_plot.hpp).
#include "attntrace/pictures/matrix_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "canvas.hpp"

namespace attntrace {

namespace {

constexpr int kMargin = 12, kGap = 16, kBarW = 14, kLineH = 17;
constexpr std::size_t kCellChars = 10;      // a cell's text is cut to this many characters
constexpr std::size_t kNumberedCells = 400;  // tables up to this many cells carry their values as text
const Rgb kNaNGrey{190, 190, 190};

struct Layout {
    std::vector<std::string> texts;  // (R, C) what each cell says ("" none)
    double top = 1;
    int cell_w = 0, cell_h = 0, grid_x = 0, grid_y = 0, label_h = 0, bar_x = 0, bar_h = 0;
    int width = 0, height = 0;
};

std::string number_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2g", v);
    return buf;
}

Rgb cell_colour(const MatrixPicture& m, double v, double top) {
    if (std::isnan(v)) return kNaNGrey;
    if (m.diverging) return red_blue(0.5 + 0.5 * v / top);
    return viridis(v / top);
}

// Light text on a dark cell, ink on a light one.
Rgb text_on(Rgb c) { return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b < 128 ? Rgb{255, 255, 255} : kInk; }

double scale_top(const MatrixPicture& m) {
    if (m.top > 0) return m.top;
    double top = 0;
    for (double v : m.values)
        if (std::isfinite(v)) top = std::max(top, m.diverging ? std::abs(v) : v);
    return top > 0 ? top : 1;
}

void check(const MatrixPicture& m) {
    const std::size_t cells = m.row_labels.size() * m.col_labels.size();
    if (cells == 0) throw UsageError("plot: nothing to draw");
    if (m.values.size() != cells || (!m.cell_text.empty() && m.cell_text.size() != cells) ||
        (!m.marked_cols.empty() && m.marked_cols.size() != m.col_labels.size()))
        throw UsageError("plot: the table's values and labels disagree in size");
}

std::vector<std::string> column_labels(const MatrixPicture& m) {
    std::vector<std::string> out;
    for (std::size_t c = 0; c < m.col_labels.size(); ++c)
        out.push_back((!m.marked_cols.empty() && m.marked_cols[c] ? "▶ " : "") + clip_text(m.col_labels[c], 16));
    return out;
}

Layout lay_out(const MatrixPicture& m) {
    Layout g;
    g.top = scale_top(m);
    const std::size_t rows = m.row_labels.size(), cols = m.col_labels.size();
    if (!m.cell_text.empty())
        for (const auto& t : m.cell_text) g.texts.push_back(clip_text(t, kCellChars));
    else if (rows * cols <= kNumberedCells)
        for (double v : m.values) g.texts.push_back(number_text(v));
    const int text_h = text_size("Ag", TextSize::small).height;
    g.cell_h = std::max(22, text_h + 8);
    g.cell_w = g.texts.empty() ? g.cell_h : std::clamp(widest_text(g.texts, TextSize::small) + 10, g.cell_h, 110);
    const int row_label_w = std::max(widest_text(m.row_labels, TextSize::tick), text_size(m.row_axis, TextSize::label, true).width);
    g.grid_x = kMargin + row_label_w + 8;
    g.grid_y = kMargin + 24 + int(m.lines.size()) * kLineH + 10 + kColourBarAbove + kLineH;
    g.label_h = widest_text(column_labels(m), TextSize::tick) + 6;
    const int grid_w = int(cols) * g.cell_w, grid_h = int(rows) * g.cell_h;
    g.bar_x = g.grid_x + grid_w + kGap;
    g.bar_h = std::clamp(grid_h, 120, 400);
    int text_w = text_size(m.title, TextSize::title, true).width;
    for (const auto& line : m.lines) text_w = std::max(text_w, text_size(line, TextSize::label).width);
    const int bar_w = kBarW + 8 + std::max(widest_text({number_text(g.top), number_text(-g.top)}, TextSize::tick),
                                           text_size(m.legend, TextSize::tick).width - kBarW - 8);
    g.width = std::max(g.bar_x + bar_w, kMargin + text_w) + kMargin;
    g.height = std::max(g.grid_y + grid_h + g.label_h + kLineH, g.grid_y + g.bar_h + kLineH) + kMargin;
    return g;
}

void draw_bar(Painter& p, const MatrixPicture& m, const Layout& g) {
    const int y = g.grid_y, h = g.bar_h, tick_h = text_size("0", TextSize::tick).height;
    p.text({g.bar_x, y - kColourBarAbove, m.legend, TextSize::tick, Anchor::start, false, "scale-name"});
    for (int k = 0; k < h; ++k) {
        const double t = 1.0 - double(k) / double(std::max(1, h - 1));  // top = the largest
        p.rect(g.bar_x, y + k, kBarW, 1, m.diverging ? red_blue(t) : viridis(t));
    }
    const std::vector<std::pair<double, double>> marks =
        m.diverging ? std::vector<std::pair<double, double>>{{1, g.top}, {0.5, 0}, {0, -g.top}}
                    : std::vector<std::pair<double, double>>{{1, g.top}, {0.5, g.top / 2}, {0, 0}};
    for (const auto& [t, v] : marks) {
        const int at = y + int(std::lround((h - 1) * (1.0 - t)));
        p.rect(g.bar_x + kBarW, at, 4, 1, kInk);
        p.text({g.bar_x + kBarW + 7, at - tick_h / 2, number_text(v), TextSize::tick, Anchor::start, false, "scale"});
    }
}

void draw_cells(Painter& p, const MatrixPicture& m, const Layout& g) {
    const std::size_t rows = m.row_labels.size(), cols = m.col_labels.size();
    const int text_h = text_size("Ag", TextSize::small).height;
    p.begin_panel({{{"rows", std::to_string(rows)}, {"cols", std::to_string(cols)}}});
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) {
            const Rgb colour = cell_colour(m, m.values[r * cols + c], g.top);
            const int x = g.grid_x + int(c) * g.cell_w, y = g.grid_y + int(r) * g.cell_h;
            p.rect(x, y, g.cell_w - 1, g.cell_h - 1, colour);
            if (!g.texts.empty())
                p.text({x + g.cell_w / 2, y + (g.cell_h - text_h) / 2, g.texts[r * cols + c], TextSize::small, Anchor::middle,
                        false, "cell", false, text_on(colour)});
        }
    p.end_panel();
}

void draw(Painter& p, const MatrixPicture& m, const Layout& g) {
    p.text({kMargin, kMargin, m.title, TextSize::title, Anchor::start, false, "title", true});
    for (std::size_t i = 0; i < m.lines.size(); ++i)
        p.text({kMargin, kMargin + 24 + int(i) * kLineH, m.lines[i], TextSize::label, Anchor::start, false, "line"});
    const int tick_h = text_size("0", TextSize::tick).height;
    p.text({g.grid_x - 8, g.grid_y - kLineH, m.row_axis, TextSize::label, Anchor::end, false, "row-axis", true});
    for (std::size_t r = 0; r < m.row_labels.size(); ++r)
        p.text({g.grid_x - 8, g.grid_y + int(r) * g.cell_h + (g.cell_h - tick_h) / 2, m.row_labels[r], TextSize::tick,
                Anchor::end, false, "rlabel"});
    const std::vector<std::string> labels = column_labels(m);
    const int below = g.grid_y + int(m.row_labels.size()) * g.cell_h + 4;
    for (std::size_t c = 0; c < labels.size(); ++c)
        p.text({g.grid_x + int(c) * g.cell_w + (g.cell_w + tick_h) / 2, below, labels[c], TextSize::tick, Anchor::start,
                true, "clabel", !m.marked_cols.empty() && m.marked_cols[c]});
    p.text({g.grid_x, below + g.label_h, m.col_axis, TextSize::label, Anchor::start, false, "col-axis", true});
    draw_cells(p, m, g);
    draw_bar(p, m, g);
}

}  // namespace

std::string matrix_png(const MatrixPicture& m) {
    check(m);
    const Layout g = lay_out(m);
    RasterPainter painter(g.width, g.height);
    draw(painter, m, g);
    const nlohmann::json place = {{"x", g.grid_x}, {"y", g.grid_y}, {"cell_w", g.cell_w}, {"cell_h", g.cell_h},
                                  {"rows", m.row_labels.size()}, {"cols", m.col_labels.size()}};
    return painter.png("attntrace:matrix", place.dump());
}

std::string matrix_svg(const MatrixPicture& m) {
    check(m);
    const Layout g = lay_out(m);
    SvgPainter painter;
    painter.out = svg_begin(g.width, g.height);
    draw(painter, m, g);
    return painter.out + kSvgEnd;
}

}  // namespace attntrace
