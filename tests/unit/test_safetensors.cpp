// parse_safetensors / safetensors_bytes, against files written by hand the way the reference
// writes them (tests/fixtures/make_params_fixtures.py -> tests/fixtures/params/), and read back
// by that script through torch.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/safetensors.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "test_helpers.hpp"

namespace fs = std::filesystem;
using attntrace::Array;
using attntrace::InputError;
using attntrace::Shape;
using attntrace::FileBytes;
using attntrace::SafetensorsIndex;
using attntrace::index_safetensors;
using attntrace::read_safetensors_rows;
using attntrace::read_safetensors_tensor;
using attntrace::set_read_threads;
using namespace attntrace::testing;
using nlohmann::json;

namespace {

const fs::path params_dir = fs::path(ATTNTRACE_FIXTURES) / "params";
const std::string fixture_script = std::string(ATTNTRACE_FIXTURES) + "/make_params_fixtures.py";

std::string le64(std::uint64_t n) {
    std::string out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    return out;
}

template <class T>
std::map<std::string, Array<T>> sample_tensors() {
    std::map<std::string, Array<T>> t;
    t["b.weight"] = xt::cast<T>(Array<double>{{1.5, -2.25, 3.0}, {0.1, -0.0, 1e-30}});
    t["a"] = Array<T>::from_shape({0, 4});
    t["c/scalar"] = Array<T>(T(-7.125));
    t["\"quoted\" \xc3\xa9"] = Array<T>::from_shape({2});
    t["\"quoted\" \xc3\xa9"](0) = T(1) / T(3);
    t["\"quoted\" \xc3\xa9"](1) = T(2) / T(3);
    return t;
}

}  // namespace

TEST_CASE("every safetensors dtype converts to the value PyTorch stored") {
    const auto as_double = attntrace::load_safetensors<double>((params_dir / "dtypes.safetensors").string());
    const auto as_float = attntrace::load_safetensors<float>((params_dir / "dtypes.safetensors").string());
    std::size_t compared = 0;
    for (const auto& entry : fs::directory_iterator(params_dir / "dtypes")) {
        const std::string name = entry.path().stem().string();
        const Array<double> expected = attntrace::load_tensor<double>(entry.path().string()).array;
        REQUIRE_MESSAGE(as_double.count(name), name);
        check_equal(as_double.at(name), expected, name + " as double");
        const Array<float> expected_float = xt::cast<float>(expected);
        check_equal(as_float.at(name), expected_float, name + " as float");
        ++compared;
    }
    // 13 dtypes (F16, BF16, F32, F64, I8..I64, U8..U64, BOOL), a 0-d and an empty tensor
    CHECK(compared == 15);
    CHECK(as_double.size() == compared);
    CHECK(shape_of(as_double.at("scalar")).empty());
    CHECK(shape_of(as_double.at("empty")) == Shape{2, 0});
    CHECK(std::signbit(as_double.at("f16").data()[6]));  // -0.0 keeps its sign
}

TEST_CASE("a state_dict written as safetensors reads back as the same tensors as its .npy files") {
    for (const char* name : {"torch_self", "torch_kv", "d2l", "bloem"}) {
        const auto tensors = attntrace::load_safetensors<float>((params_dir / "good" / (std::string(name) + ".safetensors")).string());
        std::size_t files = 0;
        for (const auto& entry : fs::directory_iterator(params_dir / "good" / name)) {
            const std::string tensor = entry.path().stem().string();
            REQUIRE_MESSAGE(tensors.count(tensor), tensor);
            check_equal(tensors.at(tensor), attntrace::load_tensor<float>(entry.path().string()).array, tensor);
            ++files;
        }
        CHECK(tensors.size() == files);
    }
}

TEST_CASE("every malformed file is an InputError naming the file and the fault, on one line") {
    const json manifest = json::parse(read_file(params_dir / "bad" / "manifest.json"));
    REQUIRE(manifest.size() >= 25);
    for (const json& entry : manifest) {
        const std::string path = (params_dir / "bad" / entry["file"].get<std::string>()).string();
        const std::string contains = entry["contains"];
        for (const std::string& message :
             {error_of<InputError>([&] { attntrace::load_safetensors<float>(path); }),
              error_of<InputError>([&] { attntrace::load_safetensors<double>(path); })}) {
            INFO(path << ": " << message);
            CHECK(message.rfind(path + ": ", 0) == 0);
            CHECK(message.find(contains) != std::string::npos);
            CHECK(message.find('\n') == std::string::npos);
        }
    }
}

TEST_CASE("the header size limit is the reference's 100,000,000 bytes, checked before the file size") {
    // 100,000,001 is over the limit whatever the file holds; 100,000,000 is allowed, so this small
    // file fails only because the header runs past its end
    const std::string over = le64(100'000'001) + "{}      ";
    CHECK_THROWS_WITH_AS(attntrace::parse_safetensors<float>(over, "x.safetensors"),
                         "x.safetensors: header size 100000001 exceeds the limit of 100000000 bytes", InputError);
    const std::string at = le64(100'000'000) + "{}      ";
    CHECK_THROWS_WITH_AS(attntrace::parse_safetensors<float>(at, "x.safetensors"),
                         "x.safetensors: header size 100000000 runs past the end of the file (16 bytes)", InputError);
    const std::string max = le64(~std::uint64_t{0}) + "{}";
    CHECK_THROWS_AS(attntrace::parse_safetensors<float>(max, "x"), InputError);
}

TEST_CASE("the smallest valid files: no tensors, with and without __metadata__") {
    CHECK(attntrace::parse_safetensors<float>(le64(2) + "{}", "x").empty());
    CHECK(attntrace::parse_safetensors<float>(le64(8) + "{}      ", "x").empty());
    const std::string meta = R"({"__metadata__":{"format":"pt","a":"b"}})";
    CHECK(attntrace::parse_safetensors<float>(le64(meta.size()) + meta, "x").empty());
    // the reference's own serialization example: attn.0, F32 (1, 2, 3) = 0..5
    std::string data;
    for (float v : {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f}) data += std::string(reinterpret_cast<const char*>(&v), 4);
    const std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
    const auto t = attntrace::parse_safetensors<double>(le64(header.size()) + header + data, "x");
    check_equal(t.at("attn.0"), Array<double>{{{0, 1, 2}, {3, 4, 5}}}, "attn.0");
}

TEST_CASE("every proper prefix of a valid file is an InputError") {
    const std::string bytes = read_file(params_dir / "good" / "torch_kv.safetensors");
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        const std::string message = error_of<InputError>([&] { attntrace::parse_safetensors<float>(bytes.substr(0, n), "cut"); });
        INFO("first " << n << " bytes");
        CHECK(message.rfind("cut: ", 0) == 0);
    }
    CHECK(attntrace::parse_safetensors<float>(bytes, "whole").size() == 6);
}

TEST_CASE("safetensors_bytes writes the reference's layout: padded header, __metadata__, name order") {
    const auto tensors = sample_tensors<float>();
    const std::string bytes = attntrace::safetensors_bytes(tensors);
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    CHECK(n % 8 == 0);
    const std::string header = bytes.substr(8, n);
    const std::string trimmed = header.substr(0, header.find_last_not_of(' ') + 1);
    CHECK(header.size() - trimmed.size() < 8);
    CHECK(trimmed.rfind(R"({"__metadata__":{"format":"pt"},"\"quoted\" )", 0) == 0);
    const json parsed = json::parse(trimmed);
    CHECK(parsed["__metadata__"] == json{{"format", "pt"}});
    // offsets follow name order: "\"quoted\" é" (8 bytes), "a" (0), "b.weight" (24), "c/scalar" (4)
    CHECK(parsed["\"quoted\" \xc3\xa9"]["data_offsets"] == json{0, 8});
    CHECK(parsed["a"]["data_offsets"] == json{8, 8});
    CHECK(parsed["a"]["shape"] == json{0, 4});
    CHECK(parsed["b.weight"]["data_offsets"] == json{8, 32});
    CHECK(parsed["b.weight"]["dtype"] == "F32");
    CHECK(parsed["c/scalar"]["shape"] == json::array());
    CHECK(parsed["c/scalar"]["data_offsets"] == json{32, 36});
    CHECK(bytes.size() == 8 + n + 36);
}

TEST_CASE("safetensors_bytes output parses back to the same tensors, float and double") {
    const auto f = sample_tensors<float>();
    const auto f_back = attntrace::parse_safetensors<float>(attntrace::safetensors_bytes(f), "f");
    REQUIRE(f_back.size() == f.size());
    for (const auto& [name, a] : f) check_equal(f_back.at(name), a, name);
    const auto d = sample_tensors<double>();
    const std::string d_bytes = attntrace::safetensors_bytes(d);
    CHECK(d_bytes.find(R"("dtype":"F64")") != std::string::npos);
    const auto d_back = attntrace::parse_safetensors<double>(d_bytes, "d");
    for (const auto& [name, a] : d) check_equal(d_back.at(name), a, name);
    CHECK(std::signbit(d_back.at("b.weight")(1, 1)));
}

TEST_CASE("PyTorch reads what safetensors_bytes writes as the same tensors") {
    if (!torch_available()) {
        MESSAGE("skipped: /usr/bin/python3 with torch and numpy is not installed");
        return;
    }
    TempDir tmp;
    const auto f = sample_tensors<float>();
    const auto d = sample_tensors<double>();
    fs::create_directories(tmp.path / "f");
    fs::create_directories(tmp.path / "d");
    // the .npy names may not hold '/' or quotes: compare the plain-named tensors through numpy
    std::map<std::string, Array<float>> f_plain{{"a", f.at("a")}, {"b.weight", f.at("b.weight")}, {"scalar", f.at("c/scalar")}};
    std::map<std::string, Array<double>> d_plain{{"a", d.at("a")}, {"b.weight", d.at("b.weight")}, {"scalar", d.at("c/scalar")}};
    for (const auto& [name, a] : f_plain) attntrace::save_tensor(tmp / ("f/" + name + ".npy"), a);
    for (const auto& [name, a] : d_plain) attntrace::save_tensor(tmp / ("d/" + name + ".npy"), a);
    const std::string f_file = tmp / "f.safetensors";
    const std::string d_file = tmp / "d.safetensors";
    write_file(f_file, attntrace::safetensors_bytes(f_plain));
    write_file(d_file, attntrace::safetensors_bytes(d_plain));
    // the script checks each (file, dir of .npy files) pair
    CHECK(run_python({fixture_script, "--check-safetensors", f_file, tmp / "f", d_file, tmp / "d"}) == 0);
    // and the check can fail: float data against the float64 .npy files
    CHECK(run_python({fixture_script, "--check-safetensors", f_file, tmp / "d"}, " 2>/dev/null") != 0);
    // names with quotes, '/' and UTF-8 are written as valid JSON
    const std::string odd_file = tmp / "odd.safetensors";
    write_file(odd_file, attntrace::safetensors_bytes(f));
    const std::string script = tmp / "odd.py";
    write_file(script, "import sys\n"
                       "sys.dont_write_bytecode = True\n"
                       "sys.path.insert(0, sys.argv[1])\n"
                       "import make_params_fixtures as m\n"
                       "t = m.read_safetensors(sys.argv[2])\n"
                       "names = sorted(['a', 'b.weight', 'c/scalar', '\"quoted\" \\u00e9'])\n"
                       "sys.exit(0 if sorted(t) == names and t['c/scalar'].item() == -7.125 else 1)\n");
    CHECK(run_python({script, ATTNTRACE_FIXTURES, odd_file}) == 0);
}

TEST_CASE("8-bit floats decode every code as the format defines it, header padded with leading spaces") {
    // tests/fixtures/make_fp8_fixtures.py: codes 0..255 of each dtype, values from the definitions
    const fs::path dir = fs::path(ATTNTRACE_FIXTURES) / "fp8";
    const auto tensors = attntrace::load_safetensors<double>((dir / "float8.safetensors").string());
    for (const char* name : {"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"}) {
        const Array<double> expected = attntrace::load_tensor<double>((dir / (std::string(name) + ".npy")).string()).array;
        REQUIRE(tensors.count(name));
        const Array<double>& got = tensors.at(name);
        REQUIRE(got.size() == 256);
        std::size_t mismatches = 0;
        for (std::size_t c = 0; c < 256; ++c) {
            const bool same = std::isnan(expected(c)) ? std::isnan(got(c)) : got(c) == expected(c);
            if (!same) MESSAGE(name << " code " << c << ": got " << got(c) << ", expected " << expected(c));
            mismatches += !same;
        }
        CHECK_MESSAGE(mismatches == 0, name);
    }
}

TEST_CASE("index_safetensors reads the header only; read_safetensors_tensor converts one tensor") {
    const auto bytes = attntrace::safetensors_bytes(sample_tensors<double>());
    const auto index = attntrace::index_safetensors(bytes, "mem.safetensors");
    REQUIRE(index.tensors.size() == 4);
    const auto& w = index.tensors.at("b.weight");
    CHECK(w.dtype == "F64");
    CHECK(w.shape == Shape{2, 3});
    CHECK(w.nbytes == 48);
    const Array<float> got = attntrace::read_safetensors_tensor<float>(bytes, index, "b.weight");
    const Array<float> expected = xt::cast<float>(sample_tensors<double>()["b.weight"]);
    check_equal(got, expected, "b.weight");
    CHECK_THROWS_WITH_AS(attntrace::read_safetensors_tensor<float>(bytes, index, "nope"),
                         "mem.safetensors: no tensor 'nope'", InputError);
}

TEST_CASE("rows read alone are the whole tensor's rows, and a bf16 tensor converts the same on 1 and 3 read workers") {
    TempDir dir;
    // a (1500, 1024) bf16 tensor: 3 MB, over the 2 MiB from which the read is split; and a vector
    const std::size_t rows = 1500, cols = 1024;
    std::string data(rows * cols * 2, '\0');
    for (std::size_t i = 0; i < rows * cols; ++i) {
        const std::uint16_t bits = static_cast<std::uint16_t>(0x3c00 + (i * 2654435761u >> 20) % 0x0800);  // finite
        data[2 * i] = static_cast<char>(bits & 0xff), data[2 * i + 1] = static_cast<char>(bits >> 8);
    }
    std::string header = R"({"t":{"dtype":"BF16","shape":[1500,1024],"data_offsets":[0,)" + std::to_string(data.size()) +
                         R"(]},"v":{"dtype":"BF16","shape":[4],"data_offsets":[)" + std::to_string(data.size()) + "," +
                         std::to_string(data.size() + 8) + "]}}";
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string file(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    file += header + data + std::string("\x80\x3f\x00\x40\x40\x40\x80\x40", 8);  // 1, 2, 3, 4
    write_file(dir / "m.safetensors", file);
    const FileBytes bytes = FileBytes::open(dir / "m.safetensors");
    const SafetensorsIndex index = index_safetensors(bytes.bytes(), "m.safetensors");
    set_read_threads(1);
    const Array<float> one = read_safetensors_tensor<float>(bytes.bytes(), index, "t", &bytes);
    set_read_threads(3);
    const Array<float> three = read_safetensors_tensor<float>(bytes.bytes(), index, "t", &bytes);
    set_read_threads(1);
    check_equal(three, one, "3 read workers vs 1");
    std::vector<double> block((700 - 13) * cols);
    read_safetensors_rows<double>(bytes.bytes(), index, "t", 13, 700, block.data(), &bytes);
    for (std::size_t i = 0; i < block.size(); ++i) REQUIRE(block[i] == double(one.data()[13 * cols + i]));
    std::vector<float> v(2);
    read_safetensors_rows<float>(bytes.bytes(), index, "v", 2, 4, v.data(), &bytes);
    CHECK(v == std::vector<float>{3, 4});
    CHECK(error_of<InputError>([&] { read_safetensors_rows<float>(bytes.bytes(), index, "v", 3, 5, v.data(), &bytes); }) ==
          "m.safetensors: tensor 'v': rows [3, 5) of 4");
}
