// ggml's tensor types against ggml itself (tests/fixtures/ggml_types/, made by
// tests/goldens/make_ggml_type_goldens.py with libggml-base of llama.cpp): the type table, and
// every supported type's rows dequantized to the same float bits as ggml's to_float (NaN where it
// gives NaN), with every kernel this CPU runs (scalar, AVX2), over whole rows, their
// prefixes of whole blocks, and for f16 and bf16 all 65536 values; then the checks on a row's
// size and bytes.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attntrace/io/ggml_types.hpp"
#include "attntrace/tensor/errors.hpp"

using namespace attntrace;

namespace {

const std::string kDir = std::string(ATTNTRACE_FIXTURES) + "/ggml_types/";

std::vector<std::uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot read " << path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The manifest's lines whose first word is KIND, split into words.
std::vector<std::vector<std::string>> manifest(const std::string& kind) {
    std::ifstream in(kDir + "manifest.tsv");
    REQUIRE(in);
    std::vector<std::vector<std::string>> lines;
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::vector<std::string> fields;
        for (std::string w; words >> w;) fields.push_back(w);
        if (!fields.empty() && fields[0] == kind) lines.push_back(fields);
    }
    return lines;
}

std::vector<GgmlKernel> kernels_here() {
    std::vector<GgmlKernel> kernels;
    for (GgmlKernel k : {GgmlKernel::scalar, GgmlKernel::avx2})
        if (ggml_kernel_runs(k)) kernels.push_back(k);
        else MESSAGE("this CPU does not run the " << ggml_kernel_name(k) << " kernels: not compared");
    return kernels;
}

struct KernelScope {
    explicit KernelScope(GgmlKernel k) { set_ggml_kernel(k); }
    ~KernelScope() { set_ggml_kernel(GgmlKernel::best); }
};

// How many of GOT differ from EXPECTED bit for bit (a NaN matches any NaN); the first is reported.
std::size_t mismatches(const float* got, const float* expected, std::size_t n, const std::string& what) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const bool same = std::isnan(expected[i]) ? std::isnan(got[i])
                                                  : std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(expected[i]);
        if (!same && bad++ == 0)
            MESSAGE(what << ": element " << i << " is " << got[i] << ", ggml gives " << expected[i]);
    }
    return bad;
}

std::uint64_t fnv1a64(const std::vector<float>& values) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (float v : values) {
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
        for (int b = 0; b < 4; ++b) h = (h ^ ((bits >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
    }
    return h;
}

std::string_view view(const std::vector<std::uint8_t>& bytes, std::size_t offset, std::size_t size) {
    return {reinterpret_cast<const char*>(bytes.data()) + offset, size};
}

}  // namespace

TEST_CASE("the type table is ggml's: every id's name, block size and bytes per block") {
    const auto types = manifest("type");
    REQUIRE(types.size() == ggml_type_count);
    for (const auto& t : types) {
        const auto id = static_cast<std::uint32_t>(std::stoul(t[1]));
        INFO("type " << id << " (ggml: " << t[2] << ")");
        CHECK(ggml_block_size(id) == std::stoul(t[3]));
        CHECK(ggml_block_bytes(id) == std::stoul(t[4]));
        if (std::stoul(t[3]) == 0) {
            CHECK(ggml_type_name(id).ends_with(" (removed)"));
            CHECK_THROWS_AS(ggml_row_bytes(id, 32), InputError);
        } else {
            CHECK(ggml_type_name(id) == t[2]);
            CHECK(ggml_type_named(t[2]) == id);
        }
    }
    CHECK(ggml_type_name(ggml_type_count) == "unknown type 43");
    CHECK(ggml_type_name(0xFFFFFFFFu) == "unknown type 4294967295");
    CHECK_FALSE(ggml_type_named("q4_0_4_4").has_value());
    CHECK_FALSE(ggml_type_named("Q4_K").has_value());
}

TEST_CASE("every supported type dequantizes to ggml's floats bit for bit, with every kernel") {
    const auto rows = manifest("rows");
    std::size_t fixtures = 0;
    for (std::uint32_t t = 0; t < ggml_type_count; ++t) fixtures += ggml_type_supported(t);
    REQUIRE(rows.size() == fixtures);  // a fixture for every type read, and only those
    for (const GgmlKernel kernel : kernels_here()) {
        const KernelScope scope(kernel);
        for (const auto& r : rows) {
            const auto type = static_cast<std::uint32_t>(std::stoul(r[1]));
            const std::size_t count = std::stoul(r[3]), n = std::stoul(r[4]);
            REQUIRE(ggml_type_supported(type));
            const auto quantized = read_bytes(kDir + r[2] + ".q");
            const auto expected_bytes = read_bytes(kDir + r[2] + ".f32");
            const std::size_t row_bytes = ggml_row_bytes(type, n);
            REQUIRE(quantized.size() == count * row_bytes);
            REQUIRE(expected_bytes.size() == count * n * sizeof(float));
            std::vector<float> expected(count * n);
            std::memcpy(expected.data(), expected_bytes.data(), expected_bytes.size());
            for (std::size_t row = 0; row < count; ++row) {
                const std::string what = r[2] + " row " + std::to_string(row) + ", " + ggml_kernel_name(kernel);
                const float* want = expected.data() + row * n;
                // a heap copy of exactly the row's bytes, so a read past them is caught (ASan)
                const std::vector<std::uint8_t> own(quantized.begin() + row * row_bytes, quantized.begin() + (row + 1) * row_bytes);
                std::vector<float> got(n);
                dequantize_row(type, view(own, 0, own.size()), got.data(), n);
                CHECK_MESSAGE(mismatches(got.data(), want, n, what) == 0, what);
                std::vector<double> wide(n);
                dequantize_row(type, view(own, 0, own.size()), wide.data(), n);
                std::size_t wide_bad = 0;
                for (std::size_t i = 0; i < n; ++i)
                    wide_bad += !(wide[i] == static_cast<double>(got[i]) || (std::isnan(wide[i]) && std::isnan(got[i])));
                CHECK_MESSAGE(wide_bad == 0, what << " as double");
            }
            // every prefix of whole blocks of row 5 (random bytes): the kernels' tails
            const std::size_t block = ggml_block_size(type);
            for (std::size_t m = block; m < n; m += block) {
                const std::size_t bytes = ggml_row_bytes(type, m);
                const std::vector<std::uint8_t> own(quantized.begin() + 5 * row_bytes, quantized.begin() + 5 * row_bytes + bytes);
                std::vector<float> got(m);
                dequantize_row(type, view(own, 0, bytes), got.data(), m);
                const std::string what = r[2] + " row 5's first " + std::to_string(m) + ", " + ggml_kernel_name(kernel);
                CHECK_MESSAGE(mismatches(got.data(), expected.data() + 5 * n, m, what) == 0, what);
            }
        }
    }
}

TEST_CASE("f16 and bf16: all 65536 values widen as ggml widens them, NaN payloads included") {
    const auto lines = manifest("exhaustive");
    REQUIRE(lines.size() == 2);
    std::vector<std::uint8_t> every(65536 * 2);
    for (std::uint32_t v = 0; v < 65536; ++v) {
        every[2 * v] = static_cast<std::uint8_t>(v & 0xFF);
        every[2 * v + 1] = static_cast<std::uint8_t>(v >> 8);
    }
    for (const GgmlKernel kernel : kernels_here()) {
        const KernelScope scope(kernel);
        for (const auto& line : lines) {
            const auto type = static_cast<std::uint32_t>(std::stoul(line[1]));
            std::vector<float> got(65536);
            dequantize_row(type, view(every, 0, every.size()), got.data(), got.size());
            char hash[17];
            std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a64(got)));
            CHECK_MESSAGE(std::string(hash) == line[3], line[2] << ", " << ggml_kernel_name(kernel));
        }
    }
}

TEST_CASE("a row's size and bytes are checked before anything is read") {
    CHECK(ggml_row_bytes(ggml_q4_K, 512) == 288);
    CHECK(ggml_row_bytes(ggml_q8_0, 0) == 0);
    CHECK(ggml_row_bytes(ggml_bf16, 3) == 6);
    CHECK_THROWS_WITH_AS(ggml_row_bytes(ggml_q4_K, 100),
                         "ggml type q4_K: a row of 100 elements is not a whole number of its blocks of 256", InputError);
    CHECK_THROWS_WITH_AS(ggml_row_bytes(99, 32), "ggml type unknown type 99 has no known layout", InputError);
    CHECK_THROWS_WITH_AS(ggml_row_bytes(31, 32), "ggml type q4_0_4_4 (removed) has no known layout", InputError);
    CHECK_THROWS_AS(ggml_row_bytes(ggml_f32, SIZE_MAX), InputError);  // 4 * SIZE_MAX bytes
    // q8_1 and iq2_xxs have a layout (so their sizes are known) but are not read
    CHECK(ggml_row_bytes(ggml_q8_1, 64) == 72);
    CHECK_FALSE(ggml_type_supported(ggml_q8_1));
    float out[256];
    const std::string bytes(256, '\0');
    CHECK_THROWS_WITH_AS(dequantize_row(16, bytes, out, 256),
                         doctest::Contains("ggml type iq2_xxs (16) is not one attntrace reads (f32, f16, q4_0"), InputError);
    CHECK_THROWS_WITH_AS(dequantize_row(ggml_q4_K, std::string_view(bytes.data(), 143), out, 256),
                         "ggml type q4_K: a row of 256 elements needs 144 bytes, 143 given", InputError);
    double wide[64];
    CHECK_THROWS_AS(dequantize_row(ggml_q8_0, std::string_view(bytes.data(), 67), wide, 64), InputError);
    CHECK_THROWS_AS(dequantize_row(ggml_q8_0, bytes, wide, 48), InputError);
    CHECK(ggml_kernel() != GgmlKernel::best);
}
