#pragma once
// A labelled table of values as a picture (PNG or SVG): the analyses' layers x heads maps (ablate,
// attribute, patch: a diverging blue-white-red scale centred on 0) and the logit lens's layers x
// tokens grid (viridis from 0 to 1, each cell with the text of its top token set in it). Rows
// down, columns across; the row labels at the left, the column labels under the cells (read
// downward); a title, its lines under it, and a colour bar. The PNG carries the cells' place in a
// tEXt chunk "attntrace:matrix" (JSON {"x", "y", "cell_w", "cell_h", "rows", "cols"}); in the SVG
// the cells are one <g class="panel" data-rows data-cols> of <rect>s.
//
// Legend: R rows, C columns.
#include <cstddef>
#include <string>
#include <vector>

namespace attntrace {

struct MatrixPicture {
    std::string title;                    // the first line, bold
    std::vector<std::string> lines;       // lines under it (the metric, the prompts)
    std::string row_axis, col_axis;       // "layer"; "head" or "token"
    std::vector<std::string> row_labels;  // (R)
    std::vector<std::string> col_labels;  // (C)
    std::vector<bool> marked_cols;        // (C) or empty: columns whose label is set in bold with a mark
    std::vector<double> values;           // (R, C); NaN drawn grey
    std::vector<std::string> cell_text;   // (R, C) or empty: the text set in each cell
    bool diverging = false;               // centred on 0 (red_blue), else viridis from 0 to the scale's top
    double top = 0;                       // the scale's end: |max| for diverging, the vmax else (0: from the values)
    std::string legend;                   // what the colour says ("change in log_prob")
};

// The PNG file's bytes / the SVG document. UsageError when the shapes disagree; OutputError when
// cairo and pango (loaded on the first picture) cannot be loaded or fail.
std::string matrix_png(const MatrixPicture& picture);
std::string matrix_svg(const MatrixPicture& picture);

}  // namespace attntrace
