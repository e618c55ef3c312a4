// Gemma 1, 2 and 3 (text) (transformers models/gemma/modular_gemma.py, models/gemma2/
// modeling_gemma2.py, models/gemma3/modular_gemma3.py and their configuration_*.py): Llama's
// attention and gated MLP with
//   - Gemma's RMSNorm x * (1 + w) everywhere (GemmaRMSNorm.forward: (1.0 + weight.float())), read
//     here as weight + 1;
//   - the token rows times sqrt(E) in the model's dtype (GemmaTextScaledWordEmbedding, Gemma2Model
//     forward's normalizer: sqrt(3072) = 55.4256 becomes 55.5 in bf16);
//   - hidden_activation (gelu_pytorch_tanh by default) in a GeGLU MLP; tied head by default.
// gemma2 adds: scores * query_pre_attn_scalar^-0.5, tanh soft-capping of the scores
// (attn_logit_softcapping, 50 by default) before the mask, norms before and after both the
// attention and the MLP (input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
// post_feedforward_layernorm: the sandwich block), layer_types (default: even layers sliding,
// window sliding_window), final_logit_softcapping (30 by default) on the logits.
// gemma3_text adds to gemma2: per-head q_norm / k_norm (Gemma's RMSNorm), layer_types or
// sliding_window_pattern (6: every 6th layer global), local layers' rotary from
// rope_local_base_freq with no scaling, global ones' from rope_theta (1e6) + rope_scaling; no
// attention soft-capping whatever the config says (Gemma3Attention passes none), final soft-capping
// only where configured. use_bidirectional_attention (Gemma 3 embedding models) is refused.
#include "attntrace/io/gguf.hpp"
#include "family.hpp"

#include "attntrace/tensor/errors.hpp"

namespace attntrace {

namespace {

using json = nlohmann::json;

struct Defaults {
    std::size_t vocab, intermediate, kv_heads;
    double rope_theta;
};

Defaults defaults_of(const std::string& type) {
    if (type == "gemma") return {256000, 24576, 16, 10000.0};   // GemmaConfig
    if (type == "gemma2") return {256000, 9216, 4, 10000.0};    // Gemma2Config
    return {262208, 9216, 4, 1000000.0};                        // Gemma3TextConfig
}

// Whether layer N is a sliding-window one: layer_types when given, else gemma2's alternation
// (Gemma2Config: "sliding_attention" if (i + 1) % 2) or gemma3's pattern (Gemma3TextConfig:
// (i + 1) % sliding_window_pattern, 6 by default).
bool sliding(const ConfigReader& r, const LayerConfig& c) {
    if (const json* types = r.find("layer_types")) {
        if (!types->is_array() || c.layer >= types->size())
            config_error(r.source, "'layer_types' has no entry for layer " + std::to_string(c.layer));
        r.remember("layer_types", *types);
        return (*types)[c.layer] == "sliding_attention";
    }
    const std::size_t pattern = c.model_type == "gemma2" ? 2 : r.count_or("sliding_window_pattern", 6);
    return (c.layer + 1) % pattern != 0;
}

// Gemma 3's rotary for a local (sliding) or global layer; transformers 5's rope_parameters keyed by
// layer type ({"sliding_attention": {...}, "full_attention": {...}}) read per type.
Rotary gemma3_rotary(const ConfigReader& r, std::size_t p, bool local) {
    const json* params = r.find("rope_parameters");
    if (params && params->is_object() && (params->contains("full_attention") || params->contains("sliding_attention"))) {
        r.remember("rope_parameters", *params);
        const json sub{{"rope_parameters", params->value(local ? "sliding_attention" : "full_attention", json::object())},
                       {"max_position_embeddings", r.config.value("max_position_embeddings", 131072)}};
        json values;
        return read_llama_rotary(ConfigReader{sub, r.source, values}, p, local ? 10000.0 : 1000000.0);
    }
    if (!local) return read_llama_rotary(r, p, defaults_of("gemma3_text").rope_theta);
    const std::size_t dims = p / 2 * 2;
    return Rotary{RotaryStyle::half, dims, rope_inv_freq(dims, r.number("rope_local_base_freq", 10000.0), RopeScaling{})};
}

// A soft cap under KEY (FALLBACK when absent, none when null).
std::optional<double> softcap(const ConfigReader& r, const char* key, std::optional<double> fallback) {
    if (!r.config.contains(key)) return fallback;
    if (!r.find(key)) return std::nullopt;
    const double c = r.number(key, 0);
    if (!(c > 0)) config_error(r.source, std::string("'") + key + "' must be a positive number");
    return c;
}

class Gemma final : public Family {
public:
    Gemma() : Family("layers.") {}

    std::vector<std::string_view> model_types() const override { return {"gemma", "gemma2", "gemma3_text"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        const Defaults d = defaults_of(c.model_type);
        read_llama_sizes(r, c, r.count_or("head_dim", 256));
        c.kv_heads = r.count_or("num_key_value_heads", d.kv_heads);
        c.norm = NormKind::rms_norm;
        c.norm_eps = r.number("rms_norm_eps", 1e-6);
        c.norm_offset = 1;
        c.causal = true;
        if (r.flag("use_bidirectional_attention", false))
            config_error(r.source, "use_bidirectional_attention is not supported (a Gemma embedding model)");
        c.qkv_bias = c.o_bias = r.flag("attention_bias", false);
        if (c.model_type == "gemma") {
            c.rotary = read_llama_rotary(r, c.head_dim, d.rope_theta);
            return;
        }
        c.scale = 1.0 / std::sqrt(r.number("query_pre_attn_scalar", 256));
        const bool local = sliding(r, c);
        if (local && r.find("sliding_window")) c.window = r.count("sliding_window");
        if (local && !r.config.contains("sliding_window")) c.window = 4096;
        if (c.model_type == "gemma2") {
            c.softcap = softcap(r, "attn_logit_softcapping", 50.0);
            c.rotary = read_llama_rotary(r, c.head_dim, d.rope_theta);
            return;
        }
        c.qk_norm = true;
        c.rotary = gemma3_rotary(r, c.head_dim, local);
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        return llama_attention_tensors(c, "input_layernorm");
    }

    void read_model(const ConfigReader& r, ModelConfig& m) const override {
        const Defaults d = defaults_of(m.model_type);
        m.vocab = r.count_or("vocab_size", d.vocab);
        m.intermediate = r.count_or("intermediate_size", d.intermediate);
        // GemmaMLP: hidden_activation when set (transformers 4.x), else hidden_act (5.x: LlamaMLP)
        m.activation = r.find("hidden_activation") || m.model_type != "gemma"
                           ? read_activation(r, "hidden_activation", "gelu_pytorch_tanh")
                           : read_activation(r, "hidden_act", "gelu_pytorch_tanh");
        m.mlp = Mlp::gated;
        m.mlp_bias = false;
        m.norm = NormKind::rms_norm;
        m.norm_eps = r.number("rms_norm_eps", 1e-6);
        m.norm_offset = 1;
        m.scale_embeddings = true;
        m.tied = r.flag("tie_word_embeddings", true);
        if (m.model_type == "gemma") return;
        m.residual = Residual::sandwich;
        m.final_softcap = softcap(r, "final_logit_softcapping", m.model_type == "gemma2" ? std::optional(30.0) : std::nullopt);
    }

    std::vector<TensorSpec> embedding_tensors(const ModelConfig& m) const override {
        return {table_spec("embed_tokens.weight", m.vocab, "(V, E)", m.hidden, Canonical::token_embedding)};
    }

    std::vector<TensorSpec> block_tensors(const ModelConfig& m) const override {
        using enum Canonical;
        std::vector<TensorSpec> s;
        if (m.residual == Residual::sandwich) {
            add_rms_norm(s, "post_attention_layernorm", m.hidden, "(E)", post_attention_norm_weight, 1);
            add_rms_norm(s, "pre_feedforward_layernorm", m.hidden, "(E)", mlp_norm_weight, 1);
            add_rms_norm(s, "post_feedforward_layernorm", m.hidden, "(E)", post_mlp_norm_weight, 1);
        } else {
            add_rms_norm(s, "post_attention_layernorm", m.hidden, "(E)", mlp_norm_weight, 1);
        }
        add_gated_mlp(s, {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}, m.hidden, m.intermediate, "I");
        return s;
    }

    std::vector<TensorSpec> final_tensors(const ModelConfig& m) const override {
        std::vector<TensorSpec> s;
        add_rms_norm(s, "norm", m.hidden, "(E)", Canonical::final_norm_weight, 1);
        return s;
    }

    std::vector<TensorSpec> head_tensors(const ModelConfig& m) const override { return lm_head_tensors("lm_head", m); }

    const GgufTable* gguf() const override { return &gguf_table; }

private:
    // llama.cpp's names (src/llama-arch.cpp LLM_ARCH_GEMMA, _GEMMA2, _GEMMA3; src/models/gemma*.cpp):
    // conversion/gemma.py writes every norm as 1 + w (shifted), gemma2's post-attention norm is
    // post_attention_norm and its MLP's ffn_norm / post_ffw_norm (gemma's MLP norm is ffn_norm);
    // rope_local_base_freq is rope.freq_base_swa. See gemma_derive for what no key says.
    static void gemma_derive(const GgufFiles& file, std::string_view arch, nlohmann::json& config);
    inline static const GgufTable gguf_table{
        .architectures = {{"gemma", "gemma"}, {"gemma2", "gemma2"}, {"gemma3", "gemma3_text"}},
        .keys = {{"block_count", "num_hidden_layers"}, {"context_length", "max_position_embeddings"},
                 {"embedding_length", "hidden_size"}, {"feed_forward_length", "intermediate_size"},
                 {"attention.head_count", "num_attention_heads"}, {"attention.head_count_kv", "num_key_value_heads"},
                 {"attention.key_length", "head_dim"}, {"attention.layer_norm_rms_epsilon", "rms_norm_eps"},
                 {"rope.freq_base", "rope_theta"}, {"rope.freq_base_swa", "rope_local_base_freq"},
                 {"attention.sliding_window", "sliding_window"},
                 {"attention.sliding_window_pattern", "sliding_window_pattern"},
                 {"attn_logit_softcapping", "attn_logit_softcapping"},
                 {"final_logit_softcapping", "final_logit_softcapping"}},
        .tensors = {{"input_layernorm.weight", "attn_norm.weight", GgufLayout::shifted},
                    {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
                    {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
                    {"self_attn.q_norm.weight", "attn_q_norm.weight", GgufLayout::shifted},
                    {"self_attn.k_norm.weight", "attn_k_norm.weight", GgufLayout::shifted},
                    {"post_attention_layernorm.weight", "ffn_norm.weight", GgufLayout::shifted, "gemma"},
                    {"post_attention_layernorm.weight", "post_attention_norm.weight", GgufLayout::shifted},
                    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", GgufLayout::shifted},
                    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", GgufLayout::shifted},
                    {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
                    {"mlp.down_proj.weight", "ffn_down.weight"}, {"embed_tokens.weight", "token_embd.weight"},
                    {"norm.weight", "output_norm.weight", GgufLayout::shifted}, {"lm_head.weight", "output.weight"}},
        .flags = {{"output.weight", "tie_word_embeddings", true}},
        .token_embedding = "token_embd.weight",
        .derive = gemma_derive,
    };
};

// What llama.cpp does that no key says (src/models/gemma2.cpp, gemma3.cpp load_arch_hparams):
// the scores are scaled by 1 / sqrt(head dim), or 1 / sqrt(E / H) for the 27B models (46 layers
// of gemma2, 62 of gemma3), whatever query_pre_attn_scalar the checkpoint had; a gemma3 file
// without a sliding window (or with 0) has none on any layer, every layer's rotary the global one.
void Gemma::gemma_derive(const GgufFiles& file, std::string_view arch, json& config) {
    (void)file;
    const std::size_t layers = config.value("num_hidden_layers", std::size_t{0});
    const bool big = (arch == "gemma2" && layers == 46) || (arch == "gemma3" && layers == 62);
    if (arch != "gemma" && config.contains("hidden_size") && config.contains("num_attention_heads"))
        config["query_pre_attn_scalar"] = big ? config["hidden_size"].get<double>() / config["num_attention_heads"].get<double>()
                                              : config.value("head_dim", 256.0);
    if (arch == "gemma3" && config.value("sliding_window", 0) == 0) {
        config["sliding_window"] = nullptr;
        config["layer_types"] = json(std::vector<std::string>(layers, "full_attention"));
    }
}

}  // namespace

const Family& gemma_family() {
    static const Gemma family;
    return family;
}

}  // namespace attntrace
