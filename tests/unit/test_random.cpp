// Rng and random_tensor: the exact bits promised in random.hpp, determinism, and the moments.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

#include <doctest/doctest.h>

#include "attntrace/tensor/random.hpp"
#include "attntrace/tensor/stats.hpp"

using attntrace::Array;
using attntrace::Distribution;
using attntrace::Rng;

TEST_CASE("uniform is the top 53 bits of mt19937_64: the standard's 10000th draw") {
    // [rand.predef]: the 10000th consecutive output of a default-constructed std::mt19937_64
    // (seed 5489) is 9981545732273789042.
    Rng rng(5489);
    for (int i = 0; i < 9999; ++i) rng.uniform();
    CHECK(rng.uniform() == static_cast<double>(9981545732273789042ULL >> 11) * 0x1.0p-53);
}

TEST_CASE("normal is Box-Muller on two consecutive uniforms") {
    Rng u(42);
    Rng n(42);
    for (int i = 0; i < 5; ++i) {
        const double u1 = u.uniform();
        const double u2 = u.uniform();
        CHECK(n.normal() == std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2));
    }
}

TEST_CASE("uniform(low, high) scales one uniform draw") {
    Rng a(3);
    Rng b(3);
    const double u = a.uniform();
    CHECK(b.uniform(-2.0, 6.0) == -2.0 + 8.0 * u);
}

TEST_CASE("random_tensor fills row-major from Rng(seed), and float rounds the double draw") {
    const Array<double> d = attntrace::random_tensor<double>({2, 3}, Distribution::normal, 9);
    const Array<float> f = attntrace::random_tensor<float>({2, 3}, Distribution::normal, 9);
    REQUIRE(d.shape(0) == 2);
    REQUIRE(d.shape(1) == 3);
    Rng rng(9);
    for (std::size_t i = 0; i < 2; ++i) {
        for (std::size_t j = 0; j < 3; ++j) {
            const double want = rng.normal();
            CHECK(d(i, j) == want);
            CHECK(f(i, j) == static_cast<float>(want));
        }
    }
}

TEST_CASE("the same seed gives the same tensor, different seeds differ") {
    const auto a = attntrace::random_tensor<double>({4, 5}, Distribution::uniform, 1);
    const auto b = attntrace::random_tensor<double>({4, 5}, Distribution::uniform, 1);
    const auto c = attntrace::random_tensor<double>({4, 5}, Distribution::uniform, 2);
    CHECK(a == b);
    CHECK(a != c);
}

TEST_CASE("0-d and empty shapes") {
    const auto s = attntrace::random_tensor<float>({}, Distribution::normal, 0);
    CHECK(s.dimension() == 0);
    CHECK(s.size() == 1);
    const auto e = attntrace::random_tensor<float>({3, 0}, Distribution::normal, 0);
    CHECK(e.size() == 0);
    CHECK(e.shape(0) == 3);
}

TEST_CASE("uniform has mean 1/2 and std 1/sqrt(12), normal mean 0 and std 1, over 100k draws") {
    // standard errors at n = 1e5: mean 0.29/316 ~ 1e-3, std ~ 1e-3 (uniform), 3e-3 (normal)
    const auto u = attntrace::tensor_stats(attntrace::random_tensor<double>({100000}, Distribution::uniform, 0));
    CHECK(u.mean == doctest::Approx(0.5).epsilon(0.01));
    CHECK(u.std == doctest::Approx(1.0 / std::sqrt(12.0)).epsilon(0.01));
    CHECK(u.min >= 0.0);
    CHECK(u.max < 1.0);
    const auto n = attntrace::tensor_stats(attntrace::random_tensor<double>({100000}, Distribution::normal, 0));
    CHECK(std::abs(n.mean) < 0.01);
    CHECK(n.std == doctest::Approx(1.0).epsilon(0.01));
    CHECK(n.nan_count + n.inf_count == 0);
}
