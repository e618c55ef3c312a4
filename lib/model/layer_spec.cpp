// --layers SPEC (layer_spec.hpp).
#include "attntrace/model/layer_spec.hpp"

#include <charconv>
#include <string>

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace {

[[noreturn]] void bad(std::string_view spec, const std::string& why) {
    throw UsageError("layers: '" + std::string(spec) + "' " + why + " (e.g. 0-3,7)");
}

// A layer index: all of TEXT, decimal.
std::size_t layer_number(std::string_view text, std::string_view spec) {
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        bad(spec, "is not a list of layers and ranges: '" + std::string(text) + "'");
    return n;
}

}  // namespace

std::vector<bool> parse_layer_spec(std::string_view spec, std::size_t layers) {
    std::vector<bool> kept(layers, spec.empty() || spec == "all");
    if (spec.empty() || spec == "all") return kept;
    std::size_t at = 0;
    while (at <= spec.size()) {
        const std::size_t comma = std::min(spec.find(',', at), spec.size());
        const std::string_view item = spec.substr(at, comma - at);
        const std::size_t dash = item.find('-');
        const std::size_t first = layer_number(item.substr(0, dash), spec);
        const std::size_t last = dash == std::string_view::npos ? first : layer_number(item.substr(dash + 1), spec);
        if (last < first) bad(spec, "has the range " + std::string(item) + " backwards");
        if (last >= layers)
            throw UsageError("layers: layer " + std::to_string(last) + " does not exist (the model has " +
                             std::to_string(layers) + " layers, 0 to " + std::to_string(layers - 1) + ")");
        for (std::size_t n = first; n <= last; ++n) kept[n] = true;
        at = comma + 1;
    }
    return kept;
}

std::vector<std::size_t> kept_layers(const std::vector<bool>& kept) {
    std::vector<std::size_t> out;
    for (std::size_t n = 0; n < kept.size(); ++n)
        if (kept[n]) out.push_back(n);
    return out;
}

}  // namespace attntrace
