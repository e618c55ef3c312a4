#include "attntrace/pictures/labels.hpp"

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/file_bytes.hpp"

namespace attntrace {

std::vector<std::string> parse_labels(std::string_view bytes, const std::string& name) {
    const auto first = bytes.find_first_not_of(" \t\r\n");
    std::vector<std::string> out;
    if (first != std::string_view::npos && bytes[first] == '[') {
        const auto doc = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
        if (doc.is_discarded() || !doc.is_array())
            throw InputError(name + ": starts with '[' but is not a JSON array of strings");
        for (const auto& item : doc) {
            if (!item.is_string())
                throw InputError(name + ": label " + std::to_string(out.size()) + " is " + item.dump() +
                                 ", expected a string");
            out.push_back(item.get<std::string>());
        }
        return out;
    }
    std::size_t at = 0;
    while (at < bytes.size()) {  // one token per line; a last line without '\n' counts too
        std::size_t end = bytes.find('\n', at);
        if (end == std::string_view::npos) end = bytes.size();
        std::string_view line = bytes.substr(at, end - at);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        out.emplace_back(line);
        at = end + 1;
    }
    return out;
}

std::vector<std::string> load_labels(const std::string& path) {
    const FileBytes bytes = FileBytes::open(path);
    return parse_labels(bytes.bytes(), path);
}

}  // namespace attntrace
