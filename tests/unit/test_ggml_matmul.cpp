// quantized_gemm against ggml's CPU backend (tests/fixtures/ggml_matmul/, made by
// tests/goldens/make_ggml_matmul_goldens.py with llama.cpp's libggml-cpu): the activations'
// 8-bit bytes equal ggml's, the scalar kernel equals ggml's plain-C `_generic` vec_dot bit for
// bit, and every kernel this CPU runs (scalar, AVX2, AVX-512 VNNI) is within float rounding of
// the SIMD vec_dot llama.cpp runs (the 32-element types' bit for bit with `_generic` too, and AVX2's
// with AVX-512's); then more rows than the fixture has (the kernels' passes of 8 or 4 rows and
// of 1), threads, and the checks on the arguments.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "attntrace/io/ggml_matmul.hpp"
#include "attntrace/io/ggml_types.hpp"
#include "attntrace/tensor/errors.hpp"

using namespace attntrace;

namespace {

const std::string kDir = std::string(ATTNTRACE_FIXTURES) + "/ggml_matmul/";

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot read " << path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> floats(const std::string& bytes) {
    std::vector<float> out(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
    return out;
}

struct Product {
    std::string name, dot;  // the weight type and its vec_dot_type
    std::uint32_t type;
    std::size_t m, n, k;
    std::string w, aq;
    std::vector<float> a, generic, ggml;
    // out(j, i)'s scale for a tolerance: sum over k of |w_ik| |a_jk|, w dequantized, for A (M_A, K)
    std::vector<double> magnitude(const std::vector<float>& a_rows, std::size_t m_a) const {
        std::vector<double> mag(m_a * n);
        std::vector<float> wrow(k);
        const std::size_t rb = ggml_row_bytes(type, k);
        for (std::size_t i = 0; i < n; ++i) {
            dequantize_row(type, std::string_view(w).substr(i * rb, rb), wrow.data(), k);
            for (std::size_t j = 0; j < m_a; ++j)
                for (std::size_t e = 0; e < k; ++e) mag[j * n + i] += std::abs(double(wrow[e]) * a_rows[j * k + e]);
        }
        return mag;
    }
};

std::vector<Product> products() {
    std::ifstream in(kDir + "manifest.tsv");
    REQUIRE(in);
    std::vector<Product> out;
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string kind, name, dot;
        Product p;
        if (!(words >> kind >> name >> dot >> p.m >> p.n >> p.k) || kind != "product") continue;
        p.name = name;
        p.dot = dot;
        p.type = *ggml_type_named(name);
        p.w = read_file(kDir + name + ".w");
        p.aq = read_file(kDir + name + ".aq");
        p.a = floats(read_file(kDir + name + ".a"));
        p.generic = floats(read_file(kDir + name + ".generic"));
        p.ggml = floats(read_file(kDir + name + ".ggml"));
        out.push_back(std::move(p));
    }
    REQUIRE(out.size() == 8);
    return out;
}

std::vector<GemmKernel> kernels_here() {
    std::vector<GemmKernel> kernels;
    for (GemmKernel k : {GemmKernel::scalar, GemmKernel::avx2, GemmKernel::avx512_vnni, GemmKernel::amx})
        if (gemm_kernel_runs(k)) kernels.push_back(k);
        else MESSAGE("this CPU does not run the " << gemm_kernel_name(k) << " kernel: not compared");
    return kernels;
}

struct KernelScope {
    explicit KernelScope(GemmKernel k) { set_gemm_kernel(k); }
    ~KernelScope() { set_gemm_kernel(GemmKernel::best); }
};

std::size_t bit_differences(const std::vector<float>& got, const std::vector<float>& want) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) bad += std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]);
    return bad;
}

// The largest |got - want| / magnitude.
double worst_relative(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& mag) {
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(double(got[i]) - want[i]) / std::max(mag[i], 1e-30));
    return worst;
}

}  // namespace

TEST_CASE("activations quantize to ggml's q8_0 and q8_K bytes") {
    for (const Product& p : products()) {
        const std::size_t row = p.aq.size() / p.m;
        std::vector<std::uint8_t> got(row);
        for (std::size_t j = 0; j < p.m; ++j) {
            if (p.dot == "q8_0") quantize_row_q8_0(p.a.data() + j * p.k, got.data(), p.k);
            else if (p.dot == "q8_1") quantize_row_q8_1(p.a.data() + j * p.k, got.data(), p.k);
            else quantize_row_q8_K(p.a.data() + j * p.k, got.data(), p.k);
            CHECK_MESSAGE(std::memcmp(got.data(), p.aq.data() + j * row, row) == 0, p.name << " row " << j);
        }
    }
    std::vector<std::uint8_t> y(292);
    const std::vector<float> x(100, 1.0f);
    CHECK_THROWS_AS(quantize_row_q8_0(x.data(), y.data(), 100), InputError);
    CHECK_THROWS_AS(quantize_row_q8_K(x.data(), y.data(), 100), InputError);
}

TEST_CASE("quantized products equal ggml's vec_dot: the generic definition to the bit, the SIMD one within rounding") {
    for (const Product& p : products()) {
        const auto mag = p.magnitude(p.a, p.m);
        for (const GemmKernel kernel : kernels_here()) {
            const KernelScope scope(kernel);
            std::vector<float> out(p.m * p.n, -1.0f);
            quantized_gemm(p.type, p.w, p.n, p.k, p.a.data(), p.m, out.data(), 1);
            const double vs_ggml = worst_relative(out, p.ggml, mag), vs_generic = worst_relative(out, p.generic, mag);
            INFO(p.name << ", " << gemm_kernel_name(kernel) << ": worst |difference| / sum |w a| " << vs_ggml
                        << " against ggml's vec_dot, " << vs_generic << " against _generic");
            CHECK(vs_ggml <= 1e-5);  // ggml's SIMD and generic vec_dots differ by up to 7e-6 here
            if (kernel == GemmKernel::scalar || p.dot != "q8_K")
                CHECK(bit_differences(out, p.generic) == 0);  // every kernel: ggml's generic floats
            else CHECK(vs_generic <= 1e-5);
        }
    }
}

TEST_CASE("quantized products: many rows, any thread count, every kernel the same within rounding") {
    for (const Product& p : products()) {
        // 21 activation rows (the fixture's, cycled and scaled): the kernels' passes of 8, 4 and 1
        const std::size_t m = 21;
        std::vector<float> a(m * p.k);
        for (std::size_t j = 0; j < m; ++j)
            for (std::size_t e = 0; e < p.k; ++e) a[j * p.k + e] = p.a[(j % p.m) * p.k + e] * (1.0f + 0.25f * float(j / p.m));
        const auto mag = p.magnitude(a, m);
        std::vector<float> reference(m * p.n);
        {
            const KernelScope scope(GemmKernel::scalar);
            quantized_gemm(p.type, p.w, p.n, p.k, a.data(), m, reference.data(), 1);
        }
        for (const GemmKernel kernel : kernels_here()) {
            const KernelScope scope(kernel);
            for (std::size_t threads : {1, 2, 3}) {
                std::vector<float> out(m * p.n);
                quantized_gemm(p.type, p.w, p.n, p.k, a.data(), m, out.data(), threads);
                INFO(p.name << ", " << gemm_kernel_name(kernel) << ", " << threads << " threads");
                if (kernel == GemmKernel::scalar || p.dot != "q8_K") {
                    CHECK(bit_differences(out, reference) == 0);
                } else {
                    CHECK(worst_relative(out, reference, mag) <= 1e-5);
                }
            }
        }
    }
}

TEST_CASE("the AMX kernel gives the AVX-512 VNNI kernel's floats (any rows, any view of them)") {
    if (!gemm_kernel_runs(GemmKernel::amx)) {
        MESSAGE("this CPU (or its kernel) does not run AMX: not compared");
        return;
    }
    // m: below one tile of 16 activation rows (VNNI), one tile, 2 x 2 tiles and a padded third
    // tile, and 4 tiles (the last padded); the fixture's 20 weight rows: a B tile of 16 and one of 4
    for (const std::size_t m : {7, 16, 37, 53})
        for (const Product& p : products()) {
            std::vector<float> a(m * p.k);
            for (std::size_t j = 0; j < m; ++j)
                for (std::size_t e = 0; e < p.k; ++e) a[j * p.k + e] = p.a[(j % p.m) * p.k + e] * (1.0f - 0.125f * float(j / p.m));
            std::vector<float> vnni(m * p.n), amx(m * p.n);
            {
                const KernelScope scope(GemmKernel::avx512_vnni);
                quantized_gemm(p.type, p.w, p.n, p.k, a.data(), m, vnni.data(), 2);
            }
            const KernelScope scope(GemmKernel::amx);
            quantized_gemm(p.type, p.w, p.n, p.k, a.data(), m, amx.data(), 2);
            CHECK_MESSAGE(bit_differences(amx, vnni) == 0, p.name << ", " << m << " rows");
            // views of the rows from a whole tile on (the AMX tiles) and from inside one (VNNI)
            const QuantizedRows rows = quantize_rows(p.type, a.data(), m, p.k, 2);
            for (const std::size_t r0 : {std::size_t{16}, std::size_t{3}}) {
                if (r0 >= m) continue;
                std::vector<float> part((m - r0) * p.n);
                quantized_product(QuantizedMatrix{p.type, p.w, p.n, p.k}, rows.range(r0, m), part.data(), p.n, 1);
                const std::vector<float> want(vnni.begin() + static_cast<std::ptrdiff_t>(r0 * p.n), vnni.end());
                CHECK_MESSAGE(bit_differences(part, want) == 0, p.name << ", rows [" << r0 << ", " << m << ")");
            }
        }
}

TEST_CASE("rows quantized once give the same products: any row range, weight row range and leading dimension") {
    // (the same floats as quantized_gemm: one kernel's sums do not depend on the rows around them)
    for (const Product& p : products()) {
        const QuantizedMatrix w{p.type, p.w, p.n, p.k};
        const QuantizedRows rows = quantize_rows(p.type, p.a.data(), p.m, p.k, 2);
        CHECK(rows.dot_type() == quantized_dot_type(p.type));
        CHECK(rows.rows() == p.m);
        for (const GemmKernel kernel : kernels_here()) {
            const KernelScope scope(kernel);
            std::vector<float> reference(p.m * p.n);  // the same kernel's, all at once
            quantized_gemm(p.type, p.w, p.n, p.k, p.a.data(), p.m, reference.data(), 1);
            // rows [1, m) against weight rows [1, n), into columns [3, 3 + n - 1) of rows n + 5 wide
            const std::size_t ld = p.n + 5;
            std::vector<float> out(p.m * ld, -7.0f);
            quantized_product(w.row_range(1, p.n), rows.range(1, p.m), out.data() + ld + 3, ld, 2);
            INFO(p.name << ", " << gemm_kernel_name(kernel));
            std::size_t differ = 0, untouched = 0;
            for (std::size_t j = 0; j < p.m; ++j)
                for (std::size_t c = 0; c < ld; ++c) {
                    const bool inside = j >= 1 && c >= 3 && c < 3 + p.n - 1;
                    if (!inside) untouched += out[j * ld + c] == -7.0f;
                    else
                        differ += out[j * ld + c] != reference[j * p.n + c - 3 + 1];
                }
            CHECK(differ == 0);
            CHECK(untouched == p.m * ld - (p.m - 1) * (p.n - 1));
        }
    }
    const std::vector<Product> all = products();  // rows quantized for another dot type are refused
    const Product& p = all.front();
    const QuantizedRows k_rows = quantize_rows(ggml_q4_K, std::vector<float>(256, 1.0f).data(), 1, 256, 1);
    if (quantized_dot_type(p.type) != ggml_q8_K) {
        std::vector<float> out(p.n);
        CHECK_THROWS_AS(quantized_product(QuantizedMatrix{p.type, p.w, p.n, p.k}, k_rows, out.data(), p.n, 1),
                        std::logic_error);
    }
}

TEST_CASE("the AVX2 and AVX-512 VNNI kernels give the same floats") {
    if (!gemm_kernel_runs(GemmKernel::avx2) || !gemm_kernel_runs(GemmKernel::avx512_vnni)) {
        MESSAGE("this CPU does not run both SIMD kernels: not compared");
        return;
    }
    for (const Product& p : products()) {
        std::vector<float> avx2(p.m * p.n), avx512(p.m * p.n);
        {
            const KernelScope scope(GemmKernel::avx2);
            quantized_gemm(p.type, p.w, p.n, p.k, p.a.data(), p.m, avx2.data(), 2);
        }
        {
            const KernelScope scope(GemmKernel::avx512_vnni);
            quantized_gemm(p.type, p.w, p.n, p.k, p.a.data(), p.m, avx512.data(), 2);
        }
        CHECK_MESSAGE(bit_differences(avx2, avx512) == 0, p.name);
    }
}

TEST_CASE("a NaN or infinity in an activation row makes that row's products NaN, and no other's") {
    for (const Product& p : products()) {
        std::vector<float> a = p.a;
        a[0 * p.k + 5] = std::numeric_limits<float>::quiet_NaN();
        a[4 * p.k + p.k - 1] = -std::numeric_limits<float>::infinity();
        for (const GemmKernel kernel : kernels_here()) {
            const KernelScope scope(kernel);
            std::vector<float> out(p.m * p.n);
            quantized_gemm(p.type, p.w, p.n, p.k, a.data(), p.m, out.data(), 2);
            std::size_t nan_rows_ok = 0, clean_rows_ok = 0;
            for (std::size_t j = 0; j < p.m; ++j) {
                std::size_t nans = 0;
                for (std::size_t i = 0; i < p.n; ++i) nans += std::isnan(out[j * p.n + i]);
                if (j == 0 || j == 4) nan_rows_ok += nans == p.n;
                else clean_rows_ok += nans == 0;
            }
            CHECK_MESSAGE(nan_rows_ok == 2, p.name << ", " << gemm_kernel_name(kernel));
            CHECK_MESSAGE(clean_rows_ok == p.m - 2, p.name << ", " << gemm_kernel_name(kernel));
        }
    }
}

TEST_CASE("quantized products check their arguments before reading") {
    const std::vector<float> a(256, 1.0f);
    float out[4];
    const std::string w(144, '\0');
    CHECK(quantized_gemm_supported(ggml_q4_K));
    CHECK_FALSE(quantized_gemm_supported(ggml_iq4_nl));
    CHECK_THROWS_WITH_AS(quantized_gemm(ggml_iq4_nl, w, 1, 32, a.data(), 1, out, 1),
                         "quantized product: ggml type iq4_nl is not one it takes (q8_0, q4_0, q5_0, q4_1, q5_1, q4_K, q5_K, q6_K)",
                         InputError);
    CHECK_THROWS_WITH_AS(quantized_gemm(ggml_q4_K, w, 2, 256, a.data(), 1, out, 1),
                         "quantized product: 2 rows of 256 q4_K need 144 bytes each, 144 given", InputError);
    CHECK_THROWS_AS(quantized_gemm(ggml_q4_K, w, 1, 100, a.data(), 1, out, 1), InputError);
    CHECK(gemm_kernel() != GemmKernel::best);
}
