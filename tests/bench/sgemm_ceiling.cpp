// The ceiling for the benchmark: OpenBLAS's own sgemm GFLOP/s at a square size, with the thread
// count given, measured in the same run as attntrace and PyTorch (median of several calls).
// Prints "GFLOPS CORE BETTER": the kernels OpenBLAS chose, and the core type attntrace would ask
// for instead ("-" when none), so the benchmark can measure the ceiling attntrace really runs at.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attntrace/tensor/gemm.hpp"

int main(int argc, char** argv) {
    const std::size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2048;
    const std::size_t threads = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2;
    attntrace::set_blas_threads(threads);
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
    std::vector<double> seconds;
    for (int rep = 0; rep < 7; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        attntrace::gemm<float>(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const auto replaced = attntrace::blas_core_replaced();  // OpenBLAS's own choice, when attntrace replaced it
    const std::string running = attntrace::blas_core_name();
    std::printf("%.1f %s %s\n", 2.0 * n * n * n / seconds[seconds.size() / 2] / 1e9,
                replaced ? replaced->c_str() : running.c_str(), replaced ? running.c_str() : "-");
}
