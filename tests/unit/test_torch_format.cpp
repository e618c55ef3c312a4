// torch_str against PyTorch 1.13's str(tensor), recorded byte for byte by
// tests/fixtures/make_torch_format_fixtures.py into tests/fixtures/torch_format/.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "attntrace/io/torch_format.hpp"

namespace {

const std::string dir = ATTNTRACE_FIXTURES "/torch_format/";

nlohmann::json load_manifest() {
    std::ifstream in(dir + "manifest.json");
    return nlohmann::json::parse(in);  // throws (failing the test) when missing or malformed
}

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
        lines.push_back(text.substr(start, end - start));
    }
    lines.push_back(text.substr(start));
    return lines;
}

// "" when equal, else the first line that differs, both ways.
std::string first_difference(const std::string& expected, const std::string& actual) {
    if (expected == actual) return "";
    const auto want = split_lines(expected);
    const auto got = split_lines(actual);
    std::size_t i = 0;
    while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
    std::ostringstream out;
    out << "line " << i + 1 << " differs:\n  torch:    "
        << (i < want.size() ? "'" + want[i] + "'" : "<no line>") << "\n  attntrace: "
        << (i < got.size() ? "'" + got[i] + "'" : "<no line>");
    return out.str();
}

attntrace::TorchPrintOptions options_of(const nlohmann::json& c) {
    attntrace::TorchPrintOptions options;
    if (!c.contains("options")) return options;
    const auto& o = c["options"];
    if (o.contains("precision")) options.precision = o["precision"].get<int>();
    if (o.contains("threshold")) options.threshold = o["threshold"].get<std::size_t>();
    if (o.contains("edgeitems")) options.edgeitems = o["edgeitems"].get<std::size_t>();
    if (o.contains("linewidth")) options.linewidth = o["linewidth"].get<std::size_t>();
    if (o.contains("sci_mode") && !o["sci_mode"].is_null()) options.sci_mode = o["sci_mode"].get<bool>();
    return options;
}

template <class T>
std::string format_case(const nlohmann::json& c) {
    const auto loaded = attntrace::load_tensor<T>(dir + c["npy"].get<std::string>());
    return attntrace::torch_str(loaded.array, options_of(c));
}

}  // namespace

TEST_CASE("torch_str equals torch 1.13's str() byte for byte on every recorded tensor") {
    const auto manifest = load_manifest();
    REQUIRE(manifest.size() >= 80);
    std::size_t passed = 0;
    for (const auto& c : manifest) {
        const std::string name = c["name"].get<std::string>();
        const std::string dtype = c["dtype"].get<std::string>();
        REQUIRE_MESSAGE((dtype == "float32" || dtype == "float64"), name << ": dtype " << dtype);
        const std::string actual =
            dtype == "float32" ? format_case<float>(c) : format_case<double>(c);
        const std::string diff = first_difference(c["expected"].get<std::string>(), actual);
        CHECK_MESSAGE(diff.empty(), name << ": " << diff);
        if (diff.empty()) ++passed;
    }
    CHECK(passed == manifest.size());
}

TEST_CASE("the atcold notebook's weights and output print as the notebook shows them") {
    // The recorded softmax / matmul results of seed 001, checked against the notebook's text.
    const auto weights = attntrace::load_tensor<float>(dir + "atcold_weights_q1.npy");
    CHECK(attntrace::torch_str(weights.array) ==
          "tensor([3.7266e-06, 9.9999e-01, 3.7266e-06, 3.7266e-06])");
    const auto output = attntrace::load_tensor<float>(dir + "atcold_output_q2.npy");
    CHECK(attntrace::torch_str(output.array) == "tensor([549.9979,   5.5000,   0.0000])");
}

TEST_CASE("a float64 tensor says its dtype and a float32 one does not") {
    const attntrace::Array<float> f = {0.5f, 1.25f};
    const attntrace::Array<double> d = {0.5, 1.25};
    CHECK(attntrace::torch_str(f) == "tensor([0.5000, 1.2500])");
    CHECK(attntrace::torch_str(d) == "tensor([0.5000, 1.2500], dtype=torch.float64)");
}

TEST_CASE("print options outside the supported range are usage errors") {
    const attntrace::Array<float> a = {1.0f};
    attntrace::TorchPrintOptions negative;
    negative.precision = -1;
    CHECK_THROWS_WITH_AS(attntrace::torch_str(a, negative), "precision -1: must be between 0 and 100",
                         attntrace::UsageError);
    attntrace::TorchPrintOptions no_edges;
    no_edges.edgeitems = 0;
    CHECK_THROWS_WITH_AS(attntrace::torch_str(a, no_edges), "edgeitems 0: must be at least 1",
                         attntrace::UsageError);
}
