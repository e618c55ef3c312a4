#include "attntrace/gemm.hpp"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <thread>

#include <cstdlib>

namespace attntrace {

namespace {
blasint to_blas(std::size_t v) { return static_cast<blasint>(v); }

// K == 0 makes op(A)*op(B) a zero matrix; BLAS would reject the zero leading dimensions.
template <class T>
void scale_only(std::size_t m, std::size_t n, T beta, T* c, std::size_t ldc) {
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
}

// The one BLAS routine per precision: cblas_sgemm for float, cblas_dgemm for double.
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, float alpha,
               const float* a, blasint lda, const float* b, blasint ldb, float beta, float* c, blasint ldc) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, double alpha,
               const double* a, blasint lda, const double* b, blasint ldb, double beta, double* c, blasint ldc) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) return scale_only(m, n, beta, c, ldc);
    blas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, to_blas(m), to_blas(n),
              to_blas(k), alpha, a, to_blas(lda), b, to_blas(ldb), beta, c, to_blas(ldc));
}

template void gemm<float>(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t);
template void gemm<double>(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                           const double*, std::size_t, double, double*, std::size_t);

void set_blas_threads(std::size_t threads) {
    if (threads > 0) openblas_set_num_threads(static_cast<int>(threads));
}

std::size_t blas_threads() { return static_cast<std::size_t>(openblas_get_num_threads()); }

std::size_t available_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

std::string blas_core_name() {
    const char* name = openblas_get_corename();
    return name ? name : "";
}

std::optional<std::string> better_blas_core() {
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return std::nullopt;  // the user's choice
    const std::string core = blas_core_name();
    const bool generic = core == "Prescott" || core == "Core2" || core == "Nehalem" || core == "Katmai" ||
                         core == "Northwood" || core == "Banias" || core == "Unknown" || core.empty();
    if (!generic) return std::nullopt;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return std::nullopt;
}

}  // namespace attntrace
