// gemm (lib/tensor/gemm.cpp) on both of its paths, the plain loops for small products and OpenBLAS
// for larger ones, against a float64 triple loop: every transpose combination, leading dimensions
// wider than the rows, alpha, and beta (0 must not read C: a NaN there is overwritten, as BLAS).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attntrace/tensor/gemm.hpp"

namespace {

// One product C (m, n) := alpha * op(A) * op(B) + beta * C with padded leading dimensions.
void check_product(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, float beta) {
    std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 17 + k + ta * 7 + tb * 3));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const std::size_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
    std::vector<float> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * ldc);
    for (auto& x : a) x = u(rng);
    for (auto& x : b) x = u(rng);
    for (auto& x : c) x = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
    const std::vector<float> c0 = c;
    attntrace::gemm<float>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
    double worst = 0;
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double ref = 0;
            for (std::size_t p = 0; p < k; ++p)
                ref += double(ta ? a[p * lda + i] : a[i * lda + p]) * double(tb ? b[j * ldb + p] : b[p * ldb + j]);
            ref = alpha * ref + (beta == 0.0f ? 0.0 : double(beta) * c0[i * ldc + j]);
            worst = std::max(worst, std::abs(ref - double(c[i * ldc + j])));
        }
    CHECK(worst < 1e-5 * double(k + 1));  // float32 sums of k terms of size <= 1
}

}  // namespace

TEST_CASE("gemm: small products (loops) and large ones (OpenBLAS) equal a float64 reference") {
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            CAPTURE(ta);
            CAPTURE(tb);
            check_product(ta, tb, 1, 4, 3, 1.0f, 0.0f);      // the atcold example's scores: loops
            check_product(ta, tb, 5, 7, 6, 0.5f, 1.0f);      // loops, accumulating into C
            check_product(ta, tb, 70, 65, 64, 0.125f, 0.0f);  // past 32^3: OpenBLAS
            check_product(ta, tb, 70, 65, 64, 1.0f, 2.0f);
        }
}
