// compare_tensors against numpy.allclose / numpy.isclose and the documented maxima, and the
// report's wording. References: tests/fixtures/make_cli_fixtures.py -> cli/compare.json.
#include <doctest/doctest.h>

#include "attntrace/check/compare.hpp"
#include "attntrace/tensor/errors.hpp"
#include "cli_fixtures.hpp"

using attntrace::Array;
using attntrace::Shape;
using attntrace::Tolerance;

TEST_CASE("compare agrees with numpy.allclose, isclose counts and argmax positions") {
    for (const auto& c : cli_fixtures::load("compare.json")) {
        const std::string name = c["name"];
        SUBCASE(name.c_str()) {
            const Array<double> a = cli_fixtures::tensor(c["shape_a"], c["a"]);
            const Array<double> b = cli_fixtures::tensor(c["shape_b"], c["b"]);
            const Tolerance tol{c["rtol"].get<double>(), c["atol"].get<double>()};
            const auto r = attntrace::compare_tensors(a, b, tol);
            const auto& e = c["expected"];
            CHECK(r.shapes_match == e["shapes_match"].get<bool>());
            CHECK(r.close == e["allclose"].get<bool>());
            if (!r.shapes_match) continue;
            CHECK(r.mismatches == e["mismatches"].get<std::size_t>());
            CHECK(r.nan_pairs == e["nan_pairs"].get<std::size_t>());
            CHECK(r.count == a.size());
            REQUIRE(r.max_abs_index.has_value() == e.contains("max_abs"));
            if (!r.max_abs_index) continue;
            CHECK(r.max_abs_diff == cli_fixtures::number(e["max_abs"]));
            CHECK(*r.max_abs_index == e["max_abs_index"].get<Shape>());
            CHECK(r.max_rel_diff == cli_fixtures::number(e["max_rel"]));
            CHECK(*r.max_rel_index == e["max_rel_index"].get<Shape>());
        }
    }
}

TEST_CASE("negative or NaN tolerances are usage errors naming the flag") {
    const Array<double> a = {1.0};
    CHECK_THROWS_WITH_AS(attntrace::compare_tensors(a, a, {-1.0, 0.0}),
                         "rtol: must be a non-negative number, got -1", attntrace::UsageError);
    CHECK_THROWS_WITH_AS(attntrace::compare_tensors(a, a, {0.0, std::nan("")}),
                         "atol: must be a non-negative number, got nan", attntrace::UsageError);
}

TEST_CASE("unravel_index is row-major") {
    CHECK(attntrace::unravel_index(0, {2, 3, 4}) == Shape{0, 0, 0});
    CHECK(attntrace::unravel_index(15, {2, 3, 4}) == Shape{1, 0, 3});  // 1*12 + 0*4 + 3
    CHECK(attntrace::unravel_index(23, {2, 3, 4}) == Shape{1, 2, 3});
    CHECK(attntrace::unravel_index(0, {}).empty());
    CHECK(attntrace::index_string({1, 0, 3}) == "[1, 0, 3]");
    CHECK(attntrace::index_string({}) == "[]");
}

TEST_CASE("the report gives the differences, their positions and values") {
    const Array<double> b = {{0.1, 1.0}, {2.0, 3.0}};
    const Array<double> a = {{0.3, 1.5}, {2.0, std::nan("")}};
    const Tolerance tol{};
    const auto r = attntrace::compare_tensors(a, b, tol);
    CHECK(attntrace::compare_report(r, tol, "a.npy", "b.npy") ==
          "a.npy and b.npy differ: 3 of 4 elements are not close (rtol 1e-05, atol 1e-08)\n"
          "  max abs diff 0.5 at [0, 1] (a 1.5, b 1)\n"
          "  max rel diff 2 at [0, 0] (a 0.3, b 0.1)\n"
          "  1 pair holds a NaN (NaN is never close)\n");
    const auto same = attntrace::compare_tensors(b, b, tol);
    CHECK(attntrace::compare_report(same, tol, "a.npy", "b.npy") ==
          "a.npy and b.npy are close: 4 elements, max abs diff 0, max rel diff 0\n");
    const Array<double> t = Array<double>::from_shape({3, 2});
    const auto shapes = attntrace::compare_tensors(b, t, tol);
    CHECK(attntrace::compare_report(shapes, tol, "a.npy", "b.npy") == "shapes differ: (2, 2) vs (3, 2)\n");
}
