// weight_product's dispatch (weight_gemm.hpp): the AVX-512 kernels where the CPU has them and the
// switch (ATTNTRACE_WEIGHT_GEMM in app/main.cpp) leaves them on.
#include "attntrace/tensor/weight_gemm.hpp"

#include <atomic>
#include <utility>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace weight_kernels {
// weight_gemm_avx512.cpp, compiled with AVX-512F (x86-64 only).
void product_avx512(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, const float* w,
                    std::size_t ldw, bool conv1d, std::size_t out, float beta, float* y, std::size_t ldy);
}  // namespace weight_kernels

namespace {

std::atomic<WeightGemm> chosen{WeightGemm::best};

bool cpu_runs(WeightGemm kernel) {
#if ATTNTRACE_WEIGHT_GEMM_X86
    __builtin_cpu_init();
    if (kernel == WeightGemm::avx512) return __builtin_cpu_supports("avx512f");
#endif
    return kernel == WeightGemm::blas || kernel == WeightGemm::best;
}

constexpr std::pair<WeightGemm, const char*> kNames[] = {
    {WeightGemm::best, "best"}, {WeightGemm::blas, "blas"}, {WeightGemm::avx512, "avx512"}};

}  // namespace

void set_weight_gemm(WeightGemm kernel) {
    if (!cpu_runs(kernel))
        throw UsageError("weight products: this CPU cannot run the " + weight_gemm_name(kernel) + " kernels");
    chosen = kernel;
}

WeightGemm weight_gemm() {
    const WeightGemm k = chosen;
    if (k != WeightGemm::best) return k;
    static const bool avx512 = cpu_runs(WeightGemm::avx512);
    return avx512 ? WeightGemm::avx512 : WeightGemm::blas;
}

std::string weight_gemm_name(WeightGemm kernel) {
    for (const auto& [k, name] : kNames)
        if (k == kernel) return name;
    return "";
}

bool weight_gemm_named(const std::string& name, WeightGemm& kernel) {
    for (const auto& [k, n] : kNames)
        if (name == n) return kernel = k, true;
    return false;
}

bool weight_product(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, const float* w,
                    std::size_t ldw, bool conv1d, std::size_t out, float beta, float* y, std::size_t ldy) {
#if ATTNTRACE_WEIGHT_GEMM_X86
    // Past a few hundred rows OpenBLAS's packing pays for itself and its sgemm is the faster
    // (tests/bench/weight_gemm: 0.92-1.05x at 512 rows, 0.7-0.8x at 2048, 1.0-1.13x at 256 and
    // 384, one thread, Xeon Sapphire Rapids): `best` keeps our kernels to 384 rows.
    constexpr std::size_t kBestRowsMost = 384;
    if (weight_gemm() != WeightGemm::avx512 || (chosen == WeightGemm::best && rows > kBestRowsMost)) return false;
    if (rows == 0 || out == 0) return true;
    weight_kernels::product_avx512(x, ldx, rows, in, w, ldw, conv1d, out, beta, y, ldy);
    return true;
#else
    (void)x, (void)ldx, (void)rows, (void)in, (void)w, (void)ldw, (void)conv1d, (void)out, (void)beta, (void)y,
        (void)ldy;
    return false;
#endif
}

}  // namespace attntrace
