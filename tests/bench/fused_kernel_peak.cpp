// The fused AVX-512 attention kernel alone (lib/attention/fused_kernels.hpp) on one head, one
// thread, beside the two ceilings it is judged against, each round back to back: the core's FMA
// peak (16 independent vfmadd231ps with a broadcast operand, as the kernel's loops issue them) and
// OpenBLAS's sgemm at 2048^3 (attntrace::gemm, one thread). Times are the thread's CPU time, so a
// busy shared machine moves them less than wall time; each line's ratios come from one round.
// Usage: fused_kernel_peak [L=4096] [ROUNDS=7]   (P = Pv = 64, no mask; x86-64 with AVX-512F only)
// Prints one line per round and the medians: kernel, peak and sgemm GFLOP/s, kernel / peak,
// sgemm / peak, kernel / sgemm (4 L^2 P multiply-adds x 2 for the kernel, with its K/V packing).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "../../lib/attention/fused_kernels.hpp"
#include "attntrace/tensor/buffer.hpp"
#include "attntrace/tensor/gemm.hpp"

namespace attntrace::fused {
std::size_t run_avx512(const Task& task);  // fused_avx512.cpp
void pack_avx512(const float* k, std::size_t ldk, const float* v, std::size_t ldv, std::size_t lk, std::size_t p,
                 std::size_t pv, std::size_t pv_pad, float* kpack, float* vpack);
}  // namespace attntrace::fused

namespace {

double cpu_seconds() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// GFLOP/s of 16 independent FMA chains, each FMA with a broadcast memory operand.
double fma_peak() {
    alignas(64) static float b[16] = {};
    const long iterations = 4000000;  // x 16 FMAs x 32 flops
    const double t0 = cpu_seconds();
    for (long it = 0; it < iterations; ++it)
        asm volatile(
#define ATTNTRACE_FMA(i) "vfmadd231ps " #i "*4(%0)%{1to16%}, %%zmm31, %%zmm" #i "\n\t"
            ATTNTRACE_FMA(0) ATTNTRACE_FMA(1) ATTNTRACE_FMA(2) ATTNTRACE_FMA(3) ATTNTRACE_FMA(4) ATTNTRACE_FMA(5)
            ATTNTRACE_FMA(6) ATTNTRACE_FMA(7) ATTNTRACE_FMA(8) ATTNTRACE_FMA(9) ATTNTRACE_FMA(10) ATTNTRACE_FMA(11)
            ATTNTRACE_FMA(12) ATTNTRACE_FMA(13) ATTNTRACE_FMA(14) ATTNTRACE_FMA(15)
            :: "r"(b) : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
              "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    return 32.0 * 16 * iterations / (cpu_seconds() - t0) / 1e9;
}

double sgemm_gflops() {
    const std::size_t n = 2048;
    static std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
    const double t0 = cpu_seconds();
    attntrace::gemm<float>(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    return 2.0 * n * n * n / (cpu_seconds() - t0) / 1e9;
}

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    using namespace attntrace::fused;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) {
        std::puts("this CPU has no AVX-512F: no fused kernel to measure");
        return 77;
    }
    const std::size_t lk = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4096, p = 64;
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
    attntrace::set_blas_threads(1);
    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    std::vector<float> q(lk * p), k(lk * p), v(lk * p), o(lk * p);  // (L, P) each
    for (auto* x : {&q, &k, &v})
        for (float& f : *x) f = normal(gen);
    const std::size_t keys = (lk + 15) / 16 * 16;
    attntrace::BufferAllocator<float> alloc;
    float *kpack = alloc.allocate(keys * p), *vpack = alloc.allocate(keys * p);
    float* scratch = alloc.allocate(scratch_floats(16, p, p));
    std::vector<std::uint32_t> begin(lk, 0), end(lk, static_cast<std::uint32_t>(lk));
    std::vector<double> kernel, peak, sgemm;
    for (int r = 0; r < rounds; ++r) {
        peak.push_back(fma_peak());
        sgemm.push_back(sgemm_gflops());
        const double t0 = cpu_seconds();
        pack_avx512(k.data(), p, v.data(), p, lk, p, p, p, kpack, vpack);
        for (std::size_t i0 = 0; i0 < lk; i0 += 256) {
            Task t;
            t.q = q.data() + i0 * p, t.ldq = p, t.rows = std::min<std::size_t>(256, lk - i0), t.i0 = i0;
            t.p = p, t.pv = p, t.pv_pad = p, t.lk = lk, t.kpack = kpack, t.vpack = vpack, t.scale = 0.125f;
            t.key_begin = begin.data() + i0, t.key_end = end.data() + i0;
            t.o = o.data() + i0 * p, t.ldo = p, t.scratch = scratch;
            run_avx512(t);
        }
        kernel.push_back(4.0 * double(lk) * double(lk) * double(p) / (cpu_seconds() - t0) / 1e9);
        std::printf("round %d: kernel %.1f, FMA peak %.1f, sgemm %.1f GFLOP/s; kernel/peak %.1f%%, sgemm/peak %.1f%%, "
                    "kernel/sgemm %.1f%%\n", r, kernel.back(), peak.back(), sgemm.back(),
                    100 * kernel.back() / peak.back(), 100 * sgemm.back() / peak.back(), 100 * kernel.back() / sgemm.back());
    }
    std::vector<double> kp, sp, ks;
    for (int r = 0; r < rounds; ++r)
        kp.push_back(kernel[r] / peak[r]), sp.push_back(sgemm[r] / peak[r]), ks.push_back(kernel[r] / sgemm[r]);
    std::printf("median of %d rounds, L = %zu, P = 64, one thread: kernel %.1f, FMA peak %.1f, sgemm %.1f GFLOP/s; "
                "kernel/peak %.1f%%, sgemm/peak %.1f%%, kernel/sgemm %.1f%%\n", rounds, lk, median(kernel), median(peak),
                median(sgemm), 100 * median(kp), 100 * median(sp), 100 * median(ks));
    alloc.deallocate(kpack, 0), alloc.deallocate(vpack, 0), alloc.deallocate(scratch, 0);
}
