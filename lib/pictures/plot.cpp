#include "attntrace/pictures/plot.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "attntrace/pictures/colormap.hpp"
#include "attntrace/tensor/errors.hpp"
#include "canvas.hpp"

namespace attntrace {

std::vector<std::size_t> chosen_heads(const PooledWeights& weights, std::size_t batch,
                                      const std::vector<std::size_t>& heads) {
    if (batch >= weights.batches())
        throw UsageError("batch: " + std::to_string(batch) + " is out of range (the weights have " +
                         std::to_string(weights.batches()) + " batch rows)");
    for (auto h : heads)
        if (h >= weights.heads())
            throw UsageError("shown heads: head " + std::to_string(h) + " is out of range (there are " +
                             std::to_string(weights.heads()) + " heads)");
    if (!heads.empty()) return heads;
    std::vector<std::size_t> all(weights.heads());
    for (std::size_t h = 0; h < all.size(); ++h) all[h] = h;
    return all;
}

std::string escape_markup(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '&') out += "&amp;";
        else if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '"') out += "&quot;";
        else if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') out += ' ';
        else out += c;
    }
    return out;
}

namespace {

constexpr int kMargin = 12, kTitleH = 22, kLegendH = 18, kPanelTitleH = 16, kGap = 16;

// One panel of the grid: its cells (rows, cols) and where its top-left corner goes.
struct Panel {
    long head = -1;            // -1: the mean over the heads
    std::string name;          // "head 3", "mean of heads"
    std::vector<float> cells;  // (rows, cols)
    int x = 0, y = 0;
};

// Where everything goes, in pixels; the PNG and the SVG painters draw the same layout.
struct Layout {
    PooledWeights grid;        // the pooled planes at the picture's resolution
    int cell = 1;              // pixels per cell
    int label_w = 0, label_h = 0, tick_h = 0;
    std::vector<std::string> q_ticks, k_ticks;  // (rows), (cols): "" where no tick
    std::vector<Panel> panels;
    ColourMapping mapping;
    int bar_x = 0, bar_y = 0, bar_h = 0;
    int width = 0, height = 0;
};

void place_panels(Layout& l, const PooledWeights& w, const PlotOptions& o) {
    for (auto h : chosen_heads(w, o.batch, o.heads)) {
        const float* p = l.grid.plane(o.batch, h);
        l.panels.push_back({long(h), "head " + std::to_string(h), std::vector<float>(p, p + l.grid.rows * l.grid.cols)});
    }
    if (l.grid.heads() > 1) l.panels.push_back({-1, "mean of heads", mean_over_heads(l.grid, o.batch)});
    float vmax = 0;
    for (const auto& p : l.panels)
        for (float v : p.cells) vmax = std::max(vmax, v);
    l.mapping = ColourMapping::of(o.scale, vmax);
}

Layout make_layout(const PooledWeights& w, const PlotOptions& o, std::size_t max_cells) {
    Layout l;
    l.grid = repool(w, max_cells, max_cells);
    const std::size_t rows = l.grid.rows, cols = l.grid.cols;
    l.cell = std::clamp(240 / int(std::max<std::size_t>({rows, cols, 1})), 1, 28);
    // every cell's tick when a line of text fits in a cell, otherwise one every 2 lines
    l.tick_h = text_size("Ag", TextSize::tick).height;
    const std::size_t stride = l.cell >= l.tick_h ? 1 : std::size_t((2 * l.tick_h + l.cell - 1) / l.cell);
    l.q_ticks = axis_ticks(rows, l.grid.q_block, stride, o.query_labels);
    l.k_ticks = axis_ticks(cols, l.grid.k_block, stride, o.key_labels);
    l.label_w = widest_text(l.q_ticks, TextSize::tick) + 6;
    l.label_h = widest_text(l.k_ticks, TextSize::tick) + 6;
    place_panels(l, w, o);
    const int pw = int(cols) * l.cell, ph = int(rows) * l.cell;
    const int slot_w = l.label_w + pw + kGap, slot_h = kPanelTitleH + ph + l.label_h + kGap / 2;
    const int ncol = int(std::ceil(std::sqrt(double(l.panels.size()))));
    const int nrow = (int(l.panels.size()) + ncol - 1) / ncol;
    const int top = kMargin + kTitleH + kLegendH + kColourBarAbove;
    for (std::size_t i = 0; i < l.panels.size(); ++i) {
        l.panels[i].x = kMargin + (int(i) % ncol) * slot_w + l.label_w;
        l.panels[i].y = top + (int(i) / ncol) * slot_h + kPanelTitleH;
    }
    l.bar_x = kMargin + ncol * slot_w;
    l.bar_y = top + kPanelTitleH;
    l.bar_h = std::max(ph, 120);
    const int title_w = text_size(o.title, TextSize::title, true).width + 2 * kMargin;
    const int legend_w = text_size("colour scale: " + l.mapping.legend(), TextSize::label).width + 2 * kMargin;
    l.width = std::max({l.bar_x + colour_bar_width(l.mapping) + kMargin, title_w, legend_w});
    l.height = std::max(top + nrow * slot_h, l.bar_y + l.bar_h + l.tick_h) + kMargin;
    return l;
}

void draw_panel(Painter& p, const Layout& l, const Panel& panel) {
    const std::size_t rows = l.grid.rows, cols = l.grid.cols;
    p.text({panel.x, panel.y - kPanelTitleH, panel.name, TextSize::label, Anchor::start, false, "panel-title"});
    p.begin_panel({{{"head", std::to_string(panel.head)}, {"rows", std::to_string(rows)}, {"cols", std::to_string(cols)}}});
    const std::vector<float> t = l.mapping.positions(panel.cells.data(), rows, cols);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
            p.rect(panel.x + int(c) * l.cell, panel.y + int(r) * l.cell, l.cell, l.cell, viridis(t[r * cols + c]));
    p.end_panel();
    const int mid = (l.cell - l.tick_h) / 2;
    for (std::size_t r = 0; r < rows; ++r)
        p.text({panel.x - 4, panel.y + int(r) * l.cell + mid, l.q_ticks[r], TextSize::tick, Anchor::end, false, "qlabel"});
    for (std::size_t c = 0; c < cols; ++c)
        p.text({panel.x + int(c) * l.cell + (l.cell + l.tick_h) / 2, panel.y + int(rows) * l.cell + 4, l.k_ticks[c],
                TextSize::tick, Anchor::start, true, "klabel"});
}

void draw(Painter& p, const Layout& l, const PlotOptions& o) {
    p.text({kMargin, kMargin, o.title, TextSize::title, Anchor::start, false, "title", true});
    p.text({kMargin, kMargin + kTitleH, "colour scale: " + l.mapping.legend(), TextSize::label, Anchor::start, false, "legend"});
    for (const auto& panel : l.panels) draw_panel(p, l, panel);
    draw_colour_bar(p, l.bar_x, l.bar_y, l.bar_h, l.mapping);
}

}  // namespace

std::string plot_png(const PooledWeights& weights, const PlotOptions& options) {
    const Layout l = make_layout(weights, options, 240);
    RasterPainter painter(l.width, l.height);
    draw(painter, l, options);
    nlohmann::json places = nlohmann::json::array();
    for (const auto& p : l.panels)
        places.push_back({{"head", p.head}, {"x", p.x}, {"y", p.y}, {"cell", l.cell}, {"rows", l.grid.rows},
                          {"cols", l.grid.cols}});
    return painter.png("attntrace:panels", places.dump());
}

std::string plot_svg(const PooledWeights& weights, const PlotOptions& options) {
    const Layout l = make_layout(weights, options, 64);
    SvgPainter painter;
    painter.out = svg_begin(l.width, l.height);
    draw(painter, l, options);
    return painter.out + kSvgEnd;
}

}  // namespace attntrace
