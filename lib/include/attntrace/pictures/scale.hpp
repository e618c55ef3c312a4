#pragma once
// How a weight becomes a colour: every picture maps a weight w to a place t in [0, 1] on its colour
// map (viridis, or the terminal's ASCII ramp), by one of three scales:
//   linear: t = w / vmax, vmax the largest weight the picture draws (all its panels);
//   row:    t = w / (the largest cell of w's row in its own panel): each query row to its own
//           maximum, so a row whose weight is spread thin is as readable as a peaked one, and one
//           head's attention sink does not darken every other head;
//   log:    t = log(w / floor) / log(vmax / floor), floor = vmax * 10^-kLogDecades (weights at or
//           under the floor get t = 0): the small weights next to a sink stay visible.
// docs/pictures.md says why row is the default.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attntrace {

enum class ColourScale : unsigned char { linear, row, log };

inline constexpr ColourScale kDefaultColourScale = ColourScale::row;
inline constexpr double kLogDecades = 3;

// "linear", "row", "log"
const char* colour_scale_name(ColourScale s);
// The scale named NAME; nullopt for any other name.
std::optional<ColourScale> parse_colour_scale(std::string_view name);

// A picture's scale: its kind and the largest weight it draws (linear and log use it).
struct ColourMapping {
    ColourScale scale = kDefaultColourScale;
    double vmax = 1;  // > 0

    // MAP for a picture whose largest weight is VMAX (0, negative or NaN reads as 1: an all-zero
    // picture still gets a scale).
    static ColourMapping of(ColourScale scale, double vmax);
    double floor() const;  // log's floor, vmax * 10^-kLogDecades
    // W's place in [0, 1]; ROW_MAX: the largest cell of its row (row scale only). NaN reads as 0.
    double position(double w, double row_max) const;
    // CELLS (rows, cols) mapped to places, row by row.
    std::vector<float> positions(const float* cells, std::size_t rows, std::size_t cols) const;
    // The legend: "linear from 0 to 0.307", "row (each row from 0 to its own maximum)",
    // "log from 0.000307 (and under) to 0.307".
    std::string legend() const;
    // The colour bar's marks, lowest first: (place in [0, 1], label).
    std::vector<std::pair<double, std::string>> ticks() const;
};

// The shortest of %.3g: "0.307", "1e-03".
std::string picture_number(double v);

}  // namespace attntrace
