// What the family descriptions share (family.hpp).
#include "family.hpp"

namespace attntrace {

void check_head_dim(const ConfigReader& r, LayerConfig& c) {
    if (c.hidden % c.heads != 0)
        config_error(r.source, "hidden size " + std::to_string(c.hidden) + " is not divisible by " +
                                   std::to_string(c.heads) + " heads");
    c.head_dim = c.hidden / c.heads;
}

void read_mha_sizes(const ConfigReader& r, LayerConfig& c, const char* hidden, const char* heads, const char* layers) {
    c.hidden = r.count(hidden);
    c.heads = c.kv_heads = r.count(heads);
    c.layers = r.count(layers);
    check_head_dim(r, c);
}

namespace {

// "(E, 3E)" -> "(3E)": the out dim of a weight's formula ((out, in), or (in, out) for conv1d).
std::string bias_formula(const std::string& weight, Stored stored) {
    const auto comma = weight.find(", ");
    const std::string out = stored == Stored::conv1d ? weight.substr(comma + 2, weight.size() - comma - 3)
                                                     : weight.substr(1, comma - 1);
    return "(" + out + ")";
}

}  // namespace

void add_linear(std::vector<TensorSpec>& specs, const LinearSpec& l) {
    specs.push_back({l.name + ".weight", l.shape, l.formula, l.weight, l.stored, l.fused});
    if (!l.has_bias) return;
    const std::size_t out = l.stored == Stored::conv1d ? l.shape[1] : l.shape[0];
    specs.push_back({l.name + ".bias", {out}, bias_formula(l.formula, l.stored), l.bias, l.stored, l.fused});
}

void add_norm(std::vector<TensorSpec>& specs, const std::string& name, std::size_t e, bool with_bias) {
    specs.push_back({name + ".weight", {e}, "(E)", {Canonical::norm_weight}});
    if (with_bias) specs.push_back({name + ".bias", {e}, "(E)", {Canonical::norm_bias}});
}

std::vector<TensorSpec> fused_per_head_tensors(const LayerConfig& c, const std::string& attention) {
    using enum Canonical;
    const std::size_t e = c.hidden;
    std::vector<TensorSpec> s;
    add_norm(s, "input_layernorm", e, true);
    add_linear(s, {attention + "query_key_value", {3 * e, e}, "(3E, E)", {w_q, w_k, w_v}, {b_q, b_k, b_v}, c.qkv_bias,
                   Stored::linear, Fused::per_head});
    add_linear(s, {attention + "dense", {e, e}, "(E, E)", {w_o}, {b_o}, c.o_bias});
    return s;
}

}  // namespace attntrace
