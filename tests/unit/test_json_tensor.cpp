// JSON tensors: parse_json_tensor against what Python's json module + numpy read from the same
// text (tests/fixtures/make_json_fixtures.py -> tests/fixtures/json/expected.json), every error
// path, and json_tensor_text -> parse_json_tensor round trips, bit for bit.
#include <doctest/doctest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/json_tensor.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "test_helpers.hpp"

using namespace attntrace;
using namespace attntrace::testing;

namespace {

const std::string json_dir = ATTNTRACE_FIXTURES "/json/";

template <class T>
std::string bits_hex(T value) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, sizeof(T) == 4 ? "%08llx" : "%016llx",
                  static_cast<unsigned long long>(std::bit_cast<Bits>(value)));
    return buffer;
}

// Every fixture read as T matches numpy's array (values as hex bits), shape and declared dtype.
template <class T>
void check_fixtures_against_numpy(const char* bits_key) {
    const nlohmann::json manifest = nlohmann::json::parse(read_file(json_dir + "expected.json"));
    REQUIRE(manifest.size() == 14);
    for (const nlohmann::json& entry : manifest) {
        const std::string file = entry["file"];
        CAPTURE(file);
        const LoadedTensor<T> tensor = parse_json_tensor<T>(read_file(json_dir + file), file);
        CHECK(shape_string(shape_of(tensor.array)) == shape_string(entry["shape"].get<Shape>()));
        CHECK(dtype_name(tensor.source.dtype) == entry["dtype"].get<std::string>());
        CHECK(tensor.source.format == FileFormat::json);
        CHECK(tensor.source.path == file);
        const std::vector<std::string> expected = entry[bits_key];
        REQUIRE(tensor.array.size() == expected.size());
        std::size_t mismatches = 0;
        std::string first;
        for (std::size_t i = 0; i < expected.size(); ++i) {
            const std::string actual = bits_hex(tensor.array.data()[i]);
            if (actual != expected[i] && mismatches++ == 0) {
                first = "flat index " + std::to_string(i) + ": " + actual + " but numpy " + expected[i];
            }
        }
        CHECK_MESSAGE(mismatches == 0, mismatches << " values differ from numpy, first at " << first);
    }
}

// The message of the InputError that parsing TEXT as "x.json" throws ("" when none).
std::string parse_error(const std::string& text) {
    try {
        parse_json_tensor<double>(text, "x.json");
    } catch (const InputError& error) {
        return error.what();
    }
    return "";
}

template <class T>
Array<T> round_trip(const Array<T>& array) {
    return parse_json_tensor<T>(json_tensor_text(array), "rt.json").array;
}

// The index of the first element whose bits differ, or -1.
template <class T>
long first_bit_difference(const Array<T>& a, const Array<T>& b) {
    if (a.size() != b.size()) return 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (bits_hex(a.data()[i]) != bits_hex(b.data()[i])) return static_cast<long>(i);
    }
    return -1;
}

// SHAPE of random finite bit patterns from ENGINE (as wide as T).
template <class T, class Engine>
Array<T> random_finite(const Shape& shape, Engine& engine) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    Array<T> out = Array<T>::from_shape(shape);
    for (T& value : out) {
        do {
            value = std::bit_cast<T>(static_cast<Bits>(engine()));
        } while (!std::isfinite(value));
    }
    return out;
}

}  // namespace

TEST_CASE("every JSON fixture reads as float64 exactly as Python's json + numpy read it") {
    check_fixtures_against_numpy<double>("f8_bits");
}

TEST_CASE("every JSON fixture reads as float32 exactly as numpy's astype(float32) of it") {
    check_fixtures_against_numpy<float>("f4_bits");
}

TEST_CASE("the accepted JSON forms give the shapes numpy gives them") {
    const auto parse = [](const char* text) { return parse_json_tensor<double>(text, "x.json").array; };
    check_shapes(parse, {
        {"[[1, 2], [3, 4]]", "(2, 2)"},
        {"3.5", "()"},
        {"[]", "(0,)"},
        {"[[], [], []]", "(3, 0)"},
        {"[[[]], [[]]]", "(2, 1, 0)"},
        {"{\"shape\": [2, 3], \"data\": [1, 2, 3, 4, 5, 6]}", "(2, 3)"},
        {"{\"data\": [[1, 2, 3], [4, 5, 6]], \"shape\": [2, 3]}", "(2, 3)"},
        {"{\"data\": [[1, 2, 3], [4, 5, 6]]}", "(2, 3)"},
        {"{\"data\": 7, \"shape\": []}", "()"},
        {"{\"shape\": [], \"data\": [7]}", "()"},
        {"{\"shape\": [0, 3], \"data\": []}", "(0, 3)"},
        {"{\"shape\": [2, 0, 4], \"data\": [[], []]}", "(2, 0, 4)"},
        {"{\"shape\": [2, 0], \"data\": []}", "(2, 0)"},
    });
}

TEST_CASE("values are stored row-major and the declared dtype is kept") {
    const LoadedTensor<float> tensor =
        parse_json_tensor<float>("{\"dtype\": \"int64\", \"shape\": [2, 2], \"data\": [5, -6, 7, 8]}", "x.json");
    CHECK(tensor.source.dtype == DType::i8);
    CHECK(tensor.array(0, 1) == -6.0f);
    CHECK(tensor.array(1, 0) == 7.0f);
    CHECK(parse_json_tensor<double>("[1]", "x.json").source.dtype == DType::f8);
    CHECK(parse_json_tensor<double>("{\"dtype\": \"f4\", \"data\": [1]}", "x.json").source.dtype == DType::f4);
    CHECK(parse_json_tensor<double>("{\"dtype\": \"bool\", \"data\": [1, 0]}", "x.json").source.dtype == DType::b1);
    CHECK(parse_json_tensor<double>("[1]", "x.json").source.npy_version.empty());
}

TEST_CASE("a non-number in the data is an error naming its JSON path") {
    CHECK(parse_error("[[1, 2, 3, 4], [1, 2, 3, \"a\"]]") == "x.json: $[1][3]: expected a number, found a string");
    CHECK(parse_error("[1, null]") == "x.json: $[1]: expected a number, found null");
    CHECK(parse_error("[[true]]") == "x.json: $[0][0]: expected a number, found true");
    CHECK(parse_error("[1, false]") == "x.json: $[1]: expected a number, found false");
    CHECK(parse_error("{\"data\": [1, {\"a\": 1}]}") == "x.json: $.data[1]: expected a number, found an object");
    CHECK(parse_error("{\"data\": [[1], [\"x\"]]}") == "x.json: $.data[1][0]: expected a number, found a string");
    CHECK(parse_error("{\"data\": \"x\"}") == "x.json: $.data: expected a number or an array, found a string");
    CHECK(parse_error("\"abc\"") == "x.json: $: expected a number, an array or a tensor object, found a string");
    CHECK(parse_error("null") == "x.json: $: expected a number, an array or a tensor object, found null");
}

TEST_CASE("a ragged array is an error naming both paths") {
    CHECK(parse_error("[[1, 2, 3], [4, 5]]") == "x.json: $[1]: ragged array: 2 elements here but 3 in $[0]");
    CHECK(parse_error("[[[1], [2]], [[3]]]") == "x.json: $[1]: ragged array: 1 element here but 2 in $[0]");
    CHECK(parse_error("[[[1, 2], [3, 4]], [[5, 6], [7]]]") ==
          "x.json: $[1][1]: ragged array: 1 element here but 2 in $[0][0]");
    CHECK(parse_error("[[], [1]]") == "x.json: $[1]: ragged array: 1 element here but 0 in $[0]");
    CHECK(parse_error("{\"data\": [[1], [2, 3]]}") ==
          "x.json: $.data[1]: ragged array: 2 elements here but 1 in $.data[0]");
    // Mixed depths: numbers where arrays were, arrays where numbers were.
    CHECK(parse_error("[[1, 2], 3]") == "x.json: $[1]: expected an array, found a number");
    CHECK(parse_error("[[1, 2], [3, [4]]]") == "x.json: $[1][1]: expected a number, found an array");
    CHECK(parse_error("[[[]], [1]]") == "x.json: $[1][0]: expected an array, found a number");
}

TEST_CASE("invalid or truncated JSON is an error with the byte offset") {
    CHECK(parse_error("[[1, 2], [3") ==
          "x.json: invalid JSON at byte 11: syntax error while parsing array - unexpected end of input; "
          "expected ']'");
    CHECK(parse_error("[1 2]") ==
          "x.json: invalid JSON at byte 3: syntax error while parsing array - unexpected number literal; "
          "expected ']'");
    CHECK(parse_error("[1] x") ==
          "x.json: invalid JSON at byte 4: syntax error while parsing value - invalid literal; last read: '1] x'; "
          "expected end of input");
    CHECK(parse_error("") ==
          "x.json: invalid JSON at byte 0: syntax error while parsing value - unexpected end of input; "
          "expected '[', '{', or a literal");
    CHECK(parse_error("[1e999]") == "x.json: invalid JSON at byte 5: number overflow parsing '1e999'");
}

TEST_CASE("NaN, Infinity and -Infinity are read as Python's json module reads them") {
    // json.loads('[[NaN, 1], [Infinity, -Infinity]]') == [[nan, 1], [inf, -inf]]
    const Array<double> a = parse_json_tensor<double>("[[NaN, 1], [Infinity,-Infinity]]", "x.json").array;
    REQUIRE(shape_of(a) == Shape{2, 2});
    CHECK(std::isnan(a(0, 0)));
    CHECK(a(0, 1) == 1.0);
    CHECK(a(1, 0) == std::numeric_limits<double>::infinity());
    CHECK(a(1, 1) == -std::numeric_limits<double>::infinity());
    CHECK(std::isnan(parse_json_tensor<float>("NaN", "x.json").array()));  // json.loads('NaN') is nan
    // in the object form, next to strings that spell them, and counted right among other numbers
    const Array<float> b =
        parse_json_tensor<float>("{\"dtype\": \"float32\", \"shape\": [3], \"data\": [-0.0, -Infinity, 2.5e1]}", "x.json").array;
    CHECK(std::signbit(b(0)));
    CHECK(b(1) == -std::numeric_limits<float>::infinity());
    CHECK(b(2) == 25.0f);
    CHECK(parse_error("{\"dtype\": \"NaN\", \"data\": [1]}") == "x.json: $.dtype: unknown dtype \"NaN\"");
}

TEST_CASE("only Python's spellings of non-finite numbers are read, and only where a number goes") {
    CHECK(parse_error("[1, nan]").starts_with("x.json: invalid JSON at byte 5: "));  // at the a
    CHECK(parse_error("[inf]").starts_with("x.json: invalid JSON at byte 1: "));
    CHECK(parse_error("[+Infinity]").starts_with("x.json: invalid JSON at byte 1: "));
    CHECK(parse_error("[1NaN]").starts_with("x.json: invalid JSON at byte "));
    CHECK(parse_error("[NaN1]").starts_with("x.json: invalid JSON at byte "));
    CHECK(parse_error("[Infinityy]").starts_with("x.json: invalid JSON at byte "));
    CHECK(parse_error("{\"shape\": [NaN], \"data\": []}") ==
          "x.json: $.shape[0]: expected a non-negative integer, found NaN");
    CHECK(parse_error("[1, 2] NaN").starts_with("x.json: invalid JSON at byte 7: "));
}

TEST_CASE("nesting deeper than 64 levels is rejected at once, even 100,000 levels deep") {
    const std::string deep64 = std::string(64, '[') + "1" + std::string(64, ']');
    CHECK(parse_json_tensor<double>(deep64, "x.json").array.dimension() == 64);
    const std::string deep65 = std::string(65, '[') + "1" + std::string(65, ']');
    CHECK(parse_error(deep65) == "x.json: $: arrays nested deeper than 64 levels");

    const auto start = std::chrono::steady_clock::now();
    CHECK(parse_error(std::string(100000, '[')) == "x.json: $: arrays nested deeper than 64 levels");
    CHECK(parse_error("{\"data\": " + std::string(100000, '[')) ==
          "x.json: $.data: arrays nested deeper than 64 levels");
    CHECK(parse_error("{\"shape\": " + std::string(100000, '[')) ==
          "x.json: $.shape[0]: expected a non-negative integer, found an array");
    CHECK(parse_error("{\"data\": [" + std::string(100000, '{')) ==
          "x.json: $.data[0]: expected a number, found an object");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(seconds < 0.5);
}

TEST_CASE("a tensor object's keys, dtype and shape are checked") {
    CHECK(parse_error("{\"dtype\": \"float7\", \"data\": [1]}") == "x.json: $.dtype: unknown dtype \"float7\"");
    CHECK(parse_error("{\"dtype\": 32, \"data\": [1]}") ==
          "x.json: $.dtype: expected a dtype name such as \"float32\", found a number");
    CHECK(parse_error("{\"data\": [1], \"dtpye\": \"float32\"}") ==
          "x.json: $: unknown key \"dtpye\" (a tensor object has \"shape\", \"dtype\" and \"data\")");
    CHECK(parse_error("{\"data\": [1], \"data\": [2]}") == "x.json: $: duplicate key \"data\"");
    CHECK(parse_error("{\"a\\nb\": 1}") ==
          "x.json: $: unknown key \"a?b\" (a tensor object has \"shape\", \"dtype\" and \"data\")");
    CHECK(parse_error("{\"dtype\": \"" + std::string(50, 'f') + "\"}") ==
          "x.json: $.dtype: unknown dtype \"" + std::string(40, 'f') + "...\"");
    CHECK(parse_error("{\"shape\": [2]}") == "x.json: $: missing key \"data\"");
    CHECK(parse_error("{}") == "x.json: $: missing key \"data\"");
    CHECK(parse_error("{\"shape\": [2, -1], \"data\": []}") ==
          "x.json: $.shape[1]: expected a non-negative integer, found -1");
    CHECK(parse_error("{\"shape\": [2.0], \"data\": [1, 2]}") ==
          "x.json: $.shape[0]: expected a non-negative integer, found 2.0");
    CHECK(parse_error("{\"shape\": 2, \"data\": [1, 2]}") ==
          "x.json: $.shape: expected an array of non-negative integers, found a number");
}

TEST_CASE("data that does not fit the declared shape is an error") {
    CHECK(parse_error("{\"shape\": [2, 3], \"data\": [[1, 2], [3, 4]]}") ==
          "x.json: $.data: shape (2, 2) but \"shape\" says (2, 3)");
    CHECK(parse_error("{\"shape\": [2, 3], \"data\": [1, 2, 3, 4, 5]}") ==
          "x.json: $.data: flat list of 5 numbers but \"shape\" (2, 3) needs 6");
    CHECK(parse_error("{\"shape\": [6], \"data\": [[1, 2, 3], [4, 5, 6]]}") ==
          "x.json: $.data: shape (2, 3) but \"shape\" says (6,)");
    CHECK(parse_error("{\"shape\": [1], \"data\": 5}") == "x.json: $.data: shape () but \"shape\" says (1,)");
    CHECK(parse_error("{\"shape\": [2, 0, 3], \"data\": [[], [], []]}") ==
          "x.json: $.data: shape (3, 0) but \"shape\" says (2, 0, 3)");
    CHECK(parse_error("{\"shape\": [4294967296, 4294967296, 2], \"data\": [1]}") ==
          "x.json: $.shape: (4294967296, 4294967296, 2) has dims whose product passes 2^63");
}

TEST_CASE("json_tensor_text writes shape, dtype and nested data in shortest round-trip form") {
    Array<float> f = {{0.1f, -0.0f, 1e-38f}, {3.4028235e38f, 1.0f, 1e-45f}};
    CHECK(json_tensor_text(f) ==
          "{\"shape\": [2, 3], \"dtype\": \"float32\", \"data\": "
          "[[0.1, -0.0, 1e-38], [3.4028235e+38, 1, 1e-45]]}\n");
    Array<double> d = {0.1, 1.0 / 3.0, -2.5e-300};
    CHECK(json_tensor_text(d) ==
          "{\"shape\": [3], \"dtype\": \"float64\", \"data\": [0.1, 0.3333333333333333, -2.5e-300]}\n");
    CHECK(json_tensor_text(Array<double>(2.5)) == "{\"shape\": [], \"dtype\": \"float64\", \"data\": 2.5}\n");
    CHECK(json_tensor_text(Array<float>::from_shape({2, 0, 3})) ==
          "{\"shape\": [2, 0, 3], \"dtype\": \"float32\", \"data\": [[], []]}\n");
    // 7.038531e-26 would read back (through double, as numpy reads it) as the next float up.
    CHECK(json_tensor_text(Array<float>{std::bit_cast<float>(0x15ae43fdu)}) ==
          "{\"shape\": [1], \"dtype\": \"float32\", \"data\": [7.038530691851209e-26]}\n");
    CHECK(json_tensor_text(Array<float>::from_shape({0})) ==
          "{\"shape\": [0], \"dtype\": \"float32\", \"data\": []}\n");
}

TEST_CASE("non-finite values are written as Python's json module writes them") {
    const double inf = std::numeric_limits<double>::infinity();
    Array<double> d = {std::numeric_limits<double>::quiet_NaN(), inf, -inf};
    const std::string text = json_tensor_text(d);
    CHECK(text == "{\"shape\": [3], \"dtype\": \"float64\", \"data\": [NaN, Infinity, -Infinity]}\n");
    const Array<double> back = parse_json_tensor<double>(text, "x.json").array;  // and reads them back
    CHECK(std::isnan(back(0)));
    CHECK(back(1) == inf);
    CHECK(back(2) == -inf);
}

TEST_CASE("json_tensor_text output is standard JSON that nlohmann's DOM parser reads") {
    Array<double> d = {{1.5, -0.0}, {1e300, 5e-324}};
    const nlohmann::json doc = nlohmann::json::parse(json_tensor_text(d));
    CHECK(doc["shape"] == nlohmann::json::array({2, 2}));
    CHECK(doc["dtype"] == "float64");
    CHECK(doc["data"][1][0].get<double>() == 1e300);
    CHECK(std::signbit(doc["data"][0][1].get<double>()));
}

TEST_CASE("json_tensor_text -> parse_json_tensor is bitwise identity for float") {
    Array<float> special = {0.1f, 1e-38f, -0.0f, 0.0f, 3.4028235e38f, -3.4028235e38f, 1e-45f,
                            1.17549435e-38f, 16777216.0f, 16777218.0f, 123456789.0f, 1.0f / 3.0f,
                            std::numeric_limits<float>::epsilon(), 1e10f, -7.0f,
                            // the only finite floats whose shortest decimal reads back wrongly
                            // through double (found by trying all 2^32)
                            std::bit_cast<float>(0x15ae43fdu), std::bit_cast<float>(0x95ae43fdu)};
    CHECK(first_bit_difference(special, round_trip(special)) == -1);

    // 100,000 random finite bit patterns, every exponent equally likely.
    std::mt19937 engine(12345);
    const Array<float> random = random_finite<float>({100, 1000}, engine);
    const long at = first_bit_difference(random, round_trip(random));
    CHECK_MESSAGE(at == -1, "first difference at flat index " << at);
}

TEST_CASE("json_tensor_text -> parse_json_tensor is bitwise identity for double") {
    Array<double> special = {0.1, 1e-38, -0.0, 0.0, 3.4028235e38, 5e-324, 2.2250738585072014e-308,
                             1.7976931348623157e308, 9007199254740993.0, 1e23, 18446744073709551616.0,
                             9223372036854775808.0, -9223372036854775808.0, 123456789012345680.0,
                             1.0 / 3.0};
    CHECK(first_bit_difference(special, round_trip(special)) == -1);

    std::mt19937_64 engine(6789);
    const Array<double> random = random_finite<double>({10, 10, 1000}, engine);
    const long at = first_bit_difference(random, round_trip(random));
    CHECK_MESSAGE(at == -1, "first difference at flat index " << at);
}

TEST_CASE("json_tensor_text -> parse_json_tensor keeps the shape, empty dims and 0-d included") {
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{3}, Shape{2, 0}, Shape{0, 3}, Shape{2, 0, 3},
                               Shape{2, 3, 4}, Shape{1, 1, 1, 1}}) {
        Array<double> array = Array<double>::from_shape(shape);
        for (std::size_t i = 0; i < array.size(); ++i) array.data()[i] = 0.5 * static_cast<double>(i) - 3.0;
        CAPTURE(shape_string(shape));
        const Array<double> back = round_trip(array);
        CHECK(shape_string(shape_of(back)) == shape_string(shape));
        CHECK(first_bit_difference(array, back) == -1);
    }
}
