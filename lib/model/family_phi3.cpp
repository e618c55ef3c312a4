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
#include <algorithm>

#include "attntrace/io/gguf.hpp"
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

    const GgufTable* gguf() const override { return &gguf_table; }

private:
    // llama.cpp's names (src/llama-arch.cpp LLM_ARCH_PHI3, src/models/phi3.cpp): qkv_proj is
    // attn_qkv, gate_up_proj ffn_up (gate first, as Phi3MLP chunks it); LongRoPE's factors are
    // the rope_factors_long / rope_factors_short tensors (conversion/phi.py
    // generate_extra_tensors). See phi3_derive.
    static void phi3_derive(const GgufFiles& file, std::string_view arch, nlohmann::json& config);
    inline static const GgufTable gguf_table{
        .architectures = {{"phi3", "phi3"}},
        .keys = {{"block_count", "num_hidden_layers"}, {"context_length", "max_position_embeddings"},
                 {"embedding_length", "hidden_size"}, {"feed_forward_length", "intermediate_size"},
                 {"attention.head_count", "num_attention_heads"}, {"attention.head_count_kv", "num_key_value_heads"},
                 {"attention.layer_norm_rms_epsilon", "rms_norm_eps"}, {"rope.freq_base", "rope_theta"},
                 {"rope.scaling.original_context_length", "original_max_position_embeddings"}},
        .tensors = {{"input_layernorm.weight", "attn_norm.weight"}, {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
                    {"self_attn.o_proj.weight", "attn_output.weight"},
                    {"post_attention_layernorm.weight", "ffn_norm.weight"}, {"mlp.gate_up_proj.weight", "ffn_up.weight"},
                    {"mlp.down_proj.weight", "ffn_down.weight"}, {"embed_tokens.weight", "token_embd.weight"},
                    {"norm.weight", "output_norm.weight"}, {"lm_head.weight", "output.weight"}},
        .flags = {{"output.weight", "tie_word_embeddings", true}},
        .token_embedding = "token_embd.weight",
        .derive = phi3_derive,
    };
};

// What llama.cpp does that no key says (src/models/phi3.cpp, llama-model.cpp get_rope_factors):
// no sliding window (it disables Phi-3's), the rotary on rope.dimension_count dims of each head,
// and with rope_factors_long / _short the LongRoPE of the checkpoint (its attention factor from
// the context lengths, as conversion/phi.py computed rope.scaling.attn_factor). llama.cpp picks
// the long factors when its context (n_ctx) is past the original length; attntrace, as
// transformers, when the sequence is.
void Phi3::phi3_derive(const GgufFiles& file, std::string_view arch, nlohmann::json& config) {
    config["sliding_window"] = nullptr;
    const double p = config.value("hidden_size", 0.0) / std::max(1.0, config.value("num_attention_heads", 1.0));
    if (const auto dims = file.count(std::string(arch) + ".rope.dimension_count"); dims && p > 0)
        config["partial_rotary_factor"] = static_cast<double>(*dims) / p;
    const GgufTensor* long_factors = file.tensor("rope_factors_long.weight");
    const GgufTensor* short_factors = file.tensor("rope_factors_short.weight");
    if (!long_factors || !short_factors) return;
    auto values = [&](const GgufTensor& t) {
        std::vector<double> out(t.shape.empty() ? 1 : t.shape[0]);
        file.read_rows(t, 0, out.size(), out.data());
        return out;
    };
    config["rope_scaling"] = {{"type", "longrope"}, {"long_factor", values(*long_factors)},
                              {"short_factor", values(*short_factors)}};
    if (config.contains("original_max_position_embeddings"))
        config["rope_scaling"]["original_max_position_embeddings"] = config["original_max_position_embeddings"];
}

}  // namespace

const Family& phi3_family() {
    static const Phi3 family;
    return family;
}

}  // namespace attntrace
