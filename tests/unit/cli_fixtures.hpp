#pragma once
// Reading tests/fixtures/cli/*.json, written by tests/fixtures/make_cli_fixtures.py: numbers are
// strings in Python's float.hex() form ("0x1.8p+1", "nan", "-inf"), which std::strtod reads back
// to exactly the double numpy used; tensors are a flat row-major list plus a shape.
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/tensor.hpp"

namespace cli_fixtures {

inline nlohmann::json load(const std::string& name) {
    std::ifstream in(std::string(ATTNTRACE_FIXTURES) + "/cli/" + name);
    return nlohmann::json::parse(in);  // throws (failing the test) when missing or malformed
}

inline double number(const nlohmann::json& hex) {
    return std::strtod(hex.get<std::string>().c_str(), nullptr);
}

inline attntrace::Array<double> tensor(const nlohmann::json& shape, const nlohmann::json& data) {
    auto out = attntrace::Array<double>::from_shape(shape.get<attntrace::Shape>());
    std::size_t i = 0;
    for (double& v : out) v = number(data.at(i++));
    return out;
}

}  // namespace cli_fixtures
