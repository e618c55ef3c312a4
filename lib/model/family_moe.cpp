// The sparse mixtures of experts: Mixtral, Qwen2-MoE, Qwen3-MoE and OLMoE (transformers
// models/mixtral/modular_mixtral.py MixtralSparseMoeBlock, models/qwen2_moe/modular_qwen2_moe.py
// Qwen2MoeTopKRouter + Qwen2MoeSparseMoeBlock, models/qwen3_moe, models/olmoe/modular_olmoe.py
// OlmoeSparseMoeBlock, and their configuration_*.py). Each is a Llama-like pre-norm block whose MLP
// is, per token: the router's softmax over the X experts (gate (X, E), no bias), the top K
// (num_experts_per_tok), divided by their sum when the config says (Mixtral always; the others
// norm_topk_prob, false by default), the token through each chosen expert (a gated MLP: w1 / w3 /
// w2 in Mixtral, gate_proj / up_proj / down_proj in the others) times its weight, summed.
//   mixtral    attention as Mistral's (sliding_window, null by default), rope_theta 1e6
//   qwen2_moe  attention as Qwen2's (q/k/v biases, qkv_bias); a shared expert
//              (shared_expert_intermediate_size) times sigmoid(shared_expert_gate x) added; dense
//              layers (intermediate_size) at mlp_only_layers and where (n + 1) % decoder_sparse_step
//   qwen3_moe  attention as Qwen3's (per-head q_norm / k_norm); dense layers as qwen2_moe
//   olmoe      q_norm / k_norm over the whole projection (as OLMo 2), every layer sparse
// The experts are read only when a token chose them (forward.cpp, moe.cpp); the checkpoint names
// are the hub's, one tensor per expert. Unsupported, refused with exit 3: Qwen3-MoE's
// use_sliding_window, OLMoE's clip_qkv.
#include "family.hpp"

namespace attntrace {

namespace {

using json = nlohmann::json;

struct Defaults {
    std::size_t vocab, intermediate, kv_heads, experts, top_k, expert_intermediate;
    double rope_theta, eps;
};

Defaults defaults_of(const std::string& type) {
    if (type == "mixtral") return {32000, 14336, 8, 8, 2, 14336, 1000000.0, 1e-5};       // MixtralConfig
    if (type == "qwen2_moe") return {151936, 5632, 16, 60, 4, 1408, 10000.0, 1e-6};      // Qwen2MoeConfig
    if (type == "qwen3_moe") return {151936, 6144, 4, 128, 8, 768, 10000.0, 1e-6};       // Qwen3MoeConfig
    return {50304, 2048, 0, 64, 8, 2048, 10000.0, 1e-5};                                 // OlmoeConfig
}

// Qwen2-MoE's sliding layers (Qwen2MoeConfig: layer_types, by default "sliding_attention" where
// (i + 1) % 2 and i < max_window_layers, with use_sliding_window).
std::optional<std::size_t> qwen2_moe_window(const ConfigReader& r, std::size_t layer) {
    if (!r.flag("use_sliding_window", false) || !r.find("sliding_window")) return std::nullopt;
    const std::size_t window = r.count("sliding_window");
    if (const json* types = r.find("layer_types")) {
        if (!types->is_array() || layer >= types->size())
            config_error(r.source, "'layer_types' has no entry for layer " + std::to_string(layer));
        r.remember("layer_types", *types);
        return (*types)[layer] == "sliding_attention" ? std::optional(window) : std::nullopt;
    }
    const bool sliding = (layer + 1) % 2 != 0 && static_cast<double>(layer) < r.number("max_window_layers", 28);
    return sliding ? std::optional(window) : std::nullopt;
}

// The layers with a MoE MLP: Qwen's mlp_only_layers and decoder_sparse_step; every layer otherwise.
std::vector<bool> sparse_layers(const ConfigReader& r, const ModelConfig& m, std::size_t experts) {
    std::vector<bool> sparse(m.layers.size(), true);
    if (m.model_type != "qwen2_moe" && m.model_type != "qwen3_moe") return sparse;
    const std::size_t step = r.count_or("decoder_sparse_step", 1);
    for (std::size_t n = 0; n < sparse.size(); ++n) sparse[n] = experts > 0 && (n + 1) % step == 0;
    if (const json* only = r.find("mlp_only_layers")) {
        if (!only->is_array()) config_error(r.source, "'mlp_only_layers' must be a list of layer indices");
        r.remember("mlp_only_layers", *only);
        for (const json& n : *only)
            if (n.is_number_integer() && n.get<std::int64_t>() >= 0 && n.get<std::size_t>() < sparse.size())
                sparse[n.get<std::size_t>()] = false;
    }
    return sparse;
}

class Moe final : public Family {
public:
    Moe() : Family("layers.") {}

    std::vector<std::string_view> model_types() const override { return {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        const Defaults d = defaults_of(c.model_type);
        read_llama_sizes(r, c);
        c.kv_heads = r.count_or("num_key_value_heads", d.kv_heads ? d.kv_heads : c.heads);
        c.norm = NormKind::rms_norm;
        c.norm_eps = r.number("rms_norm_eps", d.eps);
        c.causal = true;
        c.rotary = read_llama_rotary(r, c.head_dim, d.rope_theta);
        const bool bias = r.flag("attention_bias", false);
        c.qkv_bias = c.o_bias = c.model_type != "mixtral" && bias;
        if (c.model_type == "mixtral" && r.find("sliding_window")) c.window = r.count("sliding_window");
        if (c.model_type == "qwen2_moe") {
            c.window = qwen2_moe_window(r, c.layer);
            c.qkv_bias = r.flag("qkv_bias", true), c.o_bias = false;
        }
        if (c.model_type == "qwen3_moe" && r.flag("use_sliding_window", false))
            config_error(r.source, "use_sliding_window is not supported for qwen3_moe");
        if (c.model_type == "olmoe" && r.find("clip_qkv")) config_error(r.source, "clip_qkv is not supported (olmoe)");
        c.qk_norm = c.model_type == "qwen3_moe" || c.model_type == "olmoe";
        c.qk_norm_whole = c.model_type == "olmoe";
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        return llama_attention_tensors(c, "input_layernorm");
    }

    void read_model(const ConfigReader& r, ModelConfig& m) const override {
        const Defaults d = defaults_of(m.model_type);
        m.vocab = r.count_or("vocab_size", d.vocab);
        m.intermediate = r.count_or("intermediate_size", d.intermediate);
        m.activation = read_activation(r, "hidden_act", "silu");
        m.mlp = Mlp::gated;
        m.mlp_bias = false;
        m.norm = NormKind::rms_norm;
        m.norm_eps = r.number("rms_norm_eps", d.eps);
        m.tied = r.flag("tie_word_embeddings", false);
        MoeConfig& moe = m.moe.emplace();
        const bool mixtral = m.model_type == "mixtral", qwen = m.model_type.starts_with("qwen");
        moe.experts = mixtral ? r.count_or("num_local_experts", r.count_or("num_experts", d.experts))
                              : r.count_or("num_experts", r.count_or("num_local_experts", d.experts));
        moe.top_k = r.count_or("num_experts_per_tok", d.top_k);
        if (moe.top_k > moe.experts)
            config_error(r.source, "num_experts_per_tok " + std::to_string(moe.top_k) + " is more than the " +
                                       std::to_string(moe.experts) + " experts");
        moe.intermediate = qwen ? r.count_or("moe_intermediate_size", d.expert_intermediate) : m.intermediate;
        moe.normalize = mixtral || r.flag("norm_topk_prob", false);
        if (m.model_type == "qwen2_moe") moe.shared_intermediate = r.count_or("shared_expert_intermediate_size", 5632);
        moe.sparse = sparse_layers(r, m, moe.experts);
    }

    std::vector<TensorSpec> embedding_tensors(const ModelConfig& m) const override {
        return {table_spec("embed_tokens.weight", m.vocab, "(V, E)", m.hidden, Canonical::token_embedding)};
    }

    std::vector<TensorSpec> block_tensors(const ModelConfig& m) const override { return block_tensors_of(m, 0); }

    std::vector<TensorSpec> block_tensors_of(const ModelConfig& m, std::size_t layer) const override {
        using enum Canonical;
        const std::size_t e = m.hidden;
        std::vector<TensorSpec> s;
        add_norm(s, "post_attention_layernorm", e, false, mlp_norm_weight);
        if (!m.moe->sparse[layer]) {
            add_gated_mlp(s, {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}, e, m.intermediate, "I");
            return s;
        }
        s.push_back(table_spec(moe_stem(m) + "gate.weight", m.moe->experts, "(X, E)", e, router));
        if (m.moe->shared_intermediate) {
            add_gated_mlp(s, {"mlp.shared_expert.gate_proj", "mlp.shared_expert.up_proj", "mlp.shared_expert.down_proj",
                              shared_gate, shared_up, shared_down},
                          e, m.moe->shared_intermediate, "I_s");
            s.push_back(table_spec("mlp.shared_expert_gate.weight", 1, "(1, E)", e, shared_expert_gate));
        }
        return s;
    }

    std::vector<TensorSpec> expert_tensors(const ModelConfig& m, std::size_t layer, std::size_t expert) const override {
        if (!m.moe->sparse[layer]) return {};
        const std::string stem = moe_stem(m) + "experts." + std::to_string(expert) + ".";
        const bool mixtral = m.model_type == "mixtral";
        std::vector<TensorSpec> s;
        add_gated_mlp(s, {stem + (mixtral ? "w1" : "gate_proj"), stem + (mixtral ? "w3" : "up_proj"),
                          stem + (mixtral ? "w2" : "down_proj"), Canonical::expert_gate, Canonical::expert_up,
                          Canonical::expert_down},
                      m.hidden, m.moe->intermediate, "I_x");
        return s;
    }

    std::vector<TensorSpec> final_tensors(const ModelConfig& m) const override { return final_norm_tensors("norm", m); }

    std::vector<TensorSpec> head_tensors(const ModelConfig& m) const override { return lm_head_tensors("lm_head", m); }

private:
    static std::string moe_stem(const ModelConfig& m) { return m.model_type == "mixtral" ? "block_sparse_moe." : "mlp."; }
};

}  // namespace

const Family& moe_family() {
    static const Moe family;
    return family;
}

}  // namespace attntrace
