#pragma once
// What the picture files are drawn on: a Painter takes rectangles of colour and one-line texts, in
// pixels, with the origin at the top left. Two painters draw the same layout:
//   RasterPainter: an RGB image (cairo), its text set by pango in the Debian fonts (DejaVu Sans,
//                  then fontconfig's fallback: Noto for every other script, Noto Color Emoji),
//                  written as PNG by cairo;
//   SvgPainter:    SVG text, one <rect> per cell and <text> elements (selectable, searchable) whose
//                  font-family lists the same fonts.
// Both lay text out with the same measurements (text_size: pango's), so a label never runs into
// the next panel in either. cairo and pango are loaded with dlopen on the first picture written:
// a run that writes no picture never maps them (nor fontconfig, freetype and harfbuzz).
#include <cstdint>
#include <string>
#include <vector>

#include "attntrace/pictures/colormap.hpp"
#include "attntrace/pictures/scale.hpp"

namespace attntrace {

// The font sizes of picture text, in pixels.
enum class TextSize : std::uint8_t { small = 9, tick = 10, label = 11, title = 15 };

enum class Anchor : std::uint8_t { start, end, middle };

// One line of text: its top-left corner's (or, vertical, its top-right corner's) place and what it says.
struct TextSpec {
    int x = 0, y = 0;
    std::string text;
    TextSize size = TextSize::tick;
    Anchor anchor = Anchor::start;  // along the line: x (y when vertical) is where it starts, ends or centres
    bool vertical = false;          // reads downward, ink to the left of x
    const char* cls = "";           // the SVG element's class ("qlabel", "title" ...)
    bool bold = false;
    Rgb colour{40, 40, 40};         // kInk unless a cell's colour asks for light text
};

// Width and height in pixels of TEXT set in one line at SIZE (pango's logical extents). Throws
// OutputError when cairo or pango cannot be loaded.
struct TextExtent {
    int width = 0, height = 0;
};
TextExtent text_size(const std::string& text, TextSize size, bool bold = false);

// S cut to at most N characters (code points, never inside one), "…" replacing the rest.
std::string clip_text(const std::string& s, std::size_t n);

// Tick text for each of CELLS cells of an axis whose cells cover BLOCK tokens, one every STRIDE
// cells ("" between): the label of the first token the cell covers (its index without LABELS),
// cut to kTickChars characters.
inline constexpr std::size_t kTickChars = 16;
std::vector<std::string> axis_ticks(std::size_t cells, std::size_t block, std::size_t stride,
                                    const std::vector<std::string>& labels);

// The widest of TEXTS set at SIZE, in pixels.
int widest_text(const std::vector<std::string>& texts, TextSize size);

// A group of cells the SVG marks for tools and tests: <g class="panel" data-...>.
struct PanelMark {
    std::vector<std::pair<std::string, std::string>> data;  // ("head", "3"), ("rows", "6") ...
};

class Painter {
public:
    virtual ~Painter() = default;
    virtual void rect(int x, int y, int w, int h, Rgb c) = 0;
    virtual void text(const TextSpec& t) = 0;
    virtual void begin_panel(const PanelMark&) {}
    virtual void end_panel() {}
};

inline const Rgb kInk{40, 40, 40};

// An RGB image drawn in memory (cells written as pixels, text through pango), then PNG bytes.
class RasterPainter final : public Painter {
public:
    RasterPainter(int width, int height);  // white; OutputError when cairo cannot be loaded or the image allocated
    ~RasterPainter() override;
    RasterPainter(const RasterPainter&) = delete;
    RasterPainter& operator=(const RasterPainter&) = delete;
    void rect(int x, int y, int w, int h, Rgb c) override;
    void text(const TextSpec& t) override;
    // The PNG file (8-bit RGB, cairo's encoder) with a tEXt chunk KEY = VALUE after its header.
    std::string png(const std::string& key, const std::string& value);

private:
    struct Surface;
    Surface* s_;
};

// SVG elements appended to `out`.
class SvgPainter final : public Painter {
public:
    std::string out;
    void rect(int x, int y, int w, int h, Rgb c) override;
    void text(const TextSpec& t) override;
    void begin_panel(const PanelMark& m) override;
    void end_panel() override;
};

// The colour bar of MAPPING with its top-left corner at (X, Y), H pixels tall (the top is t = 1),
// its marks and their labels to its right and the scale's name above it; it takes
// colour_bar_width(MAPPING) pixels across and kColourBarAbove above Y.
void draw_colour_bar(Painter& p, int x, int y, int h, const ColourMapping& mapping);
int colour_bar_width(const ColourMapping& mapping);
inline constexpr int kColourBarAbove = 16;

// The SVG document's opening (size, white background, the fonts) and its end.
std::string svg_begin(int width, int height);
inline const char* const kSvgEnd = "</svg>\n";

}  // namespace attntrace
