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

void add_norm(std::vector<TensorSpec>& specs, const std::string& name, std::size_t e, bool with_bias,
              Canonical weight, Canonical bias) {
    specs.push_back({name + ".weight", {e}, "(E)", {weight}});
    if (with_bias) specs.push_back({name + ".bias", {e}, "(E)", {bias}});
}

void add_mlp(std::vector<TensorSpec>& specs, const std::string& name_in, const std::string& name_out,
             const ModelConfig& m, bool bias, Stored stored) {
    using enum Canonical;
    const std::size_t e = m.hidden, i = m.intermediate;
    const bool conv = stored == Stored::conv1d;
    add_linear(specs, {name_in, conv ? Shape{e, i} : Shape{i, e}, conv ? "(E, I)" : "(I, E)", {fc_in}, {fc_in_bias},
                       bias, stored});
    add_linear(specs, {name_out, conv ? Shape{i, e} : Shape{e, i}, conv ? "(I, E)" : "(E, I)", {fc_out},
                       {fc_out_bias}, bias, stored});
}

std::vector<TensorSpec> dense_4h_mlp_tensors(const ModelConfig& m) {
    std::vector<TensorSpec> s;
    add_norm(s, "post_attention_layernorm", m.hidden, true, Canonical::mlp_norm_weight, Canonical::mlp_norm_bias);
    add_mlp(s, "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", m, true);
    return s;
}

std::vector<TensorSpec> final_norm_tensors(const std::string& name, const ModelConfig& m) {
    std::vector<TensorSpec> s;
    add_norm(s, name, m.hidden, m.norm == NormKind::layer_norm, Canonical::final_norm_weight, Canonical::final_norm_bias);
    return s;
}

std::vector<TensorSpec> lm_head_tensors(const std::string& name, const ModelConfig& m) {
    if (m.tied) return {};
    return {table_spec(name + ".weight", m.vocab, "(V, E)", m.hidden, Canonical::head_decoder)};
}

TensorSpec table_spec(const std::string& name, std::size_t rows, const std::string& formula, std::size_t e,
                      Canonical what) {
    return {name, {rows, e}, formula, {what}};
}

Activation read_activation(const ConfigReader& r, const char* key, const char* fallback) {
    const std::string name = r.text(key, fallback);
    const auto act = activation_from_name(name);
    if (!act) config_error(r.source, key + std::string(" '") + name + "' is not supported (" + activation_names() + ")");
    return *act;
}

void read_special_ids(const ConfigReader& r, ModelConfig& m) {
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "sep_token_id",
                            "cls_token_id", "mask_token_id"}) {
        const nlohmann::json* v = r.find(key);
        if (!v || !v->is_number_integer() || v->get<std::int64_t>() < 0) continue;  // eos may be a list: skipped
        const auto id = static_cast<std::uint32_t>(*r.index(key));
        m.special_ids.push_back(id);
        if (std::string_view(key) == "bos_token_id") m.bos_token_id = id;
        if (std::string_view(key) == "mask_token_id") m.mask_token_id = id;
    }
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
