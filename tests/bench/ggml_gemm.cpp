// quantized_gemm's speed (lib/io/ggml_matmul.hpp): tests/bench/ggml_gemm_bench.py runs it beside
// ggml's own mul_mat on the same weights and activations.
//
//   ggml_gemm TYPE W_FILE A_FILE N K M THREADS KERNEL OUT_FILE [ROUNDS]
// W_FILE: N rows of K elements of TYPE; A_FILE: (M, K) float32. Writes OUT (M, N) float32 and
// prints the best of ROUNDS (5) runs in milliseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "attntrace/io/ggml_matmul.hpp"
#include "attntrace/io/ggml_types.hpp"

using namespace attntrace;

int main(int argc, char** argv) {
    if (argc != 10 && argc != 11) {
        std::fprintf(stderr, "usage: ggml_gemm TYPE W_FILE A_FILE N K M THREADS scalar|avx2|avx512_vnni|best OUT_FILE [ROUNDS]\n");
        return 2;
    }
    auto read = [](const char* path) {
        std::ifstream in(path, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const auto type = *ggml_type_named(argv[1]);
    const std::string w = read(argv[2]), a_bytes = read(argv[3]);
    const std::size_t n = std::stoul(argv[4]), k = std::stoul(argv[5]), m = std::stoul(argv[6]);
    const std::size_t threads = std::stoul(argv[7]);
    for (GemmKernel kernel : {GemmKernel::best, GemmKernel::scalar, GemmKernel::avx2, GemmKernel::avx512_vnni, GemmKernel::amx})
        if (gemm_kernel_name(kernel) == argv[8]) set_gemm_kernel(kernel);
    std::vector<float> a(m * k), out(m * n);
    std::copy(a_bytes.data(), a_bytes.data() + std::min(a_bytes.size(), a.size() * 4), reinterpret_cast<char*>(a.data()));
    double best = 1e30;
    const int rounds = argc == 11 ? std::stoi(argv[10]) : 5;
    for (int round = 0; round < rounds; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        quantized_gemm(type, w, n, k, a.data(), m, out.data(), threads);
        best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::ofstream(argv[9], std::ios::binary).write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
    std::printf("%.3f %s\n", best, gemm_kernel_name(gemm_kernel()).c_str());
    return 0;
}
