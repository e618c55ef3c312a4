#include "canvas.hpp"

#include <cairo.h>
#include <pango/pangocairo.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numbers>

#include "attntrace/pictures/plot.hpp"
#include "attntrace/tensor/dynamic_library.hpp"
#include "attntrace/tensor/errors.hpp"
#include "zlib.hpp"

namespace attntrace {

namespace {

// cairo, pango and pangocairo (and through them glib, fontconfig, freetype and harfbuzz), loaded on
// the first picture file rather than at start-up: linked, they would cost every run a dozen
// libraries' mapping and relocation, and only --plot uses them. libpangocairo's handle finds
// the symbols of the libraries it depends on (dlsym searches them).
#define PANGO_CAIRO_SYMBOLS(X)                                                                                    \
    X(cairo_image_surface_create) X(cairo_image_surface_get_data) X(cairo_image_surface_get_stride)                 \
    X(cairo_surface_flush) X(cairo_surface_mark_dirty) X(cairo_surface_status) X(cairo_surface_destroy)             \
    X(cairo_surface_write_to_png_stream) X(cairo_create) X(cairo_destroy) X(cairo_save) X(cairo_restore)            \
    X(cairo_translate) X(cairo_rotate) X(cairo_move_to) X(cairo_set_source_rgb) X(pango_cairo_create_layout)        \
    X(pango_cairo_update_layout) X(pango_cairo_show_layout) X(pango_layout_set_text)                               \
    X(pango_layout_set_font_description) X(pango_layout_get_pixel_size) X(pango_font_description_from_string)      \
    X(pango_font_description_free) X(g_object_unref)
struct LibPangoCairo {
    ATTNTRACE_SYMBOL_FIELDS(PANGO_CAIRO_SYMBOLS)
};

LibPangoCairo load_pango_cairo() {
    void* handle = open_library("libpangocairo-1.0.so.0", ATTNTRACE_PANGOCAIRO_LIBRARY);
    if (!handle) throw OutputError(std::string("pangocairo could not be loaded (") + dlerror() + ")");
    LibPangoCairo lib;
    const std::string missing = ATTNTRACE_BIND_SYMBOLS(PANGO_CAIRO_SYMBOLS, handle, lib);
    if (!missing.empty()) throw OutputError("pangocairo has no symbol " + missing);
    return lib;
}

// The loaded libraries; loads them on the first call (a failed load throws, and the next call tries again).
const LibPangoCairo& pc() {
    static const LibPangoCairo lib = load_pango_cairo();
    return lib;
}

// The fonts, first choice first; fontconfig falls back per character on the other installed fonts
// (Noto's scripts, Noto Color Emoji). Noto Color Emoji is not named: named, it takes the digits and
// the spaces next to an emoji (they have emoji glyphs too).
constexpr const char* kFontFamilies = "DejaVu Sans,Noto Sans CJK SC";

// A pango font description for SIZE, owned.
struct Font {
    PangoFontDescription* d;
    Font(TextSize size, bool bold) {
        const std::string spec = std::string(kFontFamilies) + (bold ? " Bold " : " ") +
                                 std::to_string(static_cast<int>(size)) + "px";
        d = pc().pango_font_description_from_string(spec.c_str());
    }
    ~Font() { pc().pango_font_description_free(d); }
    Font(const Font&) = delete;
    Font& operator=(const Font&) = delete;
};

// A cairo context on SURFACE with a pango layout to set text in.
struct TextContext {
    cairo_t* cr;
    PangoLayout* layout;
    explicit TextContext(cairo_surface_t* surface)
        : cr(pc().cairo_create(surface)), layout(pc().pango_cairo_create_layout(cr)) {}
    ~TextContext() {
        pc().g_object_unref(layout);
        pc().cairo_destroy(cr);
    }
    TextContext(const TextContext&) = delete;
    TextContext& operator=(const TextContext&) = delete;
    TextExtent set(const std::string& text, TextSize size, bool bold) {
        const Font font(size, bold);
        pc().pango_layout_set_font_description(layout, font.d);
        pc().pango_layout_set_text(layout, text.data(), static_cast<int>(text.size()));
        TextExtent e;
        pc().pango_layout_get_pixel_size(layout, &e.width, &e.height);
        return e;
    }
};

// Where text is measured: a 1x1 image of its own, used under a lock.
struct Measurer {
    std::mutex lock;
    cairo_surface_t* surface = pc().cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
    TextContext context{surface};
};

Measurer& measurer() {
    static Measurer* m = new Measurer;  // kept to the end of the process, like the libraries
    return *m;
}

// PNG's chunk: length, type, data, CRC of type and data.
std::string png_chunk(const std::string& type, const std::string& data) {
    auto be32 = [](std::uint32_t v) {
        return std::string{char(v >> 24), char(v >> 16 & 0xff), char(v >> 8 & 0xff), char(v & 0xff)};
    };
    return be32(static_cast<std::uint32_t>(data.size())) + type + data + be32(crc32_of(type + data));
}

extern "C" cairo_status_t append_png(void* closure, const unsigned char* data, unsigned int length) {
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
}

}  // namespace

TextExtent text_size(const std::string& text, TextSize size, bool bold) {
    Measurer& m = measurer();
    std::lock_guard guard(m.lock);
    return m.context.set(text, size, bold);
}

std::string clip_text(const std::string& s, std::size_t n) {
    if (n == 0) return "";
    std::size_t chars = 0, at = 0;
    for (; at < s.size(); ++at)
        if ((static_cast<unsigned char>(s[at]) & 0xC0) != 0x80 && chars++ == n) break;
    if (at >= s.size()) return s;
    // N characters kept, less one for the ellipsis
    std::size_t cut = at;
    do --cut;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80);
    return s.substr(0, cut) + "\u2026";
}

std::vector<std::string> axis_ticks(std::size_t cells, std::size_t block, std::size_t stride,
                                    const std::vector<std::string>& labels) {
    std::vector<std::string> out(cells);
    for (std::size_t c = 0; c < cells; c += std::max<std::size_t>(stride, 1)) {
        const std::size_t token = c * block;
        out[c] = clip_text(token < labels.size() ? labels[token] : std::to_string(token), kTickChars);
    }
    return out;
}

int widest_text(const std::vector<std::string>& texts, TextSize size) {
    int w = 0;
    for (const auto& t : texts)
        if (!t.empty()) w = std::max(w, text_size(t, size).width);
    return w;
}

// ---- raster ---------------------------------------------------------------------------------------

struct RasterPainter::Surface {
    cairo_surface_t* surface = nullptr;
    std::unique_ptr<TextContext> context;
    int width = 0, height = 0;
    bool pixels_written = false;  // since cairo last drew: cairo must be told before it draws again
    bool cairo_drew = false;      // since the pixels were last written: flushed before writing them
};

RasterPainter::RasterPainter(int width, int height) : s_(new Surface) {
    s_->width = width, s_->height = height;
    s_->surface = pc().cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    if (pc().cairo_surface_status(s_->surface) != CAIRO_STATUS_SUCCESS) {
        pc().cairo_surface_destroy(s_->surface);
        delete s_;
        throw OutputError("cannot make a " + std::to_string(width) + " x " + std::to_string(height) + " image");
    }
    s_->context = std::make_unique<TextContext>(s_->surface);
    rect(0, 0, width, height, Rgb{255, 255, 255});
}

RasterPainter::~RasterPainter() {
    s_->context.reset();
    pc().cairo_surface_destroy(s_->surface);
    delete s_;
}

void RasterPainter::rect(int x, int y, int w, int h, Rgb c) {
    if (s_->cairo_drew) pc().cairo_surface_flush(s_->surface), s_->cairo_drew = false;
    unsigned char* data = pc().cairo_image_surface_get_data(s_->surface);
    const int stride = pc().cairo_image_surface_get_stride(s_->surface);
    const std::uint32_t pixel = std::uint32_t(c.r) << 16 | std::uint32_t(c.g) << 8 | c.b;  // RGB24: 0x00rrggbb
    for (int yy = std::max(0, y); yy < std::min(s_->height, y + h); ++yy) {
        auto* row = reinterpret_cast<std::uint32_t*>(data + std::size_t(yy) * std::size_t(stride));
        std::fill(row + std::max(0, x), row + std::max(std::max(0, x), std::min(s_->width, x + w)), pixel);
    }
    s_->pixels_written = true;
}

void RasterPainter::text(const TextSpec& t) {
    if (t.text.empty()) return;
    if (s_->pixels_written) pc().cairo_surface_mark_dirty(s_->surface), s_->pixels_written = false;
    const auto& lib = pc();
    cairo_t* cr = s_->context->cr;
    const TextExtent e = s_->context->set(t.text, t.size, t.bold);
    const int shift = t.anchor == Anchor::end ? e.width : t.anchor == Anchor::middle ? e.width / 2 : 0;
    lib.cairo_save(cr);
    lib.cairo_set_source_rgb(cr, t.colour.r / 255.0, t.colour.g / 255.0, t.colour.b / 255.0);
    lib.cairo_translate(cr, t.x, t.y);
    if (t.vertical) lib.cairo_rotate(cr, std::numbers::pi / 2);  // the line runs down the page, its top to the right
    lib.cairo_move_to(cr, -shift, 0);
    lib.pango_cairo_update_layout(cr, s_->context->layout);
    lib.pango_cairo_show_layout(cr, s_->context->layout);
    lib.cairo_restore(cr);
    s_->cairo_drew = true;
}

std::string RasterPainter::png(const std::string& key, const std::string& value) {
    if (s_->pixels_written) pc().cairo_surface_mark_dirty(s_->surface), s_->pixels_written = false;
    std::string out;
    if (pc().cairo_surface_write_to_png_stream(s_->surface, append_png, &out) != CAIRO_STATUS_SUCCESS)
        throw OutputError("the PNG encoder (cairo) failed");
    // the signature (8 bytes) and the IHDR chunk (25 bytes), then ours
    constexpr std::size_t kAfterHeader = 8 + 25;
    if (out.size() < kAfterHeader || out.compare(12, 4, "IHDR") != 0) throw OutputError("cairo wrote no PNG header");
    return out.insert(kAfterHeader, png_chunk("tEXt", key + '\0' + value));
}

// ---- SVG ------------------------------------------------------------------------------------------

void SvgPainter::rect(int x, int y, int w, int h, Rgb c) {
    out += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(w) +
           "\" height=\"" + std::to_string(h) + "\" fill=\"" + hex_colour(c) + "\"/>\n";
}

void SvgPainter::text(const TextSpec& t) {
    if (t.text.empty()) return;
    const char* anchor = t.anchor == Anchor::end ? "end" : t.anchor == Anchor::middle ? "middle" : "start";
    const std::string x = std::to_string(t.x), y = std::to_string(t.y);
    // the box's top at y: the "hanging" baseline sits near the top of the em box, as pango's layout
    // top does; a vertical line turns about its start
    out += "<text class=\"" + std::string(t.cls) + "\" x=\"" + x + "\" y=\"" + y + "\"" +
           (t.vertical ? " transform=\"rotate(90 " + x + " " + y + ")\"" : "") + " font-size=\"" +
           std::to_string(static_cast<int>(t.size)) + "\"" + (t.bold ? " font-weight=\"bold\"" : "") +
           (t.colour == kInk ? "" : " fill=\"" + hex_colour(t.colour) + "\"") +
           " text-anchor=\"" + anchor + "\" dominant-baseline=\"hanging\">" + escape_markup(t.text) + "</text>\n";
}

void SvgPainter::begin_panel(const PanelMark& m) {
    out += "<g class=\"panel\"";
    for (const auto& [name, value] : m.data) out += " data-" + name + "=\"" + escape_markup(value) + "\"";
    out += ">\n";
}

void SvgPainter::end_panel() { out += "</g>\n"; }

namespace {
constexpr int kBarW = 14;
}

void draw_colour_bar(Painter& p, int x, int y, int h, const ColourMapping& mapping) {
    p.text({x, y - kColourBarAbove, std::string(colour_scale_name(mapping.scale)) + " scale", TextSize::tick,
            Anchor::start, false, "scale-name"});
    for (int k = 0; k < h; ++k)  // top = 1
        p.rect(x, y + k, kBarW, 1, viridis(1.0 - double(k) / double(std::max(1, h - 1))));
    const int tick_h = text_size("0", TextSize::tick).height;
    for (const auto& [t, label] : mapping.ticks()) {
        const int at = y + int(std::lround((h - 1) * (1.0 - t)));
        p.rect(x + kBarW, at, 4, 1, kInk);
        p.text({x + kBarW + 7, at - tick_h / 2, label, TextSize::tick, Anchor::start, false, "scale"});
    }
}

int colour_bar_width(const ColourMapping& mapping) {
    int widest = 0;
    for (const auto& tick : mapping.ticks()) widest = std::max(widest, text_size(tick.second, TextSize::tick).width);
    const int name = text_size(std::string(colour_scale_name(mapping.scale)) + " scale", TextSize::tick).width;
    return std::max(name, kBarW + 7 + widest);
}

std::string svg_begin(int width, int height) {
    const std::string w = std::to_string(width), h = std::to_string(height);
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w +
           "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h +
           "\" font-family=\"DejaVu Sans, Noto Sans CJK SC, Noto Sans, Noto Color Emoji, sans-serif\" "
           "fill=\"#282828\">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
}

}  // namespace attntrace
