// Dequantizing speed of one ggml type (lib/io/ggml_types.hpp), one thread, in GB/s of float32
// output, beside memcpy of the same output bytes (tests/bench/ggml_types_bench.py runs it).
//
//   ggml_dequant TYPE FILE N_PER_ROW KERNEL
// FILE holds whole rows of TYPE (N_PER_ROW elements each). Two figures, each the best of 7 rounds:
//   hot:   each row dequantized into the same buffer (the kernel's arithmetic, output in L1/L2)
//   layer: all rows into one float32 array (as a layer is dequantized: output to memory)
// and memcpy's on the same output sizes. Prints one line: TYPE KERNEL hot layer memcpy_hot memcpy_layer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "attntrace/io/ggml_types.hpp"

using namespace attntrace;
using Clock = std::chrono::steady_clock;

namespace {

template <class Fn>
double best_seconds(Fn&& fn) {
    double best = 1e30;
    for (int round = 0; round < 7; ++round) {
        const auto t0 = Clock::now();
        fn();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: ggml_dequant TYPE FILE N_PER_ROW scalar|avx2|best\n");
        return 2;
    }
    const auto type = ggml_type_named(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t n = std::stoul(argv[3]);
    const std::string kernel = argv[4];
    for (GgmlKernel k : {GgmlKernel::best, GgmlKernel::scalar, GgmlKernel::avx2})
        if (ggml_kernel_name(k) == kernel) set_ggml_kernel(k);
    const std::size_t row_bytes = ggml_row_bytes(*type, n), rows = bytes.size() / row_bytes;
    std::vector<float> hot(n), layer(rows * n), source(rows * n, 1.0f);
    const double out_bytes = static_cast<double>(rows * n * sizeof(float));
    auto row = [&](std::size_t r) { return std::string_view(bytes).substr(r * row_bytes, row_bytes); };
    const double t_hot = best_seconds([&] {
        for (std::size_t r = 0; r < rows; ++r) dequantize_row(*type, row(r), hot.data(), n);
    });
    const double t_layer = best_seconds([&] {
        for (std::size_t r = 0; r < rows; ++r) dequantize_row(*type, row(r), layer.data() + r * n, n);
    });
    const double m_hot = best_seconds([&] {
        for (std::size_t r = 0; r < rows; ++r) std::memcpy(hot.data(), source.data() + r * n, n * sizeof(float));
    });
    const double m_layer = best_seconds([&] { std::memcpy(layer.data(), source.data(), rows * n * sizeof(float)); });
    std::printf("%s %s %.2f %.2f %.2f %.2f\n", argv[1], ggml_kernel_name(ggml_kernel()).c_str(), out_bytes / t_hot / 1e9,
                out_bytes / t_layer / 1e9, out_bytes / m_hot / 1e9, out_bytes / m_layer / 1e9);
    return hot[0] == 12345.f;  // keeps the work observable
}
