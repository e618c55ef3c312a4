// weight_product (tensor/weight_gemm.hpp) beside OpenBLAS's sgemm on a forward's weight products:
// Y (rows, out) := X (rows, in) · Wᵀ, W (out, in) or Conv1D (in, out), split over THREADS by
// columns as the model's products are (split_product). Prints one line a shape and layout:
// "rows in out layout  blas GFLOP/s  own GFLOP/s  own/blas" per core-second of the process's CPU
// time (so other processes on the cores matter less than to wall time), medians of REPS calls each,
// interleaved (blas, own, blas, own ...). Usage: weight_gemm [threads [reps [rows]]].
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/threads.hpp"
#include "attntrace/tensor/weight_gemm.hpp"

namespace {

struct Shape {
    std::size_t in, out;
};

// The process's CPU seconds (all threads): the figure other processes on the cores disturb least.
double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Seconds for one product on THREADS workers, OWN: weight_product, else OpenBLAS's sgemm.
double timed(bool own, bool conv1d, std::size_t rows, const Shape& s, const std::vector<float>& x,
             const std::vector<float>& w, std::vector<float>& y, std::size_t threads) {
    const double t0 = cpu_seconds();
    attntrace::split_product(rows, s.out, threads, [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
        const float* wb = conv1d ? w.data() + c0 : w.data() + c0 * s.in;
        const std::size_t ldw = conv1d ? s.out : s.in;
        float* yb = y.data() + r0 * s.out + c0;
        if (own && attntrace::weight_product(x.data() + r0 * s.in, s.in, r1 - r0, s.in, wb, ldw, conv1d, c1 - c0, 0.0f,
                                             yb, s.out))
            return;
        attntrace::gemm<float>(false, !conv1d, r1 - r0, c1 - c0, s.in, 1.0f, x.data() + r0 * s.in, s.in, wb, ldw, 0.0f,
                               yb, s.out);
    });
    return cpu_seconds() - t0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t threads = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
    const std::size_t rows = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 256;
    attntrace::set_blas_threads(1);
    const Shape shapes[] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 50257}};
    std::printf("rows in out layout blas_gflops_per_core own_gflops_per_core own/blas (%zu threads, %s kernels; CPU time)\n", threads,
                attntrace::weight_gemm_name(attntrace::weight_gemm()).c_str());
    for (const Shape& s : shapes)
        for (const bool conv1d : {false, true}) {
            std::vector<float> x(rows * s.in), w(s.in * s.out), y(rows * s.out);
            for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 97) / 97.0f - 0.5f;
            for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(i % 89) / 89.0f - 0.5f;
            std::vector<double> blas, own;
            for (int rep = 0; rep < reps; ++rep) {
                blas.push_back(timed(false, conv1d, rows, s, x, w, y, threads));
                own.push_back(timed(true, conv1d, rows, s, x, w, y, threads));
            }
            const double flop = 2.0 * rows * s.in * s.out, b = flop / median(blas) / 1e9, o = flop / median(own) / 1e9;
            std::printf("%zu %zu %zu %s %.1f %.1f %.2f\n", rows, s.in, s.out, conv1d ? "conv1d" : "out_in", b, o, o / b);
        }
}
