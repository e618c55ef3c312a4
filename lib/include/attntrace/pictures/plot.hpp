#pragma once
// Pictures of attention weights as files: a grid of per-head panels (rows = queries, columns =
// keys), a panel with the mean over the heads, tick labels from the tokens, a colour bar naming
// its scale (viridis; scale.hpp), and a title. Text is set by pango in Debian's fonts (canvas.hpp).
//   PNG: raster, written by cairo; the panels' places are written in a tEXt chunk
//        "attntrace:panels" (JSON: [{"head", "x", "y", "cell", "rows", "cols"}], head -1 for the
//        mean) so tools and tests can find them.
//   SVG: text; each panel is <g class="panel" data-head="h" data-rows data-cols> of one <rect>
//        per cell (pooled to at most 64 x 64 cells, to keep the file small); labels are <text>.
// Long sequences come pooled (pooled.hpp): a tick names the first token of its cell.
#include <cstddef>
#include <string>
#include <vector>

#include "attntrace/attention/pooled.hpp"
#include "attntrace/pictures/scale.hpp"

namespace attntrace {

struct PlotOptions {
    std::string title;                      // the line at the top: command, layer, heads
    std::vector<std::string> query_labels;  // (Lq) tokens; empty: query indices
    std::vector<std::string> key_labels;    // (Lk) tokens; empty: key indices
    std::size_t batch = 0;                  // which batch row of the pooled planes
    std::vector<std::size_t> heads;         // the heads to draw; empty: every head
    ColourScale scale = kDefaultColourScale;
};

// The PNG file's bytes. Throws UsageError for a batch or head out of range, OutputError when
// cairo and pango (loaded on the first picture) cannot be loaded or fail.
std::string plot_png(const PooledWeights& weights, const PlotOptions& options);
// The SVG document (its text measured with pango: OutputError as for the PNG).
std::string plot_svg(const PooledWeights& weights, const PlotOptions& options);

// S with &, <, >, " escaped for XML and HTML text and attributes; control bytes other than newline and tab become spaces.
std::string escape_markup(const std::string& s);

// Checks BATCH and HEADS against WEIGHTS and returns the heads to draw (every head when empty).
// UsageError "batch: 2 is out of range ..." or "shown heads: head 5 is out of range ..." (the app
// names its flags, kPictureFlagNames).
std::vector<std::size_t> chosen_heads(const PooledWeights& weights, std::size_t batch,
                                      const std::vector<std::size_t>& heads);

}  // namespace attntrace
