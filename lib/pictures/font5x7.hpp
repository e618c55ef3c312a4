#pragma once
// A 5x7 bitmap font for the text in PNG plots (ASCII; other bytes draw as '?').
#include <cstddef>
#include <cstdint>

namespace attntrace::font {

constexpr int kWidth = 5, kHeight = 7, kAdvance = 6;  // pixels at scale 1

// Column X (0..4) of C's glyph: bit y set = pixel (x, y) is ink, y = 0 at the top.
std::uint8_t column(char c, int x);

}  // namespace attntrace::font
