// weight_product's dispatch (weight_gemm.hpp): the AMX and AVX-512 kernels where the CPU has them
// and the switch (ATTNTRACE_WEIGHT_GEMM in app/main.cpp) leaves them on.
#include "attntrace/tensor/weight_gemm.hpp"

#include <atomic>
#include <utility>

#include "attntrace/tensor/amx.hpp"

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace weight_kernels {
// weight_gemm_avx512.cpp, compiled with AVX-512F (x86-64 only).
void product_avx512(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, const float* w,
                    std::size_t ldw, bool conv1d, std::size_t out, float beta, float* y, std::size_t ldy);
// weight_gemm_amx.cpp, compiled with AMX-BF16 and AVX-512BW; false where it declined (beta not 0 or 1).
bool product_amx(const float* x, std::size_t ldx, std::size_t rows, std::size_t in, const float* w,
                 std::size_t ldw, bool conv1d, std::size_t out, float beta, float* y, std::size_t ldy);
}  // namespace weight_kernels

namespace {

std::atomic<WeightGemm> chosen{WeightGemm::best};

#if ATTNTRACE_WEIGHT_GEMM_X86
// Whether the CPU has AMX-BF16 beside AVX-512F and BW and Linux grants the tile data (asked once).
bool amx_bf16_usable() {
    static const bool usable = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                               amx_usable(AmxFeature::bf16);
    return usable;
}
#endif

bool cpu_runs(WeightGemm kernel) {
#if ATTNTRACE_WEIGHT_GEMM_X86
    __builtin_cpu_init();
    if (kernel == WeightGemm::avx512) return __builtin_cpu_supports("avx512f");
    if (kernel == WeightGemm::amx) return amx_bf16_usable();
#endif
    return kernel == WeightGemm::blas || kernel == WeightGemm::best;
}

constexpr std::pair<WeightGemm, const char*> kNames[] = {
    {WeightGemm::best, "best"}, {WeightGemm::blas, "blas"}, {WeightGemm::avx512, "avx512"}, {WeightGemm::amx, "amx"}};

}  // namespace

void set_weight_gemm(WeightGemm kernel) {
    if (!cpu_runs(kernel))
        throw UsageError("weight products: this CPU cannot run the " + weight_gemm_name(kernel) + " kernels");
    chosen = kernel;
}

WeightGemm weight_gemm() {
    const WeightGemm k = chosen;
    if (k != WeightGemm::best) return k;
    static const bool amx = cpu_runs(WeightGemm::amx), avx512 = cpu_runs(WeightGemm::avx512);
    return amx ? WeightGemm::amx : avx512 ? WeightGemm::avx512 : WeightGemm::blas;
}

bool weight_gemm_every_row() {
    const WeightGemm kernel = weight_gemm();
    if (kernel == WeightGemm::blas) return false;
    if (kernel == WeightGemm::amx || chosen != WeightGemm::best) return true;
#if ATTNTRACE_WEIGHT_GEMM_X86
    // Zen 5 (an AMD EPYC VM, 2 cores, tests/bench/weight_gemm 2 7 4096): 0.92-0.99x OpenBLAS's
    // Cooperlake kernels at 4096 rows on every shape of the bench, once the kernel took rows 512 at a
    // time (0.80-0.85x before); on the Sapphire Rapids Xeon, 0.7-0.8x (before the blocks of rows).
    static const bool amd = __builtin_cpu_is("amd");
    return amd;
#else
    return false;
#endif
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
    // tests/bench/weight_gemm, one thread, Xeon Sapphire Rapids (docs/performance.md, "The whole
    // model's ceiling"): past a few hundred rows OpenBLAS's packing pays for itself and its sgemm is
    // faster than the AVX-512 kernel (0.92-1.05x at 512 rows, 0.7-0.8x at 2048, 1.0-1.13x at 256 and
    // 384), so `best` keeps that kernel to 384 rows; the AMX kernel is faster than both from 32 rows
    // up to any count (1.3-1.5x OpenBLAS at 256 and 2048 rows), and below them it splits more of W
    // than it multiplies, so `best` leaves fewer rows to the AVX-512 kernel.
    constexpr std::size_t kBestRowsMost = 384, kAmxRowsLeast = 32;
    const WeightGemm kernel = weight_gemm();
    const bool best = chosen == WeightGemm::best;
    const bool on_amx = kernel == WeightGemm::amx && (!best || rows >= kAmxRowsLeast);
    if (kernel == WeightGemm::blas || (!on_amx && best && rows > kBestRowsMost && !weight_gemm_every_row())) return false;
    if (rows == 0 || out == 0) return true;
    if (on_amx && weight_kernels::product_amx(x, ldx, rows, in, w, ldw, conv1d, out, beta, y, ldy)) return true;
    weight_kernels::product_avx512(x, ldx, rows, in, w, ldw, conv1d, out, beta, y, ldy);
    return true;
#else
    (void)x, (void)ldx, (void)rows, (void)in, (void)w, (void)ldw, (void)conv1d, (void)out, (void)beta, (void)y,
        (void)ldy;
    return false;
#endif
}

}  // namespace attntrace
