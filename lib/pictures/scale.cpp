#include "attntrace/pictures/scale.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace attntrace {

const char* colour_scale_name(ColourScale s) {
    switch (s) {
        case ColourScale::linear: return "linear";
        case ColourScale::row: return "row";
        case ColourScale::log: return "log";
    }
    return "?";
}

std::optional<ColourScale> parse_colour_scale(std::string_view name) {
    for (auto s : {ColourScale::linear, ColourScale::row, ColourScale::log})
        if (name == colour_scale_name(s)) return s;
    return std::nullopt;
}

ColourMapping ColourMapping::of(ColourScale scale, double vmax) {
    return {scale, vmax > 0 && std::isfinite(vmax) ? vmax : 1.0};
}

double ColourMapping::floor() const { return vmax * std::pow(10.0, -kLogDecades); }

double ColourMapping::position(double w, double row_max) const {
    if (!(w > 0)) return 0;  // NaN too
    double t = 0;
    switch (scale) {
        case ColourScale::linear: t = w / vmax; break;
        case ColourScale::row: t = row_max > 0 ? w / row_max : 0; break;
        case ColourScale::log: t = w <= floor() ? 0 : std::log(w / floor()) / std::log(vmax / floor()); break;
    }
    return std::clamp(t, 0.0, 1.0);
}

std::vector<float> ColourMapping::positions(const float* cells, std::size_t rows, std::size_t cols) const {
    std::vector<float> out(rows * cols);
    for (std::size_t r = 0; r < rows; ++r) {
        const float* row = cells + r * cols;
        double row_max = 0;
        if (scale == ColourScale::row)
            for (std::size_t c = 0; c < cols; ++c) row_max = std::max(row_max, double(row[c]));
        for (std::size_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>(position(row[c], row_max));
    }
    return out;
}

std::string picture_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

std::string ColourMapping::legend() const {
    switch (scale) {
        case ColourScale::linear: return "linear from 0 to " + picture_number(vmax);
        case ColourScale::row: return "row (each row from 0 to its own maximum)";
        case ColourScale::log: return "log from " + picture_number(floor()) + " (and under) to " + picture_number(vmax);
    }
    return "";
}

std::vector<std::pair<double, std::string>> ColourMapping::ticks() const {
    switch (scale) {
        case ColourScale::linear: return {{0, "0"}, {0.5, picture_number(vmax / 2)}, {1, picture_number(vmax)}};
        case ColourScale::row: return {{0, "0"}, {0.5, "0.5"}, {1, "row max"}};
        case ColourScale::log: {
            std::vector<std::pair<double, std::string>> out;
            for (int k = 0; k <= int(kLogDecades); ++k)
                out.emplace_back(double(k) / kLogDecades, picture_number(floor() * std::pow(10.0, k)));
            return out;
        }
    }
    return {};
}

}  // namespace attntrace
