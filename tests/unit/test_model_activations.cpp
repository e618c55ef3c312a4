// The MLP activations (activations.hpp) against PyTorch's values (tests/fixtures/models/
// activations.json, written by tests/goldens/make_activation_goldens.py), in float (the
// vectorized approximations) and in double (libm).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/model/activations.hpp"

using namespace attntrace;

namespace {

nlohmann::json goldens() {
    std::ifstream in(std::string(ATTNTRACE_FIXTURES) + "/models/activations.json");
    return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("every activation equals PyTorch's: float within 1e-6 + 2e-6 |y|, double within 1e-13 (1 + |y|)") {
    const nlohmann::json g = goldens();
    const auto x = g["x"].get<std::vector<double>>();
    std::size_t checked = 0;
    for (const auto& [name, values] : g.items()) {
        if (name == "x" || name == "comment") continue;
        INFO(name);
        const auto act = name == "bloom_gelu" ? std::optional(Activation::bloom_gelu) : activation_from_name(name);
        REQUIRE(act.has_value());
        const auto want = values.get<std::vector<double>>();
        std::vector<double> d = x;
        activate(*act, d.data(), 1, d.size(), d.size(), static_cast<const double*>(nullptr));
        std::vector<float> f(x.begin(), x.end());
        activate(*act, f.data(), 1, f.size(), f.size(), static_cast<const float*>(nullptr));
        double worst = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            INFO("x = " << x[i]);
            CHECK(std::abs(d[i] - want[i]) <= 1e-13 * (1 + std::abs(want[i])));
            // the float input is x rounded: allow that rounding times the slope (at most ~1.1)
            const double tol = 1e-6 + 2e-6 * std::abs(want[i]) + 1.2 * std::abs(double(float(x[i])) - x[i]);
            CHECK(std::abs(double(f[i]) - want[i]) <= tol);
            worst = std::max(worst, std::abs(double(f[i]) - want[i]));
        }
        MESSAGE(name << ": float max abs difference " << worst);
        ++checked;
    }
    CHECK(checked == 10);
}

TEST_CASE("config names map to their activation; an unknown name is nullopt") {
    CHECK(activation_from_name("gelu_new") == Activation::gelu_tanh);
    CHECK(activation_from_name("gelu_pytorch_tanh") == Activation::gelu_tanh);
    CHECK(activation_from_name("swish") == Activation::silu);
    CHECK_FALSE(activation_from_name("gelu_10").has_value());
    CHECK_FALSE(activation_from_name("").has_value());
    CHECK(activation_names() == "gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, quick_gelu, silu, swish, relu, tanh");
}

TEST_CASE("activate adds the bias first and leaves the columns past COLS of each row alone") {
    // rows of 3 at leading dim 4: the 4th column is not part of the block
    std::vector<float> x{-1, 0, 2, 99, 0.5f, -3, 1, 99};
    const std::vector<float> b{1, 1, -2};
    activate(Activation::relu, x.data(), 2, 3, 4, b.data());
    CHECK(x == std::vector<float>{0, 1, 0, 99, 1.5f, 0, 0, 99});
}

TEST_CASE("activate_gated is act(gate + bias) * (up + bias), row by row at each leading dim") {
    for (const bool biased : {false, true}) {
        std::vector<double> g{0.5, -1, 2, 7, -0.25, 3, 1.5, 7};  // (2, 3) at ld 4
        const std::vector<double> u{2, 3, -1, 0.5, 4, 1};        // (2, 3) at ld 3
        const std::vector<double> gb{0.1, 0.2, 0.3}, ub{-1, 1, 2};
        const std::vector<double> g0 = g;
        activate_gated(Activation::silu, g.data(), 4, u.data(), 3, 2, 3, biased ? gb.data() : nullptr,
                       biased ? ub.data() : nullptr);
        for (std::size_t r = 0; r < 2; ++r) {
            CHECK(g[r * 4 + 3] == 7);
            for (std::size_t c = 0; c < 3; ++c) {
                const double a = g0[r * 4 + c] + (biased ? gb[c] : 0), up = u[r * 3 + c] + (biased ? ub[c] : 0);
                CHECK(g[r * 4 + c] == doctest::Approx(a / (1 + std::exp(-a)) * up).epsilon(1e-15));
            }
        }
    }
}
