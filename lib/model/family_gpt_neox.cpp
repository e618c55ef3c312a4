// GPT-NeoX / Pythia (transformers models/gpt_neox/modeling_gpt_neox.py, GPTNeoXAttention):
// LayerNorm input_layernorm, q/k/v fused in query_key_value (3E, E) laid out per head
// [q_h; k_h; v_h], partial rotate-half rotary on int(P * rotary_pct) dims (rotary_emb_base, or
// rope_parameters' partial_rotary_factor), causal, biases switched by attention_bias.
// The model (GPTNeoXModel, GPTNeoXForCausalLM): embed_in; blocks with GPTNeoXMLP (dense_h_to_4h,
// hidden_act, dense_4h_to_h) after post_attention_layernorm, summed in parallel with the attention
// (x + attn(ln1 x) + mlp(ln2 x)) when use_parallel_residual (the default), else pre-norm;
// final_layer_norm; embed_out (tie_word_embeddings false by default).
#include "family.hpp"

namespace attntrace {

namespace {

class GptNeox final : public Family {
public:
    GptNeox() : Family("layers.", " (fused query_key_value, per head)") {}

    std::vector<std::string_view> model_types() const override { return {"gpt_neox"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        read_mha_sizes(r, c, "hidden_size", "num_attention_heads", "num_hidden_layers");
        c.norm = NormKind::layer_norm;
        c.norm_eps = r.number("layer_norm_eps", 1e-5);
        c.causal = true;
        c.qkv_bias = c.o_bias = r.flag("attention_bias", true);
        auto [theta, scaling] = read_rope(r, r.number("rotary_emb_base", 10000.0));
        double pct = r.number("partial_rotary_factor", r.number("rotary_pct", 0.25));
        if (const nlohmann::json* params = r.find("rope_parameters")) pct = params->value("partial_rotary_factor", pct);
        const auto dims = static_cast<std::size_t>(static_cast<double>(c.head_dim) * pct);  // int(P * pct)
        c.rotary = Rotary{RotaryStyle::half, dims, rope_inv_freq(dims, theta, scaling)};
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        return fused_per_head_tensors(c, "attention.");
    }

    void read_model(const ConfigReader& r, ModelConfig& m) const override {
        m.vocab = r.count_or("vocab_size", 50432);
        m.intermediate = r.count_or("intermediate_size", 24576);
        m.activation = read_activation(r, "hidden_act", "gelu");
        m.norm_eps = r.number("layer_norm_eps", 1e-5);
        m.residual = r.flag("use_parallel_residual", true) ? Residual::parallel : Residual::pre_norm;
        m.tied = r.flag("tie_word_embeddings", false);
    }

    std::vector<TensorSpec> embedding_tensors(const ModelConfig& m) const override {
        return {table_spec("embed_in.weight", m.vocab, "(V, E)", m.hidden, Canonical::token_embedding)};
    }

    std::vector<TensorSpec> block_tensors(const ModelConfig& m) const override { return dense_4h_mlp_tensors(m); }

    std::vector<TensorSpec> final_tensors(const ModelConfig& m) const override { return final_norm_tensors("final_layer_norm", m); }

    std::vector<TensorSpec> head_tensors(const ModelConfig& m) const override { return lm_head_tensors("embed_out", m); }
};

}  // namespace

const Family& gpt_neox_family() {
    static const GptNeox family;
    return family;
}

}  // namespace attntrace
