// Reading a parameter file into name -> tensor (params_files.hpp): .safetensors, a JSON object of
// name -> tensor, or a directory of NAME.npy files.
#include "attntrace/attention/params_files.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/json_tensor.hpp"
#include "attntrace/io/safetensors.hpp"
#include "attntrace/io/sniff.hpp"
#include "attntrace/io/tensor_io.hpp"

namespace attntrace {

namespace {

using json = nlohmann::json;

template <class T>
using Tensors = std::map<std::string, Array<T>>;  // name -> array of any shape

constexpr int max_json_depth = 65;  // the name object, then parse_json_tensor's 64 levels

[[noreturn]] void fail(const std::string& source, const std::string& what) {
    throw InputError(source + ": " + what);
}

bool ends_with_ci(const std::string& s, std::string_view suffix) {
    if (s.size() < suffix.size()) return false;
    return std::equal(suffix.begin(), suffix.end(), s.end() - static_cast<std::ptrdiff_t>(suffix.size()),
                      [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

template <class T>
Tensors<T> read_npy_directory(const std::string& path) {
    namespace fs = std::filesystem;
    Tensors<T> out;
    std::error_code ec;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path file = it->path();
        if (file.extension() != ".npy" || !it->is_regular_file(ec)) continue;
        out.emplace(file.stem().string(), load_tensor<T>(file.string()).array);
    }
    if (ec) fail(path, ec.message());
    if (out.empty()) fail(path, "no NAME.npy files in the directory");
    return out;
}

// An object of name -> tensor, each tensor in any form parse_json_tensor reads (nested arrays, or
// {"shape", "dtype", "data"}).
template <class T>
Tensors<T> parse_json_params(std::string_view bytes, const std::string& path) {
    std::set<std::string> seen;
    auto guard = [&](int depth, json::parse_event_t event, json& parsed) {
        if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
            depth >= max_json_depth) {
            fail(path, "JSON nested deeper than " + std::to_string(max_json_depth) + " levels");
        }
        if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second) {
            fail(path, "tensor '" + parsed.get<std::string>() + "' appears twice");
        }
        return true;
    };
    json root;
    try {
        root = json::parse(bytes.begin(), bytes.end(), guard);
    } catch (const json::exception& e) {
        const std::string what = e.what();
        const std::size_t bracket = what.find("] ");
        fail(path, "invalid JSON: " + (bracket == std::string::npos ? what : what.substr(bracket + 2)));
    }
    if (!root.is_object()) fail(path, "expected a JSON object of name -> nested arrays");
    Tensors<T> out;
    for (const auto& [name, value] : root.items()) {
        out.emplace(name, parse_json_tensor<T>(value.dump(), path + ": tensor '" + name + "'").array);
    }
    return out;
}

}  // namespace

template <class T>
Tensors<T> read_param_tensors(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return read_npy_directory<T>(path);
    const FileBytes file = FileBytes::open(path);
    const std::string_view bytes = file.bytes();
    if (ends_with_ci(path, ".safetensors")) return parse_safetensors<T>(bytes, path, &file);
    if (ends_with_ci(path, ".json")) return parse_json_params<T>(bytes, path);
    const Sniffed format = sniff_format(bytes, bytes.size());
    if (format == Sniffed::safetensors) return parse_safetensors<T>(bytes, path, &file);
    if (format == Sniffed::json && bytes[bytes.find_first_not_of(" \t\r\n")] == '{') return parse_json_params<T>(bytes, path);
    fail(path, "not a .safetensors file, a JSON object of name -> nested arrays, or a directory of NAME.npy files");
}

template std::map<std::string, Array<float>> read_param_tensors<float>(const std::string&);
template std::map<std::string, Array<double>> read_param_tensors<double>(const std::string&);

}  // namespace attntrace
