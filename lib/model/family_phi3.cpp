// Phi-3 (transformers models/phi3/modular_phi3.py and configuration_phi3.py): Mistral's block
// (RMSNorm input_layernorm and post_attention_layernorm, pre-norm, final norm, lm_head) with
//   - q, k and v fused in self_attn.qkv_proj (H*P + 2 G*P, E), split as Phi3Attention.forward
//     slices it: [q (H*P); k (G*P); v (G*P)];
//   - the MLP's gate and up fused in mlp.gate_up_proj (2I, E): Phi3MLP.forward chunks it in two,
//     gate first, and returns down_proj(up * act(gate));
//   - rotate-half rotary on int(P * partial_rotary_factor) dims (PhiRotaryEmbedding), with
//     rope_scaling of type longrope (or its old names su / yarn): inv_freq / short_factor, or
//     long_factor once the sequence is past original_max_position_embeddings (4096 by default),
//     cos and sin times the attention factor sqrt(1 + ln(max / original) / ln(original))
//     (modeling_rope_utils.py _compute_longrope_parameters, dynamic_rope_update);
//   - sliding_window (null by default) on every layer; no biases.
#include "family.hpp"

namespace attntrace {

namespace {

class Phi3 final : public Family {
public:
    Phi3() : Family("layers.", " (fused qkv_proj [q; k; v])") {}

    std::vector<std::string_view> model_types() const override { return {"phi3"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        read_llama_sizes(r, c);
        c.norm = NormKind::rms_norm;
        c.norm_eps = r.number("rms_norm_eps", 1e-5);
        c.causal = true;
        c.qkv_bias = c.o_bias = false;
        if (r.find("sliding_window")) c.window = r.count("sliding_window");
        double partial = r.number("partial_rotary_factor", 1.0);
        if (const nlohmann::json* params = r.find("rope_parameters")) partial = params->value("partial_rotary_factor", partial);
        nlohmann::json renamed;  // configuration_phi3.py: rope type "yarn" is Phi-3's longrope
        const nlohmann::json* scaling = r.find("rope_scaling");
        if (scaling && scaling->is_object() && scaling->value("type", scaling->value("rope_type", "")) == "yarn") {
            renamed = r.config;
            renamed["rope_scaling"]["type"] = renamed["rope_scaling"]["rope_type"] = "longrope";
            c.rotary = read_llama_rotary(ConfigReader{renamed, r.source, r.values}, c.head_dim, 10000.0, partial);
            return;
        }
        c.rotary = read_llama_rotary(r, c.head_dim, 10000.0, partial);
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        using enum Canonical;
        const std::size_t e = c.hidden, q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
        std::vector<TensorSpec> s;
        add_norm(s, "input_layernorm", e, false);
        TensorSpec qkv{"self_attn.qkv_proj.weight", {q + 2 * kv, e}, "(H*P + 2 G*P, E)", {w_q, w_k, w_v},
                       Stored::linear, Fused::stacked};
        qkv.split = {q, kv, kv};
        s.push_back(std::move(qkv));
        add_linear(s, {"self_attn.o_proj", {e, q}, "(E, H*P)", {w_o}, {b_o}, false});
        return s;
    }

    void read_model(const ConfigReader& r, ModelConfig& m) const override {
        m.vocab = r.count_or("vocab_size", 32064);
        m.intermediate = r.count_or("intermediate_size", 8192);
        m.activation = read_activation(r, "hidden_act", "silu");
        m.mlp = Mlp::gated;
        m.mlp_bias = false;
        m.norm = NormKind::rms_norm;
        m.norm_eps = r.number("rms_norm_eps", 1e-5);
        m.tied = r.flag("tie_word_embeddings", false);
    }

    std::vector<TensorSpec> embedding_tensors(const ModelConfig& m) const override {
        return {table_spec("embed_tokens.weight", m.vocab, "(V, E)", m.hidden, Canonical::token_embedding)};
    }

    std::vector<TensorSpec> block_tensors(const ModelConfig& m) const override {
        using enum Canonical;
        const std::size_t e = m.hidden, i = m.intermediate;
        std::vector<TensorSpec> s;
        add_norm(s, "post_attention_layernorm", e, false, mlp_norm_weight);
        TensorSpec gate_up{"mlp.gate_up_proj.weight", {2 * i, e}, "(2I, E)", {fc_gate, fc_in}, Stored::linear,
                           Fused::stacked};
        s.push_back(std::move(gate_up));
        add_linear(s, {"mlp.down_proj", {e, i}, "(E, I)", {fc_out}, {}, false});
        return s;
    }

    std::vector<TensorSpec> final_tensors(const ModelConfig& m) const override { return final_norm_tensors("norm", m); }

    std::vector<TensorSpec> head_tensors(const ModelConfig& m) const override { return lm_head_tensors("lm_head", m); }
};

}  // namespace

const Family& phi3_family() {
    static const Phi3 family;
    return family;
}

}  // namespace attntrace
