// Every head of a whole model in one image (model_pictures.hpp's model_plot_png / model_plot_svg):
// a row of thumbnails per kept layer, a column per head, a colour bar naming the scale.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "attntrace/pictures/model_pictures.hpp"
#include "attntrace/tensor/errors.hpp"
#include "canvas.hpp"

namespace attntrace {

namespace {

constexpr int kMargin = 12, kGap = 14, kCaptionH = 14;
// The tokens are written on both axes of every thumbnail up to this many (one per cell, a cell as
// tall as a line of text) and as long as the image stays within kMaxSide pixels a side.
constexpr std::size_t kLabelledTokens = 40;
constexpr int kMaxSide = 6000;
constexpr int kTickH = 14;                   // a line of small text is at most this tall
constexpr std::size_t kPngCells = 112;       // cells a side of a pooled thumbnail in the PNG
constexpr std::size_t kSvgRects = 60000;     // the SVG's <rect> cells in all

struct Thumb {
    std::size_t k = 0, h = 0;  // the kept layer's place, the head
    int x = 0, y = 0;          // the cells' top-left corner
};

struct Grid {
    std::vector<PooledWeights> cells;  // (K) the pooled planes at the picture's resolution
    std::size_t rows = 0, cols = 0, q_block = 1, k_block = 1;
    bool labelled = false;              // tokens on both axes of every thumbnail
    int cell = 1, tick_h = 0, label_w = 0, label_h = 0, row_label_w = 0, top = 0;
    std::vector<std::string> q_ticks, k_ticks;
    std::vector<Thumb> thumbs;
    ColourMapping mapping;
    int slot_w = 0, slot_h = 0, bar_x = 0, bar_y = 0, bar_h = 0, width = 0, height = 0;
};

// Pixels a side of a pooled thumbnail: 112, less when there are so many heads or layers that the
// image would pass kMaxSide pixels.
int thumbnail_side(std::size_t heads, std::size_t layers) {
    return std::clamp(kMaxSide / int(std::max<std::size_t>({heads, layers, 1})) - 2 * kGap, 24, 112);
}

bool labelled(std::size_t length, std::size_t heads, std::size_t layers) {
    return length <= kLabelledTokens && (int(length) * (kTickH + 1) + 80) * int(std::max(heads, layers)) <= kMaxSide;
}

// The cell size and labels: every token on both axes when the sentence is short enough.
void choose_resolution(Grid& g, const ModelPictures& m, std::size_t max_cells) {
    const std::size_t l = m.tokens.size(), heads = m.head_count(), layers = m.weights.size();
    g.tick_h = std::min(kTickH, text_size("Ag", TextSize::small).height);
    g.labelled = l <= max_cells && labelled(l, heads, layers);
    const std::size_t cells = g.labelled ? l : std::min(max_cells, kModelPictureCells);
    for (const auto& w : m.weights) g.cells.push_back(repool(w, cells, cells));
    const PooledWeights& p = g.cells.front();
    g.rows = p.rows, g.cols = p.cols, g.q_block = p.q_block, g.k_block = p.k_block;
    g.cell = g.labelled ? g.tick_h + 1 : std::max(1, thumbnail_side(heads, layers) / int(std::max(g.rows, g.cols)));
    // pooled: a tick every 4 lines of text, on the first column's rows and the last layer's columns
    const std::size_t stride = g.labelled ? 1 : std::size_t((4 * g.tick_h + g.cell - 1) / g.cell);
    g.q_ticks = axis_ticks(g.rows, g.q_block, stride, m.tokens);
    g.k_ticks = axis_ticks(g.cols, g.k_block, stride, m.tokens);
    g.label_w = widest_text(g.q_ticks, TextSize::small) + 4;
    g.label_h = widest_text(g.k_ticks, TextSize::small) + 4;
}

Grid make_grid(const ModelPictures& m, std::size_t max_cells) {
    Grid g;
    choose_resolution(g, m, max_cells);
    float vmax = 0;
    for (const auto& p : g.cells)
        for (float v : p.cells) vmax = std::max(vmax, v);
    g.mapping = ColourMapping::of(m.scale, vmax);
    const int side_w = int(g.cols) * g.cell, side_h = int(g.rows) * g.cell;
    g.row_label_w = text_size("layer " + std::to_string(m.layers.empty() ? 0 : m.layers.back()), TextSize::label, true).width + 8;
    const int each_w = g.labelled ? g.label_w : 0, each_h = g.labelled ? g.label_h : 0;
    g.slot_w = std::max(each_w + side_w, text_size("head 00 previous-token", TextSize::small).width) + kGap;
    g.slot_h = kCaptionH + side_h + each_h + kGap;
    g.top = kMargin + 22 + 18 + kColourBarAbove;
    const int left = kMargin + g.row_label_w + (g.labelled ? 0 : g.label_w);
    for (std::size_t k = 0; k < g.cells.size(); ++k)
        for (std::size_t h = 0; h < g.cells[k].heads(); ++h)
            g.thumbs.push_back({k, h, left + int(h) * g.slot_w + each_w, g.top + int(k) * g.slot_h + kCaptionH});
    const int heads = int(m.head_count()), layers = int(g.cells.size());
    g.bar_x = left + heads * g.slot_w;
    g.bar_y = g.top + kCaptionH;
    g.bar_h = std::max(120, std::min(side_h, 400));
    const int title_w = std::max(text_size(m.title, TextSize::title, true).width,
                                 text_size("colour scale: " + g.mapping.legend(), TextSize::label).width);
    g.width = std::max(g.bar_x + colour_bar_width(g.mapping), kMargin + title_w) + kMargin;
    g.height = std::max(g.top + layers * g.slot_h + (g.labelled ? 0 : g.label_h), g.bar_y + g.bar_h + g.tick_h) + kMargin;
    return g;
}

void draw_axes(Painter& p, const Grid& g, const Thumb& t, bool first_column, bool last_row) {
    const int mid = (g.cell - g.tick_h) / 2;
    if (g.labelled || first_column)
        for (std::size_t r = 0; r < g.rows; ++r)
            p.text({t.x - 3, t.y + int(r) * g.cell + mid, g.q_ticks[r], TextSize::small, Anchor::end, false, "qlabel"});
    if (g.labelled || last_row)
        for (std::size_t c = 0; c < g.cols; ++c)
            p.text({t.x + int(c) * g.cell + (g.cell + g.tick_h) / 2, t.y + int(g.rows) * g.cell + 3, g.k_ticks[c],
                    TextSize::small, Anchor::start, true, "klabel"});
}

void draw_thumb(Painter& p, const Grid& g, const ModelPictures& m, const Thumb& t) {
    const std::string role = m.role(t.k, t.h);
    p.text({t.x, t.y - kCaptionH, "head " + std::to_string(t.h) + (role.empty() ? "" : " " + role), TextSize::small,
            Anchor::start, false, "head-title", !role.empty()});
    p.begin_panel({{{"layer", std::to_string(m.layers[t.k])}, {"head", std::to_string(t.h)},
                    {"rows", std::to_string(g.rows)}, {"cols", std::to_string(g.cols)}}});
    const std::vector<float> pos = g.mapping.positions(g.cells[t.k].plane(0, t.h), g.rows, g.cols);
    for (std::size_t r = 0; r < g.rows; ++r)
        for (std::size_t c = 0; c < g.cols; ++c)
            p.rect(t.x + int(c) * g.cell, t.y + int(r) * g.cell, g.cell, g.cell, viridis(pos[r * g.cols + c]));
    p.end_panel();
    draw_axes(p, g, t, t.h == 0, t.k + 1 == g.cells.size());
}

void draw(Painter& p, const Grid& g, const ModelPictures& m) {
    p.text({kMargin, kMargin, m.title, TextSize::title, Anchor::start, false, "title", true});
    p.text({kMargin, kMargin + 22, "colour scale: " + g.mapping.legend() + "; rows are queries, columns keys", TextSize::label,
            Anchor::start, false, "legend"});
    for (std::size_t k = 0; k < g.cells.size(); ++k) {
        const int y = g.top + int(k) * g.slot_h + kCaptionH + (int(g.rows) * g.cell - g.tick_h) / 2;
        p.text({kMargin, y, "layer " + std::to_string(m.layers[k]), TextSize::label, Anchor::start, false, "layer-title", true});
    }
    for (const auto& t : g.thumbs) draw_thumb(p, g, m, t);
    draw_colour_bar(p, g.bar_x, g.bar_y, g.bar_h, g.mapping);
}

void check_drawable(const ModelPictures& m) {
    if (m.weights.empty() || m.tokens.empty()) throw UsageError("plot: no layer's weights to draw");
}

}  // namespace

std::string model_plot_png(const ModelPictures& m) {
    check_drawable(m);
    const Grid g = make_grid(m, kPngCells);
    RasterPainter painter(g.width, g.height);
    draw(painter, g, m);
    nlohmann::json places = nlohmann::json::array();
    for (const auto& t : g.thumbs)
        places.push_back({{"layer", m.layers[t.k]}, {"head", t.h}, {"x", t.x}, {"y", t.y}, {"cell", g.cell},
                          {"rows", g.rows}, {"cols", g.cols}});
    return painter.png("attntrace:panels", places.dump());
}

std::string model_plot_svg(const ModelPictures& m) {
    check_drawable(m);
    const std::size_t thumbs = std::max<std::size_t>(1, m.weights.size() * m.head_count());
    const auto side = std::size_t(std::sqrt(double(kSvgRects) / double(thumbs)));
    const Grid g = make_grid(m, std::clamp<std::size_t>(side, 8, 64));
    SvgPainter painter;
    painter.out = svg_begin(g.width, g.height);
    draw(painter, g, m);
    return painter.out + kSvgEnd;
}

std::size_t model_plot_bytes(std::size_t layers, std::size_t heads, std::size_t length) {
    const std::size_t side = labelled(length, heads, layers) ? length * (kTickH + 1) + 100
                                                             : std::size_t(thumbnail_side(heads, layers)) + 100;
    const std::size_t width = heads * (side + kGap) + 400, height = layers * (side + kGap + kCaptionH) + 300;
    return width * height * 4;  // RGB24, 4 bytes a pixel
}

}  // namespace attntrace
