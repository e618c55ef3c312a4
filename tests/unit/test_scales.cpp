// The colour scales of pictures (scale.hpp): linear, row and log, their legends and marks.
#include <cmath>
#include <vector>

#include <doctest/doctest.h>

#include "attntrace/pictures/scale.hpp"

using attntrace::ColourMapping;
using attntrace::ColourScale;

TEST_CASE("scales are named linear, row and log, and nothing else") {
    for (auto s : {ColourScale::linear, ColourScale::row, ColourScale::log})
        CHECK(attntrace::parse_colour_scale(attntrace::colour_scale_name(s)) == s);
    CHECK_FALSE(attntrace::parse_colour_scale("Row").has_value());
    CHECK_FALSE(attntrace::parse_colour_scale("").has_value());
    CHECK(attntrace::kDefaultColourScale == ColourScale::row);
}

TEST_CASE("linear puts a weight at its share of the picture's largest weight") {
    const auto m = ColourMapping::of(ColourScale::linear, 0.8);
    CHECK(m.position(0.8, 0.1) == doctest::Approx(1));
    CHECK(m.position(0.2, 0.2) == doctest::Approx(0.25));  // the row's maximum plays no part
    CHECK(m.position(0, 1) == 0);
    CHECK(m.position(2, 1) == 1);  // clamped
    CHECK(m.position(std::nan(""), 1) == 0);
}

TEST_CASE("row puts each row's largest weight at the top, whatever the other rows hold") {
    const auto m = ColourMapping::of(ColourScale::row, 1.0);
    // a sink row (0.97 on key 0) and a spread row: both rows' maxima get the brightest colour
    const std::vector<float> cells{0.97f, 0.01f, 0.02f, 0.3f, 0.2f, 0.1f, 0, 0, 0};
    const auto t = m.positions(cells.data(), 3, 3);
    CHECK(t[0] == doctest::Approx(1));
    CHECK(t[1] == doctest::Approx(0.01 / 0.97));
    CHECK(t[3] == doctest::Approx(1));
    CHECK(t[4] == doctest::Approx(0.2 / 0.3));
    CHECK(t[5] == doctest::Approx(1.0 / 3));
    for (std::size_t c = 6; c < 9; ++c) CHECK(t[c] == 0);  // an empty row stays dark
}

TEST_CASE("log spreads kLogDecades decades under the largest weight, the floor and under at 0") {
    const auto m = ColourMapping::of(ColourScale::log, 0.5);
    CHECK(m.floor() == doctest::Approx(0.5e-3));
    CHECK(m.position(0.5, 0) == doctest::Approx(1));
    CHECK(m.position(0.5e-2, 0) == doctest::Approx(1.0 / 3));  // one decade over the floor
    CHECK(m.position(0.5e-1, 0) == doctest::Approx(2.0 / 3));
    CHECK(m.position(0.5e-3, 0) == 0);
    CHECK(m.position(1e-9, 0) == 0);
    // the small weights next to a sink stay apart: 0.01 and 0.001 differ by a third of the map
    CHECK(m.position(0.01, 0) - m.position(0.001, 0) == doctest::Approx(1.0 / 3));
}

TEST_CASE("an all-zero picture still gets a scale") {
    for (auto s : {ColourScale::linear, ColourScale::row, ColourScale::log}) {
        const auto m = ColourMapping::of(s, 0);
        CHECK(m.vmax == 1);
        CHECK(m.position(0, 0) == 0);
    }
}

TEST_CASE("the legend and the colour bar's marks name the scale and its range") {
    const auto linear = ColourMapping::of(ColourScale::linear, 0.307);
    CHECK(linear.legend() == "linear from 0 to 0.307");
    CHECK(linear.ticks().size() == 3);
    CHECK(linear.ticks().back().second == "0.307");
    const auto row = ColourMapping::of(ColourScale::row, 0.307);
    CHECK(row.legend() == "row (each row from 0 to its own maximum)");
    CHECK(row.ticks().back().second == "row max");
    const auto log = ColourMapping::of(ColourScale::log, 1);
    CHECK(log.legend() == "log from 0.001 (and under) to 1");
    const auto marks = log.ticks();
    REQUIRE(marks.size() == 4);
    CHECK(marks[0].second == "0.001");
    CHECK(marks[1].second == "0.01");
    CHECK(marks[3].first == 1);
}
