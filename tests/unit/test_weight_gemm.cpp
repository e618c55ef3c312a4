// weight_product (lib/tensor/weight_gemm.cpp, _avx512.cpp, _amx.cpp) against a float64 triple loop: both
// weight layouts ((out, in) and GPT-2's Conv1D (in, out)), rows 1 .. 300 and out / in that are not
// multiples of the tiles (16-row vectors, 48-column panels, blocks of 192 k, chunks of 768 columns), leading dimensions
// wider than the rows, beta 0 (Y not read: a NaN there is overwritten) and 1; and the switch to
// OpenBLAS (weight_product declines, the caller runs gemm); the AMX kernel on the same shapes and
// on Inf and NaN in X and W (float32's results there: its bfloat16 split would make NaN of an Inf).
// Each kernel is skipped where the CPU has not got it.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/weight_gemm.hpp"

namespace {

using attntrace::WeightGemm;

// Whether this CPU runs KERNEL; the choice is left at `best` either way.
bool cpu_runs(WeightGemm kernel) {
    try {
        attntrace::set_weight_gemm(kernel);
        attntrace::set_weight_gemm(WeightGemm::best);
        return true;
    } catch (const attntrace::UsageError&) {
        return false;
    }
}
bool cpu_has_avx512() { return cpu_runs(WeightGemm::avx512); }

bool cpu_is_amd() {
#if defined(__x86_64__)
    return __builtin_cpu_is("amd");
#else
    return false;
#endif
}

// Y (rows, out) := X (rows, in) · Wᵀ + beta · Y against float64 sums: within 1e-5 relative to
// Σ |x w| (float32 sums of `in` products, each rounded, in any order).
void check_product(std::size_t rows, std::size_t in, std::size_t out, bool conv1d, float beta) {
    std::mt19937 rng(static_cast<unsigned>(rows * 131 + in * 17 + out * 3 + conv1d));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const std::size_t ldx = in + 3, ldw = (conv1d ? out : in) + 5, ldy = out + 7;
    std::vector<float> x(rows * ldx), w((conv1d ? in : out) * ldw), y(rows * ldy);  // X (rows, in), W, Y (rows, out)
    for (auto& v : x) v = u(rng);
    for (auto& v : w) v = u(rng);
    for (auto& v : y) v = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
    const std::vector<float> y0 = y;
    REQUIRE(attntrace::weight_product(x.data(), ldx, rows, in, w.data(), ldw, conv1d, out, beta, y.data(), ldy));
    double worst = 0;
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t n = 0; n < out; ++n) {
            double ref = 0, size = 1e-30;
            for (std::size_t k = 0; k < in; ++k) {
                const double p = double(x[r * ldx + k]) * (conv1d ? w[k * ldw + n] : w[n * ldw + k]);
                ref += p, size += std::fabs(p);
            }
            if (beta != 0.0f) ref += double(beta) * y0[r * ldy + n], size += std::fabs(y0[r * ldy + n]);
            worst = std::max(worst, std::fabs(y[r * ldy + n] - ref) / size);
        }
    INFO("rows " << rows << " in " << in << " out " << out << (conv1d ? " conv1d" : " (out, in)") << " beta " << beta);
    CHECK(worst < 1e-5);
    for (std::size_t r = 0; r < rows; ++r)  // the padding past each row of Y untouched
        for (std::size_t n = out; n < ldy; ++n)
            if (!(std::isnan(y[r * ldy + n]) && std::isnan(y0[r * ldy + n])) && y[r * ldy + n] != y0[r * ldy + n])
                FAIL("Y written past its columns at row " << r);
}

// Every shape check_product takes on KERNEL.
void check_shapes(WeightGemm kernel) {
    attntrace::set_weight_gemm(kernel);
    for (const bool conv1d : {false, true})
        for (const float beta : {0.0f, 1.0f}) {
            for (const std::size_t rows : {1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 129, 300})
                check_product(rows, 37, 53, conv1d, beta);
            for (const std::size_t out : {1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 100, 770, 800})
                check_product(33, 130, out, conv1d, beta);
            for (const std::size_t in : {0, 1, 16, 31, 32, 33, 127, 128, 191, 192, 193, 385, 400, 769, 1600})
                check_product(20, in, 50, conv1d, beta);
        }
    check_product(256, 768, 2304, true, 1.0f);
    check_product(256, 768, 200, false, 0.0f);
    attntrace::set_weight_gemm(WeightGemm::best);
}

}  // namespace

TEST_CASE("weight_product: both layouts, odd shapes, beta 0 and 1, against float64") {
    if (cpu_has_avx512()) check_shapes(WeightGemm::avx512);
}

TEST_CASE("weight_product, AMX: the bfloat16 split's sums against float64, more rows than a block, other betas") {
    if (!cpu_runs(WeightGemm::amx)) return;
    check_shapes(WeightGemm::amx);
    attntrace::set_weight_gemm(WeightGemm::amx);
    check_product(600, 70, 90, false, 0.0f);   // rows past a block of 256 and a block's 32-row tiles
    check_product(70, 2000, 40, true, 1.0f);   // k past a block of 768
    check_product(40, 50, 60, false, 0.5f);    // beta neither 0 nor 1: the FMA kernel
    attntrace::set_weight_gemm(WeightGemm::best);
}

namespace {

// Y := X · Wᵀ with one non-finite value VALUE placed at X[XR, XK] or (XR < 0) W[WN, WK]: the AMX
// kernel's Y equals the AVX-512 kernel's (float32 arithmetic) where that is non-finite, and within
// float32 rounding elsewhere.
void check_non_finite(bool conv1d, float value, bool in_x, std::size_t at_row, std::size_t at_k, std::size_t in = 100) {
    const std::size_t rows = 40, out = 70;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(rows * in), w(in * out), y_amx(rows * out), y_fma(rows * out);
    for (auto& v : x) v = u(rng);
    for (auto& v : w) v = u(rng);
    if (in_x) x[at_row * in + at_k] = value;
    else (conv1d ? w[at_k * out + at_row] : w[at_row * in + at_k]) = value;
    const std::size_t ldw = conv1d ? out : in;
    attntrace::set_weight_gemm(WeightGemm::amx);
    REQUIRE(attntrace::weight_product(x.data(), in, rows, in, w.data(), ldw, conv1d, out, 0.0f, y_amx.data(), out));
    attntrace::set_weight_gemm(WeightGemm::avx512);
    REQUIRE(attntrace::weight_product(x.data(), in, rows, in, w.data(), ldw, conv1d, out, 0.0f, y_fma.data(), out));
    attntrace::set_weight_gemm(WeightGemm::best);
    std::size_t non_finite = 0;
    for (std::size_t i = 0; i < y_fma.size(); ++i) {
        INFO("value " << value << (in_x ? " in X" : " in W") << (conv1d ? " conv1d" : "") << " at " << i);
        if (std::isfinite(y_fma[i])) {
            CHECK(std::fabs(y_amx[i] - y_fma[i]) < 1e-4f);
        } else {
            ++non_finite;
            CHECK((std::isnan(y_amx[i]) ? std::isnan(y_fma[i]) : y_amx[i] == y_fma[i]));
        }
    }
    CHECK(non_finite == (in_x ? out : rows));  // a row of Y, or a column
}

}  // namespace

TEST_CASE("weight_product, AMX: Inf and NaN in X or W give float32's Inf and NaN") {
    if (!cpu_runs(WeightGemm::amx) || !cpu_has_avx512()) return;
    for (const bool conv1d : {false, true})
        for (const float value : {INFINITY, -INFINITY, NAN}) {
            check_non_finite(conv1d, value, true, 3, 50);
            check_non_finite(conv1d, value, false, 33, 99);
            check_non_finite(conv1d, value, true, 39, 900, 1000);  // in the second block of k: the tiles' sums before it kept
            check_non_finite(conv1d, value, false, 69, 999, 1000);
        }
}


TEST_CASE("weight_product: ATTNTRACE_WEIGHT_GEMM=blas declines (gemm runs), best resolves for the CPU and the rows") {
    attntrace::set_weight_gemm(WeightGemm::blas);
    float x = 1, w = 2, y = 5;
    CHECK_FALSE(attntrace::weight_product(&x, 1, 1, 1, &w, 1, false, 1, 0.0f, &y, 1));
    CHECK(y == 5);
    attntrace::set_weight_gemm(WeightGemm::best);
    const bool amx = cpu_runs(WeightGemm::amx), avx512 = cpu_has_avx512();
    CHECK(attntrace::weight_gemm() == (amx ? WeightGemm::amx : avx512 ? WeightGemm::avx512 : WeightGemm::blas));
    // best: the AVX-512 kernels to 384 rows, OpenBLAS past them (Y left for gemm to write), unless
    // the AMX kernel runs, which takes every product of 32 rows and more, or the CPU is an AMD one
    // with AVX-512, where the AVX-512 kernels take every product too
    const bool amd = avx512 && cpu_is_amd();
    CHECK(attntrace::weight_gemm_every_row() == (amx || amd));
    std::vector<float> xs(385, 1.0f), ys(385, 5.0f);
    CHECK(attntrace::weight_product(xs.data(), 1, 384, 1, &w, 1, false, 1, 0.0f, ys.data(), 1) == avx512);
    CHECK(ys[383] == (avx512 ? 2.0f : 5.0f));
    CHECK(attntrace::weight_product(xs.data(), 1, 385, 1, &w, 1, false, 1, 0.0f, ys.data(), 1) == (amx || amd));
    if (avx512) {  // avx512: every product
        attntrace::set_weight_gemm(WeightGemm::avx512);
        CHECK(attntrace::weight_gemm_every_row());
        CHECK(attntrace::weight_product(xs.data(), 1, 385, 1, &w, 1, false, 1, 0.0f, ys.data(), 1));
    }
    attntrace::set_weight_gemm(WeightGemm::blas);
    CHECK_FALSE(attntrace::weight_gemm_every_row());
    attntrace::set_weight_gemm(WeightGemm::best);
    WeightGemm named{};
    CHECK(attntrace::weight_gemm_named("blas", named));
    CHECK(named == WeightGemm::blas);
    CHECK(attntrace::weight_gemm_named("amx", named));
    CHECK(named == WeightGemm::amx);
    CHECK_FALSE(attntrace::weight_gemm_named("fast", named));
}
