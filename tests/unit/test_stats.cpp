// tensor_stats against numpy-checked references (min/max/mean/std over the finite values,
// ddof=0), and the info report's text and JSON forms.
// References: tests/fixtures/make_cli_fixtures.py -> cli/stats.json.
#include <cmath>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "attntrace/tensor/stats.hpp"
#include "cli_fixtures.hpp"

using attntrace::Array;
using attntrace::TensorStats;

namespace {

// equal within 1e-12 relative to the exactly rounded reference, or both NaN
void check_close(double got, double want, const std::string& what) {
    INFO(what << ": got " << got << ", numpy " << want);
    if (std::isnan(want)) {
        CHECK(std::isnan(got));
    } else {
        CHECK(std::abs(got - want) <= 1e-12 * std::abs(want) + 1e-15);
    }
}

void check_stats(const TensorStats& s, const nlohmann::json& expected) {
    CHECK(s.count == expected["count"].get<std::size_t>());
    CHECK(s.nan_count == expected["nan"].get<std::size_t>());
    CHECK(s.inf_count == expected["inf"].get<std::size_t>());
    check_close(s.min, cli_fixtures::number(expected["min"]), "min");
    check_close(s.max, cli_fixtures::number(expected["max"]), "max");
    check_close(s.mean, cli_fixtures::number(expected["mean"]), "mean");
    check_close(s.std, cli_fixtures::number(expected["std"]), "std");
}

}  // namespace

TEST_CASE("stats over the finite values match numpy for every fixture") {
    for (const auto& c : cli_fixtures::load("stats.json")) {
        const std::string name = c["name"];
        SUBCASE(name.c_str()) {
            const Array<double> a = cli_fixtures::tensor(c["shape"], c["data"]);
            check_stats(attntrace::tensor_stats(a), c["expected"]);
            if (c["float32"].get<bool>()) {  // the values are exact floats: float input agrees
                const Array<float> f = xt::cast<float>(a);
                check_stats(attntrace::tensor_stats(f), c["expected"]);
            }
        }
    }
}

TEST_CASE("a large offset does not cancel the variance") {
    // 1e9 + {0, 1e-3, 2e-3}: a naive E[x^2] - E[x]^2 in double loses every digit here
    const Array<double> a = {1e9, 1e9 + 1e-3, 1e9 + 2e-3};
    const double want = std::sqrt(2.0 / 3.0) * 1e-3;  // population std of {0, 1, 2} * 1e-3
    CHECK(attntrace::tensor_stats(a).std == doctest::Approx(want).epsilon(1e-6));
}

TEST_CASE("info text names the format, dtype, shape, order and statistics") {
    attntrace::TensorSource src{"x.npy", attntrace::FileFormat::npy, attntrace::DType::f4, false, "1.0"};
    const Array<double> a = {{1.0, 2.0, 3.0}, {4.0, std::nan(""), INFINITY}};
    const auto s = attntrace::tensor_stats(a);
    CHECK(attntrace::info_text(src, {2, 3}, s) ==
          "x.npy: npy 1.0, float32, shape (2, 3), C order, 6 elements\n"
          "  min 1  max 4  mean 2.5  std 1.11803  nan 1  inf 1\n");
    src.fortran_order = true;
    src.path = "y.npy";
    const Array<double> empty = Array<double>::from_shape({0});
    CHECK(attntrace::info_text(src, {0}, attntrace::tensor_stats(empty)) ==
          "y.npy: npy 1.0, float32, shape (0,), F order, 0 elements\n"
          "  min n/a  max n/a  mean n/a  std n/a  nan 0  inf 0\n");
}

TEST_CASE("info json is one object per line with null for non-finite statistics") {
    const attntrace::TensorSource src{"t.json", attntrace::FileFormat::json, attntrace::DType::f8, false, ""};
    const Array<double> a = {std::nan(""), 2.0};
    const std::string line = attntrace::info_json(src, {2}, attntrace::tensor_stats(a));
    REQUIRE(line.back() == '\n');
    CHECK(line.find('\n') == line.size() - 1);
    const auto j = nlohmann::json::parse(line);
    CHECK(j["file"] == "t.json");
    CHECK(j["format"] == "json");
    CHECK(j["npy_version"].is_null());
    CHECK(j["dtype"] == "float64");
    CHECK(j["shape"] == nlohmann::json::array({2}));
    CHECK(j["order"] == "C");
    CHECK(j["elements"] == 2);
    CHECK(j["min"] == 2.0);
    CHECK(j["std"] == 0.0);
    CHECK(j["nan"] == 1);
    CHECK(j["inf"] == 0);
    const Array<double> nans = {std::nan("")};
    const auto k = nlohmann::json::parse(attntrace::info_json(src, {1}, attntrace::tensor_stats(nans)));
    CHECK(k["min"].is_null());
    CHECK(k["max"].is_null());
    CHECK(k["mean"].is_null());
    CHECK(k["std"].is_null());
}
