// OLMo 2 (transformers models/olmo2/modular_olmo2.py, configuration via Olmo2Config): Llama's
// projections and SwiGLU MLP with
//   - no norm before the attention or the MLP (Olmo2DecoderLayer deletes input_layernorm): the
//     attention's output goes through post_attention_layernorm and the MLP's through
//     post_feedforward_layernorm before each residual add (the sandwich block without pre-norms);
//   - q_norm / k_norm: Llama's RMSNorm over each row's whole projection, (H*P) and (G*P), right
//     after q_proj / k_proj and before the split into heads and the rotary (Olmo2Attention.forward);
//   - attention_bias (false), rms_norm_eps 1e-5, untied by default.
#include "family.hpp"

namespace attntrace {

namespace {

class Olmo2 final : public Family {
public:
    Olmo2() : Family("layers.") {}

    std::vector<std::string_view> model_types() const override { return {"olmo2"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        read_llama_sizes(r, c);
        c.norm = NormKind::none;
        c.norm_eps = r.number("rms_norm_eps", 1e-5);
        c.causal = true;
        c.qkv_bias = c.o_bias = r.flag("attention_bias", false);
        c.qk_norm = c.qk_norm_whole = true;
        c.rotary = read_llama_rotary(r, c.head_dim, 10000.0);
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        return llama_attention_tensors(c, "");
    }

    void read_model(const ConfigReader& r, ModelConfig& m) const override {
        m.vocab = r.count_or("vocab_size", 50304);
        m.intermediate = r.count_or("intermediate_size", 11008);
        m.activation = read_activation(r, "hidden_act", "silu");
        m.mlp = Mlp::gated;
        m.mlp_bias = false;
        m.norm = NormKind::rms_norm;
        m.norm_eps = r.number("rms_norm_eps", 1e-5);
        m.residual = Residual::sandwich;
        m.tied = r.flag("tie_word_embeddings", false);
    }

    std::vector<TensorSpec> embedding_tensors(const ModelConfig& m) const override {
        return {table_spec("embed_tokens.weight", m.vocab, "(V, E)", m.hidden, Canonical::token_embedding)};
    }

    std::vector<TensorSpec> block_tensors(const ModelConfig& m) const override {
        using enum Canonical;
        std::vector<TensorSpec> s;
        add_rms_norm(s, "post_attention_layernorm", m.hidden, "(E)", post_attention_norm_weight, 0);
        add_rms_norm(s, "post_feedforward_layernorm", m.hidden, "(E)", post_mlp_norm_weight, 0);
        add_gated_mlp(s, {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}, m.hidden, m.intermediate, "I");
        return s;
    }

    std::vector<TensorSpec> final_tensors(const ModelConfig& m) const override { return final_norm_tensors("norm", m); }

    std::vector<TensorSpec> head_tensors(const ModelConfig& m) const override { return lm_head_tensors("lm_head", m); }
};

}  // namespace

const Family& olmo2_family() {
    static const Olmo2 family;
    return family;
}

}  // namespace attntrace
