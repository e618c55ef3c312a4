// The block's residual adds fused with its norms (norms.hpp), against the formulas of
// torch.nn.LayerNorm and LlamaRMSNorm computed here in long double.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "attntrace/model/norms.hpp"
#include "attntrace/tensor/random.hpp"

using namespace attntrace;

namespace {

// One row of the reference: x + delta + bias, then the norm.
std::vector<double> reference(std::vector<double> x, const double* delta, const double* bias, NormKind kind,
                              const std::vector<double>& w, const std::vector<double>& b, double eps) {
    const std::size_t e = x.size();
    for (std::size_t i = 0; i < e; ++i) x[i] += (delta ? delta[i] : 0) + (bias ? bias[i] : 0);
    long double mean = 0, var = 0, sq = 0;
    for (double v : x) mean += v, sq += (long double)v * v;
    mean /= e;
    for (double v : x) var += (v - mean) * (v - mean);
    var /= e;
    std::vector<double> y(e);
    for (std::size_t i = 0; i < e; ++i)
        y[i] = kind == NormKind::rms_norm ? double(w[i] * (x[i] / std::sqrt(sq / e + eps)))
                                         : double((x[i] - mean) / std::sqrt(var + eps) * w[i] + b[i]);
    return y;
}

std::vector<double> draws(std::size_t n, std::uint64_t seed, double scale, double shift) {
    const Array<double> a = random_tensor<double>({n}, Distribution::normal, seed);
    std::vector<double> out(a.begin(), a.end());
    for (double& v : out) v = v * scale + shift;
    return out;
}

}  // namespace

TEST_CASE("add_and_norm: x += delta + bias, then LayerNorm or RMSNorm of each row, as PyTorch defines them") {
    const std::size_t rows = 5, e = 37;
    const auto x0 = draws(rows * e, 1, 3, 0.5), delta = draws(rows * e, 2, 1, 0), bias = draws(e, 3, 0.5, 0);
    const auto w = draws(e, 4, 0.1, 1), b = draws(e, 5, 0.1, 0);
    for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
        std::vector<double> x = x0, y(rows * e);
        add_and_norm(x.data(), delta.data(), bias.data(), y.data(), rows, e,
                     NormWeights<double>{kind, w.data(), kind == NormKind::layer_norm ? b.data() : nullptr, 1e-5}, 1);
        for (std::size_t r = 0; r < rows; ++r) {
            const std::vector<double> row(x0.begin() + r * e, x0.begin() + (r + 1) * e);
            const auto want = reference(row, delta.data() + r * e, bias.data(), kind, w, b, 1e-5);
            for (std::size_t i = 0; i < e; ++i) {
                CHECK(x[r * e + i] == doctest::Approx(row[i] + delta[r * e + i] + bias[i]).epsilon(1e-15));
                CHECK(std::abs(y[r * e + i] - want[i]) < 1e-12);
            }
        }
    }
}

TEST_CASE("add_and_norm in place, without a norm, and without a delta") {
    const std::size_t rows = 3, e = 8;
    const auto x0 = draws(rows * e, 6, 2, 0), w = draws(e, 7, 0.1, 1);
    std::vector<double> x = x0, y(rows * e);
    add_and_norm(x.data(), nullptr, nullptr, y.data(), rows, e, NormWeights<double>{NormKind::rms_norm, w.data(), nullptr, 1e-6}, 1);
    CHECK(x == x0);  // nothing added: the residual is untouched
    add_and_norm(x.data(), nullptr, nullptr, x.data(), rows, e, NormWeights<double>{NormKind::rms_norm, w.data(), nullptr, 1e-6}, 1);
    CHECK(x == y);  // in place: the same values
    std::vector<double> z = x0, copy(rows * e);
    add_and_norm(z.data(), x0.data(), nullptr, copy.data(), rows, e, NormWeights<double>{}, 1);  // no norm: a copy
    CHECK(copy == z);
    for (std::size_t i = 0; i < z.size(); ++i) CHECK(z[i] == 2 * x0[i]);
    std::vector<double> only = x0;
    add_and_norm(only.data(), x0.data(), nullptr, nullptr, rows, e, NormWeights<double>{}, 1);  // no Y: the add alone
    CHECK(only == z);
}

TEST_CASE("add_and_norm gives the same bits on 1 and 4 threads (the rows split, each row whole)") {
    const std::size_t rows = 300, e = 640;  // 192000 values: several blocks of rows
    std::vector<float> x(rows * e), w(e, 1.25f), b(e, -0.5f), delta(rows * e);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.001 * double(i))), delta[i] = float(i % 7) * 0.1f;
    std::vector<float> x1 = x, x4 = x, y1(x.size()), y4(x.size());
    const NormWeights<float> n{NormKind::layer_norm, w.data(), b.data(), 1e-5};
    add_and_norm(x1.data(), delta.data(), nullptr, y1.data(), rows, e, n, 1);
    add_and_norm(x4.data(), delta.data(), nullptr, y4.data(), rows, e, n, 4);
    CHECK(x1 == x4);
    CHECK(y1 == y4);
}
