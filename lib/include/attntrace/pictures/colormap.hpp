#pragma once
// The colour map of every picture: viridis (matplotlib's default), perceptually uniform and
// monotone in lightness, so a brighter cell always means more weight, in colour or in grey.
// It is matplotlib's 256-entry table at 8 bits with matplotlib's rule for which entry a value gets
// (floor(t * 256), clipped); tests/unit/test_pictures.cpp checks it against the table through
// tests/fixtures/make_picture_fixtures.py.
#include <cstdint>
#include <string>
#include <string_view>

namespace attntrace {

struct Rgb {
    std::uint8_t r = 0, g = 0, b = 0;
    bool operator==(const Rgb&) const = default;
};

// T in [0, 1] (clamped; NaN reads as 0) to its viridis colour, each channel rounded to 8 bits.
Rgb viridis(double t);

// "#21918c"
std::string hex_colour(Rgb c);

// The 256 entries as one string of "rrggbb" (1536 hex digits), for colour maps drawn elsewhere
// (the HTML report's script).
std::string_view viridis_hex_table();

}  // namespace attntrace

namespace attntrace {

// T in [0, 1] (clamped; NaN reads as 0.5, the centre) to matplotlib's diverging "RdBu_r": blue at
// 0, near-white at 0.5, red at 1 (ColorBrewer's 11 RdBu colours, matplotlib's _RdBu_data,
// interpolated linearly as its LinearSegmentedColormap does, then rounded to 8 bits): the colour of
// a signed value centred on 0, as TransformerLens's and circuitsvis's plots show them.
Rgb red_blue(double t);

}  // namespace attntrace
