// What the family descriptions share (family.hpp).
#include "family.hpp"

#include <cmath>

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

namespace attntrace {

void add_rms_norm(std::vector<TensorSpec>& specs, const std::string& name, std::size_t n, const std::string& formula,
                  Canonical what, double offset) {
    TensorSpec spec{name + ".weight", {n}, formula, {what}};
    spec.offset = offset;
    specs.push_back(std::move(spec));
}

void add_gated_mlp(std::vector<TensorSpec>& specs, const GatedNames& n, std::size_t e, std::size_t inter,
                   const std::string& i_name) {
    add_linear(specs, {n.gate, {inter, e}, "(" + i_name + ", E)", {n.gate_role}, {}, false});
    add_linear(specs, {n.up, {inter, e}, "(" + i_name + ", E)", {n.up_role}, {}, false});
    add_linear(specs, {n.down, {e, inter}, "(E, " + i_name + ")", {n.down_role}, {}, false});
}

std::vector<TensorSpec> llama_attention_tensors(const LayerConfig& c, const std::string& norm) {
    using enum Canonical;
    const std::size_t e = c.hidden, q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
    std::vector<TensorSpec> s;
    if (!norm.empty()) add_rms_norm(s, norm, e, "(E)", norm_weight, c.norm_offset);
    add_linear(s, {"self_attn.q_proj", {q, e}, "(H*P, E)", {w_q}, {b_q}, c.qkv_bias});
    add_linear(s, {"self_attn.k_proj", {kv, e}, "(G*P, E)", {w_k}, {b_k}, c.qkv_bias});
    add_linear(s, {"self_attn.v_proj", {kv, e}, "(G*P, E)", {w_v}, {b_v}, c.qkv_bias});
    add_linear(s, {"self_attn.o_proj", {e, q}, "(E, H*P)", {w_o}, {b_o}, c.o_bias});
    if (c.qk_norm && c.qk_norm_whole) {
        add_rms_norm(s, "self_attn.q_norm", q, "(H*P)", q_norm, c.norm_offset);
        add_rms_norm(s, "self_attn.k_norm", kv, "(G*P)", k_norm, c.norm_offset);
    } else if (c.qk_norm) {
        add_rms_norm(s, "self_attn.q_norm", c.head_dim, "(P)", q_norm, c.norm_offset);
        add_rms_norm(s, "self_attn.k_norm", c.head_dim, "(P)", k_norm, c.norm_offset);
    }
    return s;
}

Rotary read_llama_rotary(const ConfigReader& r, std::size_t head_dim, double default_theta, double partial) {
    auto [theta, scaling] = read_rope(r, default_theta);
    const auto dims = static_cast<std::size_t>(static_cast<double>(head_dim) * partial) / 2 * 2;
    if (dims == 0) config_error(r.source, "the rotary covers no dims of the head (partial_rotary_factor)");
    Rotary rotary{RotaryStyle::half, dims, rope_inv_freq(dims, theta, scaling)};
    if (scaling.type != "longrope") return rotary;
    for (const auto* list : {&scaling.short_factor, &scaling.long_factor})
        if (list->size() != dims / 2)
            config_error(r.source, "longrope factors: " + std::to_string(list->size()) + " values, but the rotary has " +
                                       std::to_string(dims / 2) + " frequencies");
    // modeling_rope_utils.py _compute_longrope_parameters: with original_max_position_embeddings in
    // the config (Phi3Config always has it, 4096 by default) the factor is max / original.
    const bool phi3 = r.config.value("model_type", "") == "phi3";
    const double original = r.number("original_max_position_embeddings", phi3 ? 4096 : scaling.original_max_position);
    double factor = scaling.factor;
    if (phi3 || r.find("original_max_position_embeddings"))
        factor = r.number("max_position_embeddings", phi3 ? 4096 : original) / original;
    rotary.attention_scaling = scaling.attention_factor.value_or(
        factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(original)));
    rotary.long_inv_freq = rope_inv_freq(dims, theta, scaling, true);
    rotary.long_after = static_cast<std::size_t>(original);
    return rotary;
}

void read_llama_sizes(const ConfigReader& r, LayerConfig& c, std::size_t default_head_dim) {
    c.hidden = r.count("hidden_size");
    c.heads = r.count("num_attention_heads");
    c.layers = r.count("num_hidden_layers");
    c.kv_heads = r.count_of({"num_key_value_heads"}).value_or(c.heads);
    c.head_dim = r.count_of({"head_dim"}).value_or(default_head_dim ? default_head_dim : c.hidden / c.heads);
}

}  // namespace attntrace
