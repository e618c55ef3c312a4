// BLOOM (transformers models/bloom/modeling_bloom.py, BloomAttention): LayerNorm
// input_layernorm, q/k/v fused per head in self_attention.query_key_value as NeoX's, no rotary but
// ALiBi slopes added to the scores (build_alibi_tensor), causal. Its config spells its sizes either
// way (n_embed / hidden_size, n_head / num_attention_heads, n_layer / num_hidden_layers).
// The model (BloomModel, BloomForCausalLM): word_embeddings then word_embeddings_layernorm; blocks
// with BloomMLP (dense_h_to_4h (4E, E), bloom_gelu, dense_4h_to_h) after post_attention_layernorm,
// pre-norm, or with both residuals taken from the normed input when
// apply_residual_connection_post_layernorm; ln_f; lm_head tied to the word embeddings by default.
#include "family.hpp"

namespace attntrace {

namespace {

class Bloom final : public Family {
public:
    Bloom() : Family("h.", " (fused query_key_value, per head)") {}

    std::vector<std::string_view> model_types() const override { return {"bloom"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        c.hidden = r.any_count({"hidden_size", "n_embed"});
        c.heads = c.kv_heads = r.any_count({"n_head", "num_attention_heads"});
        c.layers = r.any_count({"n_layer", "num_hidden_layers"});
        check_head_dim(r, c);
        c.norm = NormKind::layer_norm;
        c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
        c.causal = true;
        c.alibi = true;
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        return fused_per_head_tensors(c, "self_attention.");
    }

    void read_model(const ConfigReader& r, ModelConfig& m) const override {
        m.vocab = r.count_or("vocab_size", 250880);
        m.intermediate = 4 * m.hidden;  // BloomMLP: 4 * hidden_size, whatever n_inner says
        m.activation = Activation::bloom_gelu;
        m.norm_eps = r.number("layer_norm_epsilon", 1e-5);
        m.residual = r.flag("apply_residual_connection_post_layernorm", false) ? Residual::post_layernorm
                                                                                : Residual::pre_norm;
        m.embedding = Embedding::tokens_norm;
        m.tied = r.flag("tie_word_embeddings", true);
    }

    std::vector<TensorSpec> embedding_tensors(const ModelConfig& m) const override {
        std::vector<TensorSpec> s{table_spec("word_embeddings.weight", m.vocab, "(V, E)", m.hidden, Canonical::token_embedding)};
        add_norm(s, "word_embeddings_layernorm", m.hidden, true, Canonical::embed_norm_weight, Canonical::embed_norm_bias);
        return s;
    }

    std::vector<TensorSpec> block_tensors(const ModelConfig& m) const override { return dense_4h_mlp_tensors(m); }

    std::vector<TensorSpec> final_tensors(const ModelConfig& m) const override { return final_norm_tensors("ln_f", m); }

    std::vector<TensorSpec> head_tensors(const ModelConfig& m) const override { return lm_head_tensors("lm_head", m); }
};

}  // namespace

const Family& bloom_family() {
    static const Bloom family;
    return family;
}

}  // namespace attntrace
