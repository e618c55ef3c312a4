#pragma once
// Heatmaps of attention weights in a terminal, one per head, rows = queries, columns = keys.
//   colour: truecolor half-blocks, "▀" with the upper cell as the foreground and the lower one as
//           the background, so a character line holds two query rows and cells are square;
//   plain:  the ASCII ramp " .:-=+*#%@" (space darkest, '@' brightest), one cell = two characters
//           wide, for pipes, logs and NO_COLOR.
// Both fit WIDTH columns by pooling blocks of queries and keys (pooled.hpp); the header says what
// one cell covers and names the colour scale (scale.hpp).
#include <cstddef>
#include <string>
#include <vector>

#include "attntrace/attention/pooled.hpp"
#include "attntrace/pictures/scale.hpp"

namespace attntrace {

struct HeatmapStyle {
    bool truecolor = false;            // half-blocks in 24-bit colour; otherwise the ASCII ramp
    std::size_t width = 80;            // terminal columns (COLUMNS)
    std::size_t batch = 0;             // which batch row
    std::vector<std::size_t> heads;    // which heads; empty: every head
    std::vector<std::string> names;    // per head, a name for the header ("previous-token"); may be empty
    ColourScale scale = kDefaultColourScale;
};

// The ASCII ramp, darkest first.
inline constexpr const char* kAsciiRamp = " .:-=+*#%@";

// The ramp character for V in [0, VMAX].
char ramp_char(double v, double vmax);

std::string render_heatmaps(const PooledWeights& weights, const HeatmapStyle& style);

// The lines that name MAPPING's scale, within WIDTH columns: its legend, then the ASCII ramp's
// range, or (TRUECOLOR) a viridis bar between its lowest and highest marks.
std::string scale_line(const ColourMapping& mapping, bool truecolor, std::size_t width);

}  // namespace attntrace
