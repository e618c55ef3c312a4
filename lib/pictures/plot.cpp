#include "attntrace/pictures/plot.hpp"

#include <dlfcn.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "attntrace/pictures/colormap.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/dynamic_library.hpp"
#include "font5x7.hpp"

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

constexpr int kMargin = 12, kTitleH = 30, kPanelTitleH = 14, kGap = 16, kBarW = 14;
constexpr int kTickSpacing = 9, kSparseTicks = 20;  // pixels between tick labels (the font is 7 high)

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
    int label_w = 0, label_h = 0;
    std::size_t q_stride = 1, k_stride = 1;  // a tick every this many cells
    std::vector<std::string> q_ticks, k_ticks;  // (rows), (cols): "" where no tick
    std::vector<Panel> panels;
    float vmax = 0;
    int bar_x = 0, bar_y = 0, bar_h = 0;
    int width = 0, height = 0;
};

std::string clip(std::string s, std::size_t n) { return s.size() <= n ? s : s.substr(0, n - 1) + "~"; }

// Tick text for each cell of an axis: the label (or index) of the first token the cell covers.
std::vector<std::string> ticks(std::size_t cells, std::size_t block, std::size_t stride,
                               const std::vector<std::string>& labels) {
    std::vector<std::string> out(cells);
    for (std::size_t c = 0; c < cells; c += stride) {
        const std::size_t token = c * block;
        out[c] = clip(token < labels.size() ? labels[token] : std::to_string(token), 12);
    }
    return out;
}

int longest(const std::vector<std::string>& texts) {
    std::size_t n = 0;
    for (const auto& t : texts) n = std::max(n, t.size());
    return static_cast<int>(n);
}

std::string scale_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

void place_panels(Layout& l, const PooledWeights& w, const PlotOptions& o) {
    for (auto h : chosen_heads(w, o.batch, o.heads)) {
        const float* p = l.grid.plane(o.batch, h);
        l.panels.push_back({long(h), "head " + std::to_string(h), std::vector<float>(p, p + l.grid.rows * l.grid.cols)});
    }
    if (l.grid.heads() > 1) l.panels.push_back({-1, "mean of heads", mean_over_heads(l.grid, o.batch)});
    for (const auto& p : l.panels)
        for (float v : p.cells) l.vmax = std::max(l.vmax, v);
    if (!(l.vmax > 0)) l.vmax = 1;  // an all-zero picture still gets a scale
}

Layout make_layout(const PooledWeights& w, const PlotOptions& o, std::size_t max_cells) {
    Layout l;
    l.grid = repool(w, max_cells, max_cells);
    const std::size_t rows = l.grid.rows, cols = l.grid.cols;
    l.cell = std::clamp(240 / int(std::max<std::size_t>({rows, cols, 1})), 1, 28);
    // every cell's tick when the font fits in a cell, otherwise one every kSparseTicks pixels
    l.q_stride = l.k_stride = l.cell >= kTickSpacing ? 1 : std::size_t((kSparseTicks + l.cell - 1) / l.cell);
    l.q_ticks = ticks(rows, l.grid.q_block, l.q_stride, o.query_labels);
    l.k_ticks = ticks(cols, l.grid.k_block, l.k_stride, o.key_labels);
    l.label_w = longest(l.q_ticks) * font::kAdvance + 6;
    l.label_h = longest(l.k_ticks) * font::kAdvance + 6;
    place_panels(l, w, o);
    const int pw = int(cols) * l.cell, ph = int(rows) * l.cell;
    const int slot_w = l.label_w + pw + kGap, slot_h = kPanelTitleH + ph + l.label_h + kGap / 2;
    const int ncol = int(std::ceil(std::sqrt(double(l.panels.size()))));
    const int nrow = (int(l.panels.size()) + ncol - 1) / ncol;
    for (std::size_t i = 0; i < l.panels.size(); ++i) {
        l.panels[i].x = kMargin + (int(i) % ncol) * slot_w + l.label_w;
        l.panels[i].y = kMargin + kTitleH + (int(i) / ncol) * slot_h + kPanelTitleH;
    }
    l.bar_x = kMargin + ncol * slot_w;
    l.bar_y = kMargin + kTitleH + kPanelTitleH;
    l.bar_h = std::max(ph, 120);
    const int title_w = int(o.title.size()) * font::kAdvance * 2 + 2 * kMargin;
    l.width = std::max(l.bar_x + kBarW + 8 + 8 * font::kAdvance + kMargin, title_w);
    l.height = std::max(kMargin + kTitleH + nrow * slot_h, l.bar_y + l.bar_h + 16) + kMargin;
    return l;
}

enum class Anchor { start, end, middle };

// What a layout is drawn with: rectangles and one-line texts (SIZE 1: ticks, 2: the title).
class Painter {
public:
    virtual ~Painter() = default;
    virtual void rect(int x, int y, int w, int h, Rgb c) = 0;
    // Horizontal text with its top at Y; vertical text reads downward from (X, Y), ink to the left of X.
    virtual void text(int x, int y, const std::string& s, int size, Anchor a, bool vertical, const char* cls) = 0;
    virtual void begin_panel(const Panel&, std::size_t /*rows*/, std::size_t /*cols*/) {}
    virtual void end_panel() {}
};

const Rgb kInk{40, 40, 40};

void draw_panel(Painter& p, const Layout& l, const Panel& panel) {
    const std::size_t rows = l.grid.rows, cols = l.grid.cols;
    p.text(panel.x, panel.y - kPanelTitleH + 2, panel.name, 1, Anchor::start, false, "panel-title");
    p.begin_panel(panel, rows, cols);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
            p.rect(panel.x + int(c) * l.cell, panel.y + int(r) * l.cell, l.cell, l.cell,
                   viridis(double(panel.cells[r * cols + c]) / double(l.vmax)));
    p.end_panel();
    const int mid = (l.cell - font::kHeight) / 2;
    for (std::size_t r = 0; r < rows; ++r)
        if (!l.q_ticks[r].empty())
            p.text(panel.x - 4, panel.y + int(r) * l.cell + mid, l.q_ticks[r], 1, Anchor::end, false, "qlabel");
    for (std::size_t c = 0; c < cols; ++c)
        if (!l.k_ticks[c].empty())
            p.text(panel.x + int(c) * l.cell + (l.cell + font::kHeight) / 2, panel.y + int(rows) * l.cell + 4,
                   l.k_ticks[c], 1, Anchor::start, true, "klabel");
}

void draw_colour_bar(Painter& p, const Layout& l) {
    for (int y = 0; y < l.bar_h; ++y)  // top = vmax
        p.rect(l.bar_x, l.bar_y + y, kBarW, 1, viridis(1.0 - double(y) / double(std::max(1, l.bar_h - 1))));
    for (int k = 0; k <= 2; ++k) {
        const int y = l.bar_y + (l.bar_h - 1) * (2 - k) / 2;
        p.rect(l.bar_x + kBarW, y, 4, 1, kInk);
        p.text(l.bar_x + kBarW + 7, y - font::kHeight / 2, scale_text(double(l.vmax) * k / 2.0), 1, Anchor::start,
               false, "scale");
    }
}

void draw(Painter& p, const Layout& l, const PlotOptions& o) {
    p.text(kMargin, kMargin, o.title, 2, Anchor::start, false, "title");
    for (const auto& panel : l.panels) draw_panel(p, l, panel);
    draw_colour_bar(p, l);
}

// ---- PNG ------------------------------------------------------------------------------------------

class RasterPainter final : public Painter {
public:
    RasterPainter(int w, int h) : w_(w), h_(h), px_(std::size_t(w) * std::size_t(h) * 3, 255) {}
    void rect(int x, int y, int w, int h, Rgb c) override {
        for (int yy = std::max(0, y); yy < std::min(h_, y + h); ++yy)
            for (int xx = std::max(0, x); xx < std::min(w_, x + w); ++xx) put(xx, yy, c);
    }
    void text(int x, int y, const std::string& s, int size, Anchor a, bool vertical, const char*) override {
        const int len = int(s.size()) * font::kAdvance * size - size;
        const int shift = a == Anchor::end ? len : a == Anchor::middle ? len / 2 : 0;
        for (std::size_t i = 0; i < s.size(); ++i)
            for (int gx = 0; gx < font::kWidth; ++gx)
                for (int gy = 0; gy < font::kHeight; ++gy) {
                    if (!(font::column(s[i], gx) >> gy & 1)) continue;
                    const int along = int(i) * font::kAdvance * size + gx * size - shift;
                    if (vertical)
                        rect(x - (gy + 1) * size, y + along, size, size, kInk);
                    else
                        rect(x + along, y + gy * size, size, size, kInk);
                }
    }
    const std::vector<std::uint8_t>& pixels() const { return px_; }

private:
    void put(int x, int y, Rgb c) {
        auto* p = &px_[(std::size_t(y) * std::size_t(w_) + std::size_t(x)) * 3];
        p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }
    int w_, h_;
    std::vector<std::uint8_t> px_;  // (h, w, 3) RGB
};

// libpng, loaded on the first PNG written rather than at start-up: linked in, it and libz cost
// every run about 0.5 ms of mapping and relocation, and only --plot FILE.png uses them.
#define PNG_SYMBOLS(X)                                                                                 \
    X(png_create_write_struct) X(png_create_info_struct) X(png_destroy_write_struct)                      \
    X(png_set_longjmp_fn) /* behind png.h's png_jmpbuf */ X(png_get_io_ptr) X(png_set_write_fn)           \
    X(png_set_IHDR) X(png_set_text) X(png_write_info) X(png_write_row) X(png_write_end)
struct LibPng {
    ATTNTRACE_SYMBOL_FIELDS(PNG_SYMBOLS)
};

// dlopen of the runtime library by its soname, else the one found at build time (as gemm.cpp does
// for OpenBLAS). Throws OutputError when neither loads.
LibPng load_png() {
    void* handle = open_library("libpng16.so.16", ATTNTRACE_PNG_LIBRARY);
    if (!handle) throw OutputError(std::string("libpng16 could not be loaded (") + dlerror() + ")");
    LibPng lib;
    const std::string missing = ATTNTRACE_BIND_SYMBOLS(PNG_SYMBOLS, handle, lib);
    if (!missing.empty()) throw OutputError("libpng16 has no symbol " + missing);
    return lib;
}

// The loaded libpng; loads it on the first call (a failed load throws, and the next call tries again).
const LibPng& libpng() {
    static const LibPng lib = load_png();
    return lib;
}

extern "C" void png_append(png_structp png, png_bytep data, png_size_t n) {
    static_cast<std::string*>(libpng().png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}
extern "C" void png_no_flush(png_structp) {}

// RGB PIXELS (h, w, 3) as PNG bytes, with the tEXt chunk KEY = TEXT. Throws OutputError when libpng
// cannot be loaded or fails.
std::string encode_png(const std::vector<std::uint8_t>& pixels, int w, int h, const std::string& key,
                       const std::string& text) {
    const LibPng& lib = libpng();
    std::string out;
    png_structp png = lib.png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png ? lib.png_create_info_struct(png) : nullptr;
    if (!info) {
        lib.png_destroy_write_struct(&png, nullptr);
        throw OutputError("cannot start the PNG encoder (out of memory?)");
    }
    if (setjmp(*lib.png_set_longjmp_fn(png, longjmp, sizeof(jmp_buf)))) {  // png.h's png_jmpbuf(png)
        lib.png_destroy_write_struct(&png, &info);
        throw OutputError("the PNG encoder failed");
    }
    lib.png_set_write_fn(png, &out, png_append, png_no_flush);
    lib.png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_text chunk{};
    chunk.compression = PNG_TEXT_COMPRESSION_NONE;
    chunk.key = const_cast<char*>(key.c_str());
    chunk.text = const_cast<char*>(text.c_str());
    chunk.text_length = text.size();
    lib.png_set_text(png, info, &chunk, 1);
    lib.png_write_info(png, info);
    for (int y = 0; y < h; ++y)
        lib.png_write_row(png, const_cast<png_bytep>(&pixels[std::size_t(y) * std::size_t(w) * 3]));
    lib.png_write_end(png, nullptr);
    lib.png_destroy_write_struct(&png, &info);
    return out;
}

// ---- SVG ------------------------------------------------------------------------------------------

class SvgPainter final : public Painter {
public:
    std::string out;
    void rect(int x, int y, int w, int h, Rgb c) override {
        out += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(w) +
               "\" height=\"" + std::to_string(h) + "\" fill=\"" + hex_colour(c) + "\"/>\n";
    }
    void text(int x, int y, const std::string& s, int size, Anchor a, bool vertical, const char* cls) override {
        const int px = size == 1 ? 9 : 16;
        const char* anchor = a == Anchor::end ? "end" : a == Anchor::middle ? "middle" : "start";
        std::string at = "x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\"";
        std::string rotate = vertical ? " transform=\"rotate(90 " + std::to_string(x) + " " + std::to_string(y) + ")\"" : "";
        out += "<text class=\"" + std::string(cls) + "\" " + at + rotate + " font-size=\"" + std::to_string(px) +
               "\" text-anchor=\"" + anchor + "\" dominant-baseline=\"" + (vertical ? "text-after-edge" : "hanging") +
               "\">" + escape_markup(s) + "</text>\n";
    }
    void begin_panel(const Panel& p, std::size_t rows, std::size_t cols) override {
        out += "<g class=\"panel\" data-head=\"" + std::to_string(p.head) + "\" data-rows=\"" + std::to_string(rows) +
               "\" data-cols=\"" + std::to_string(cols) + "\">\n";
    }
    void end_panel() override { out += "</g>\n"; }
};

}  // namespace

std::string plot_png(const PooledWeights& weights, const PlotOptions& options) {
    const Layout l = make_layout(weights, options, 240);
    RasterPainter painter(l.width, l.height);
    draw(painter, l, options);
    nlohmann::json places = nlohmann::json::array();
    for (const auto& p : l.panels)
        places.push_back({{"head", p.head}, {"x", p.x}, {"y", p.y}, {"cell", l.cell}, {"rows", l.grid.rows},
                          {"cols", l.grid.cols}});
    return encode_png(painter.pixels(), l.width, l.height, "attntrace:panels", places.dump());
}

std::string plot_svg(const PooledWeights& weights, const PlotOptions& options) {
    const Layout l = make_layout(weights, options, 64);
    SvgPainter painter;
    painter.out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  std::to_string(l.width) + "\" height=\"" + std::to_string(l.height) + "\" viewBox=\"0 0 " +
                  std::to_string(l.width) + " " + std::to_string(l.height) +
                  "\" font-family=\"DejaVu Sans Mono, monospace\" fill=\"#282828\">\n<rect width=\"100%\" "
                  "height=\"100%\" fill=\"#ffffff\"/>\n";
    draw(painter, l, options);
    painter.out += "</svg>\n";
    return painter.out;
}

}  // namespace attntrace
