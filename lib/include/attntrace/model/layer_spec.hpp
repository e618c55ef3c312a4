#pragma once
// Which layers a run keeps: "0-3,7" -> layers 0, 1, 2, 3 and 7 of N.
#include <cstddef>
#include <string_view>
#include <vector>

namespace attntrace {

// SPEC: comma-separated items, each a layer "K" or a range "A-B" (A <= B), 0-based; "" or "all":
// every layer. Returns (N) flags. UsageError "layers: ..." for a malformed item, a reversed range
// or a layer past N - 1 (the app names its flag).
std::vector<bool> parse_layer_spec(std::string_view spec, std::size_t layers);

// The indices of the layers KEPT flags: {0, 1, 2, 3, 7}.
std::vector<std::size_t> kept_layers(const std::vector<bool>& kept);

}  // namespace attntrace
