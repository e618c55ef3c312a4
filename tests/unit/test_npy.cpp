// parse_npy / npy_bytes and the dtype helpers, against the fixtures and values numpy wrote
// (tests/fixtures/make_npy_fixtures.py -> tests/fixtures/npy/manifest.json).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/npy.hpp"
#include "attntrace/tensor/tensor.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "test_helpers.hpp"

namespace fs = std::filesystem;
using attntrace::Array;
using attntrace::DType;
using attntrace::InputError;
using attntrace::Shape;
using namespace attntrace::testing;
using nlohmann::json;

namespace {

const fs::path npy_dir = fs::path(ATTNTRACE_FIXTURES) / "npy";

const json& manifest() {
    static const json parsed = json::parse(read_file(npy_dir / "manifest.json"));
    return parsed;
}

double manifest_value(const json& value) {
    if (value.is_number()) return value.get<double>();
    const std::string text = value.get<std::string>();
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (text == "inf") return std::numeric_limits<double>::infinity();
    REQUIRE(text == "-inf");
    return -std::numeric_limits<double>::infinity();
}

// Exact equality that also tells -0.0 from 0.0 and takes NaN as equal to NaN.
template <class T>
bool same_value(T a, T b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
}

// Checks ACTUAL against numpy's float64 values converted to T, reporting the mismatches and the
// first one's index.
template <class T>
void check_values(const Array<T>& actual, const json& values) {
    REQUIRE(actual.size() == values.size());
    std::size_t mismatches = 0;
    std::ostringstream first;
    for (std::size_t i = 0; i < actual.size(); ++i) {
        const T expected = static_cast<T>(manifest_value(values[i]));
        if (!same_value(actual.data()[i], expected)) {
            if (mismatches++ == 0) first << "first at flat index " << i << ": " << actual.data()[i] << " vs numpy " << expected;
        }
    }
    INFO(mismatches << " of " << actual.size() << " values differ; " << first.str());
    CHECK(mismatches == 0);
}

Shape manifest_shape(const json& entry) { return entry["shape"].get<Shape>(); }

template <class T>
void check_good_fixture(const json& entry) {
    const std::string file = entry["file"];
    INFO(file << " as " << (sizeof(T) == 4 ? "float" : "double"));
    const attntrace::LoadedTensor<T> loaded = attntrace::parse_npy<T>(read_file(npy_dir / file), file);
    CHECK(Shape(loaded.array.shape().begin(), loaded.array.shape().end()) == manifest_shape(entry));
    CHECK(loaded.source.dtype == attntrace::dtype_from_name(entry["dtype"].get<std::string>()));
    CHECK(loaded.source.fortran_order == entry["fortran_order"].get<bool>());
    CHECK(loaded.source.npy_version == entry["version"].get<std::string>());
    CHECK(loaded.source.format == attntrace::FileFormat::npy);
    CHECK(loaded.source.path == file);
    check_values(loaded.array, entry["values"]);
}

template <class T>
void check_rewrite(const json& entry) {
    const std::string file = entry["file"];
    INFO(file << " as " << (sizeof(T) == 4 ? "float" : "double"));
    const Array<T> original = attntrace::parse_npy<T>(read_file(npy_dir / file), file).array;
    const std::string bytes = attntrace::npy_bytes(original);
    const attntrace::LoadedTensor<T> again = attntrace::parse_npy<T>(bytes, "rewritten");
    CHECK(again.array.shape() == original.shape());
    REQUIRE(again.array.size() == original.size());
    for (std::size_t i = 0; i < original.size(); ++i) {
        if (!same_value(again.array.data()[i], original.data()[i])) FAIL_CHECK("value " << i << " differs");
    }
    CHECK(again.source.dtype == attntrace::dtype_of<T>());
    CHECK_FALSE(again.source.fortran_order);
    CHECK(again.source.npy_version == "1.0");
    CHECK(bytes.size() % 64 == (original.size() * sizeof(T)) % 64);  // data starts 64-aligned
    CHECK(attntrace::npy_bytes(again.array) == bytes);
}

}  // namespace

TEST_CASE("every good fixture reads as numpy reads it, as float and as double") {
    const json& good = manifest()["good"];
    REQUIRE(good.size() >= 60);
    for (const json& entry : good) {
        check_good_fixture<float>(entry);
        check_good_fixture<double>(entry);
    }
}

TEST_CASE("the fixtures cover every dtype, byte order, memory order and format version") {
    std::set<std::string> descrs, versions;
    std::set<bool> orders;
    for (const json& entry : manifest()["good"]) {
        descrs.insert(entry["descr"].get<std::string>());
        versions.insert(entry["version"].get<std::string>());
        orders.insert(entry["fortran_order"].get<bool>());
    }
    for (const char* descr : {"<f2", ">f2", "<f4", ">f4", "=f4", "<f8", ">f8", "|i1", "<i1", "<i2",
                              ">i2", "=i2", "<i4", ">i4", "<i8", ">i8", "|u1", ">u1", "<u2", ">u2",
                              "<u4", ">u4", "<u8", ">u8", "|b1"}) {
        CHECK_MESSAGE(descrs.count(descr) == 1, descr);
    }
    CHECK(versions == std::set<std::string>{"1.0", "2.0", "3.0"});
    CHECK(orders.size() == 2);
}

TEST_CASE("npy_bytes writes exactly the bytes np.save writes") {
    std::size_t compared = 0;
    for (const json& entry : manifest()["good"]) {
        if (!entry["numpy_save"].get<bool>()) continue;
        const std::string file = entry["file"];
        INFO(file);
        const std::string bytes = read_file(npy_dir / file);
        if (entry["dtype"] == "f4") {
            CHECK(attntrace::npy_bytes(attntrace::parse_npy<float>(bytes, file).array) == bytes);
        } else {
            REQUIRE(entry["dtype"] == "f8");
            CHECK(attntrace::npy_bytes(attntrace::parse_npy<double>(bytes, file).array) == bytes);
        }
        ++compared;
    }
    CHECK(compared >= 10);
}

TEST_CASE("npy_bytes output parses back to the same array and the same bytes") {
    for (const json& entry : manifest()["good"]) {
        check_rewrite<float>(entry);
        check_rewrite<double>(entry);
    }
}

TEST_CASE("numpy.load reads npy_bytes output as the original file's values") {
    if (!fs::exists(python)) {
        MESSAGE("skipped: no /usr/bin/python3");
        return;
    }
    TempDir dir;
    std::string list;  // original, written, dtype: one tab-separated line per file written
    std::size_t count = 0;
    for (const json& entry : manifest()["good"]) {
        const std::string file = entry["file"];
        const std::string bytes = read_file(npy_dir / file);
        const std::string stem = "out" + std::to_string(count / 2);
        write_file(dir / (stem + ".f4.npy"), attntrace::npy_bytes(attntrace::parse_npy<float>(bytes, file).array));
        write_file(dir / (stem + ".f8.npy"), attntrace::npy_bytes(attntrace::parse_npy<double>(bytes, file).array));
        list += (npy_dir / file).string() + '\t' + (dir / (stem + ".f4.npy")) + "\tfloat32\n";
        list += (npy_dir / file).string() + '\t' + (dir / (stem + ".f8.npy")) + "\tfloat64\n";
        count += 2;
    }
    write_file(dir / "list.tsv", list);
    write_file(dir / "check.py", R"(import sys, warnings
import numpy as np
warnings.simplefilter("ignore")  # float64 -> float32 overflow to inf is expected
checked = failed = 0
for line in open(sys.argv[1]):
    original, written, dtype = line.rstrip("\n").split("\t")
    expected = np.load(original).astype(dtype, order="C")
    actual = np.load(written)
    checked += 1
    if not (actual.dtype == expected.dtype and actual.shape == expected.shape
            and actual.flags.c_contiguous and np.array_equal(actual, expected, equal_nan=True)
            and np.array_equal(np.signbit(actual), np.signbit(expected))):
        failed += 1
        print("numpy reads", written, "differently from", original, file=sys.stderr)
sys.exit(1 if failed or checked != int(sys.argv[2]) else 0)
)");
    const std::string command =
        python_command({dir / "check.py", dir / "list.tsv", std::to_string(count)});
    INFO(command);
    CHECK(std::system(command.c_str()) == 0);
}

TEST_CASE("every bad fixture throws an InputError naming the file and the problem") {
    const json& bad = manifest()["bad"];
    REQUIRE(bad.size() >= 30);
    for (const json& entry : bad) {
        const std::string file = entry["file"];
        const std::string error = entry["error"];
        INFO(file);
        const std::string bytes = read_file(npy_dir / file);
        CHECK_THROWS_WITH_AS(attntrace::parse_npy<float>(bytes, file), doctest::Contains(error.c_str()), InputError);
        CHECK_THROWS_WITH_AS(attntrace::parse_npy<double>(bytes, file), doctest::Contains(error.c_str()), InputError);
        try {
            attntrace::parse_npy<float>(bytes, file);
        } catch (const InputError& e) {
            const std::string message = e.what();
            CHECK(message.rfind(file + ": ", 0) == 0);
            CHECK(message.find('\n') == std::string::npos);
        }
    }
}

TEST_CASE("a tiny file claiming a huge shape is rejected quickly, before allocating") {
    // 70 bytes whose header claims (100000, 100000) float32: 40 GB, 320 GB as double.
    const std::string bytes = read_file(npy_dir / "bad/huge_claim.npy");
    REQUIRE(bytes.size() < 100);
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(attntrace::parse_npy<double>(bytes, "huge.npy"), InputError);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
}

TEST_CASE("every proper prefix of a valid file is an InputError") {
    for (const char* file : {"good/f2_be_f.npy", "good/v3_f4_c.npy", "good/keys_spaced.npy"}) {
        INFO(file);
        const std::string bytes = read_file(npy_dir / file);
        for (std::size_t length = 0; length < bytes.size(); ++length) {
            CHECK_THROWS_AS(attntrace::parse_npy<float>(std::string_view(bytes).substr(0, length), file), InputError);
        }
    }
}

TEST_CASE("dtype codes and names map both ways, as numpy spells them") {
    struct Row {
        DType dtype;
        const char* code;
        const char* name;
        std::size_t size;
        bool is_float;
    };
    // numpy: np.dtype(name).kind + str(np.dtype(name).itemsize), np.dtype(code).name
    const Row rows[] = {
        {DType::f2, "f2", "float16", 2, true}, {DType::f4, "f4", "float32", 4, true},
        {DType::f8, "f8", "float64", 8, true}, {DType::i1, "i1", "int8", 1, false},
        {DType::i2, "i2", "int16", 2, false},  {DType::i4, "i4", "int32", 4, false},
        {DType::i8, "i8", "int64", 8, false},  {DType::u1, "u1", "uint8", 1, false},
        {DType::u2, "u2", "uint16", 2, false}, {DType::u4, "u4", "uint32", 4, false},
        {DType::u8, "u8", "uint64", 8, false}, {DType::b1, "b1", "bool", 1, false},
    };
    for (const Row& row : rows) {
        INFO(row.name);
        CHECK(attntrace::dtype_code(row.dtype) == row.code);
        CHECK(attntrace::dtype_name(row.dtype) == row.name);
        CHECK(attntrace::dtype_size(row.dtype) == row.size);
        CHECK(attntrace::is_float(row.dtype) == row.is_float);
        CHECK(attntrace::dtype_from_name(row.code) == row.dtype);
        CHECK(attntrace::dtype_from_name(row.name) == row.dtype);
    }
    CHECK(attntrace::dtype_from_name("f32") == DType::f4);
    CHECK(attntrace::dtype_from_name("f64") == DType::f8);
    for (const char* unknown : {"", "c8", "complex64", "float128", "<f4", "Float32", "f16", "object"}) {
        CHECK_MESSAGE(!attntrace::dtype_from_name(unknown), unknown);
    }
    CHECK(attntrace::format_name(attntrace::FileFormat::npy) == "npy");
    CHECK(attntrace::format_name(attntrace::FileFormat::json) == "json");
}

TEST_CASE("shape_string prints numpy's tuple repr") {
    CHECK(attntrace::shape_string(Shape{}) == "()");
    CHECK(attntrace::shape_string(Shape{5}) == "(5,)");
    CHECK(attntrace::shape_string(Shape{2, 10, 6}) == "(2, 10, 6)");
    CHECK(attntrace::shape_string(Shape{0, 3}) == "(0, 3)");
}

TEST_CASE("checked_element_count is the product of the dims, or nullopt past 2^63 - 1") {
    const std::size_t big = std::size_t{1} << 32;
    CHECK(attntrace::checked_element_count(Shape{}) == 1u);
    CHECK(attntrace::checked_element_count(Shape{2, 10, 6}) == 120u);
    CHECK(attntrace::checked_element_count(Shape{big, big / 4}) == std::size_t{1} << 62);
    CHECK_FALSE(attntrace::checked_element_count(Shape{big, big / 2}));  // 2^63: past a signed stride
    CHECK_FALSE(attntrace::checked_element_count(Shape{big, big}));
    CHECK_FALSE(attntrace::checked_element_count(Shape{3, big, big, 0 + 1}));
    CHECK(attntrace::checked_element_count(Shape{big, 16, 0}) == 0u);  // empty, and indexable
    // Empty, but xtensor's signed strides would overflow: refused (a fuzzer find, see below).
    CHECK_FALSE(attntrace::checked_element_count(Shape{big, big, 0}));
}

TEST_CASE("fuzzer finds stay fixed: every input under tests/fixtures/fuzz is rejected cleanly") {
    // Each file once crashed or tripped a sanitizer in tests/fuzz/fuzz_tensor.cpp. Run under
    // -fsanitize=address,undefined in CI, this also proves the UB is gone.
    std::size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(std::string(ATTNTRACE_FIXTURES) + "/fuzz")) {
        ++files;
        const std::string bytes = attntrace::testing::read_file(entry.path().string());
        CAPTURE(entry.path().string());
        CHECK_THROWS_AS(attntrace::parse_tensor<float>(bytes, "fuzz"), attntrace::InputError);
    }
    CHECK(files >= 1);
}

TEST_CASE("npy_stated_size: unknown until the header is whole, then the whole file's size") {
    for (const char* file : {"good/f2_be_f.npy", "good/v3_f4_c.npy", "good/keys_spaced.npy"}) {
        INFO(file);
        const std::string bytes = read_file(npy_dir / file);
        const std::size_t header_end = bytes.size() - [&] {  // the data's size, from the parsed tensor
            const auto loaded = attntrace::parse_npy<double>(bytes, file);
            return loaded.array.size() * attntrace::dtype_size(loaded.source.dtype);
        }();
        for (std::size_t length = 0; length <= bytes.size(); ++length) {
            const auto stated = attntrace::npy_stated_size(std::string_view(bytes).substr(0, length), file);
            if (length < header_end) {
                CHECK_FALSE(stated.has_value());
            } else {
                CHECK(stated == bytes.size());
            }
        }
    }
    using namespace std::string_view_literals;
    CHECK_THROWS_WITH_AS(attntrace::npy_stated_size("\x93NUMPY\x02\x00\xff\xff\xff\x7f"sv, "s"),
                         "s: header length 2147483647 is over 1 MiB (numpy writes a few hundred bytes)", InputError);
    CHECK_THROWS_WITH_AS(attntrace::npy_stated_size("\x93NUMPY\x04\x00"sv, "s"),
                         "s: unsupported .npy format version 4.0 (expected 1.0, 2.0 or 3.0)", InputError);
}
