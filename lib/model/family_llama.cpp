// Llama and the families that copy its attention (transformers models/llama/modeling_llama.py
// LlamaAttention; models/mistral, models/qwen2, models/qwen3): RMSNorm input_layernorm, separate
// q/k/v/o projections with grouped-query kv heads, rotate-half rotary (rope_theta, rope_scaling or
// rope_parameters), causal. What the four differ in:
//   biases          llama: attention_bias on all four; mistral: none; qwen2: q/k/v only
//   sliding window  mistral: sliding_window on every layer; qwen2/qwen3: use_sliding_window, on
//                   the layers layer_types marks "sliding_attention" (by default those from
//                   max_window_layers on)
//   q/k norm        qwen3: RMSNorm over P of each q and k head, before the rotary
//   MLP biases      llama: mlp_bias; the others: none
// The model (LlamaModel, LlamaForCausalLM and copies): embed_tokens, pre-norm blocks with the
// gated MLP down_proj(act(gate_proj x) * up_proj x) (hidden_act, silu by default),
// post_attention_layernorm before it, the final RMSNorm `norm`, lm_head (tied when
// tie_word_embeddings, false by default). No position table: rotary positions have no limit.
// Mistral's sliding_window is 4096 when config.json does not name it (MistralConfig), none when
// it is null.
#include "family.hpp"

namespace attntrace {

namespace {

// Qwen2/Qwen3: sliding_window if use_sliding_window, on layers whose layer_types entry is
// "sliding_attention" (by default: layer >= max_window_layers).
std::optional<std::size_t> qwen_window(const ConfigReader& r, std::size_t layer) {
    if (!r.flag("use_sliding_window", false) || !r.find("sliding_window")) return std::nullopt;
    const std::size_t window = r.count("sliding_window");
    if (const nlohmann::json* types = r.find("layer_types")) {
        if (!types->is_array() || layer >= types->size())
            config_error(r.source, "'layer_types' has no entry for layer " + std::to_string(layer));
        r.remember("layer_types", *types);
        return (*types)[layer] == "sliding_attention" ? std::optional(window) : std::nullopt;
    }
    const double first = r.number("max_window_layers", 28);
    return static_cast<double>(layer) >= first ? std::optional(window) : std::nullopt;
}

// Mistral: sliding_window, 4096 when the key is absent (MistralConfig's default), none when null.
std::optional<std::size_t> mistral_window(const ConfigReader& r) {
    if (!r.config.contains("sliding_window")) return 4096;
    return r.find("sliding_window") ? std::optional(r.count("sliding_window")) : std::nullopt;
}

// The default vocabulary and MLP sizes of each model_type's configuration class.
std::pair<std::size_t, std::size_t> default_sizes(const std::string& type) {
    if (type == "llama") return {32000, 11008};
    if (type == "mistral") return {32000, 14336};
    return {151936, 22016};  // qwen2, qwen3
}

class Llama final : public Family {
public:
    Llama() : Family("layers.") {}

    std::vector<std::string_view> model_types() const override { return {"llama", "mistral", "qwen2", "qwen3"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        c.hidden = r.count("hidden_size");
        c.heads = r.count("num_attention_heads");
        c.layers = r.count("num_hidden_layers");
        c.kv_heads = r.count_of({"num_key_value_heads"}).value_or(c.heads);
        c.head_dim = r.count_of({"head_dim"}).value_or(c.hidden / c.heads);
        c.norm = NormKind::rms_norm;
        c.norm_eps = r.number("rms_norm_eps", 1e-6);
        c.causal = true;
        const auto [theta, scaling] = read_rope(r, 10000.0);
        c.rotary = Rotary{RotaryStyle::half, c.head_dim, rope_inv_freq(c.head_dim, theta, scaling)};
        if (c.model_type == "mistral") c.window = mistral_window(r);
        if (c.model_type == "qwen2" || c.model_type == "qwen3") c.window = qwen_window(r, c.layer);
        c.qk_norm = c.model_type == "qwen3";
        // LlamaAttention: bias=config.attention_bias on all four; Qwen2: q/k/v True, o_proj False;
        // Mistral: none.
        const bool bias = c.model_type != "mistral" && r.flag("attention_bias", false);
        c.qkv_bias = c.model_type == "qwen2" || bias;
        c.o_bias = c.model_type != "qwen2" && bias;
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        using enum Canonical;
        const std::size_t e = c.hidden, q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
        std::vector<TensorSpec> s;
        add_norm(s, "input_layernorm", e, false);
        add_linear(s, {"self_attn.q_proj", {q, e}, "(H*P, E)", {w_q}, {b_q}, c.qkv_bias});
        add_linear(s, {"self_attn.k_proj", {kv, e}, "(G*P, E)", {w_k}, {b_k}, c.qkv_bias});
        add_linear(s, {"self_attn.v_proj", {kv, e}, "(G*P, E)", {w_v}, {b_v}, c.qkv_bias});
        add_linear(s, {"self_attn.o_proj", {e, q}, "(E, H*P)", {w_o}, {b_o}, c.o_bias});
        if (c.qk_norm) {
            s.push_back({"self_attn.q_norm.weight", {c.head_dim}, "(P)", {q_norm}});
            s.push_back({"self_attn.k_norm.weight", {c.head_dim}, "(P)", {k_norm}});
        }
        return s;
    }

    void read_model(const ConfigReader& r, ModelConfig& m) const override {
        const auto [vocab, intermediate] = default_sizes(m.model_type);
        m.vocab = r.count_or("vocab_size", vocab);
        m.intermediate = r.count_or("intermediate_size", intermediate);
        m.activation = read_activation(r, "hidden_act", "silu");
        m.mlp = Mlp::gated;
        m.mlp_bias = m.model_type == "llama" && r.flag("mlp_bias", false);
        m.norm = NormKind::rms_norm;
        m.norm_eps = r.number("rms_norm_eps", 1e-6);
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
        add_linear(s, {"mlp.gate_proj", {i, e}, "(I, E)", {fc_gate}, {fc_gate_bias}, m.mlp_bias});
        add_mlp(s, "mlp.up_proj", "mlp.down_proj", m, m.mlp_bias);
        return s;
    }

    std::vector<TensorSpec> final_tensors(const ModelConfig& m) const override { return final_norm_tensors("norm", m); }

    std::vector<TensorSpec> head_tensors(const ModelConfig& m) const override { return lm_head_tensors("lm_head", m); }

    const GgufTable* gguf() const override { return &gguf_table; }

private:
    // llama.cpp's names (src/llama-arch.cpp LLM_ARCH_LLAMA, LLM_ARCH_QWEN2, LLM_ARCH_QWEN3;
    // convert_hf_to_gguf.py: Mistral's and Llama 3's files are "llama"; conversion/llama.py permutes
    // q/k for "llama" only, conversion/qwen.py writes them as they are; rope scaling llama3 as a
    // rope_freqs tensor, see GgufSource).
    inline static const GgufTable gguf_table{
        .architectures = {{"llama", "llama", true}, {"qwen2", "qwen2"}, {"qwen3", "qwen3"}},
        .keys = {{"block_count", "num_hidden_layers"}, {"context_length", "max_position_embeddings"},
                 {"embedding_length", "hidden_size"}, {"feed_forward_length", "intermediate_size"},
                 {"attention.head_count", "num_attention_heads"}, {"attention.head_count_kv", "num_key_value_heads"},
                 {"attention.key_length", "head_dim"}, {"attention.layer_norm_rms_epsilon", "rms_norm_eps"},
                 {"rope.freq_base", "rope_theta"}},
        .tensors = {{"input_layernorm.weight", "attn_norm.weight"},
                    {"self_attn.q_proj.weight", "attn_q.weight", GgufLayout::rotary},
                    {"self_attn.q_proj.bias", "attn_q.bias", GgufLayout::rotary},
                    {"self_attn.k_proj.weight", "attn_k.weight", GgufLayout::rotary},
                    {"self_attn.k_proj.bias", "attn_k.bias", GgufLayout::rotary},
                    {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.v_proj.bias", "attn_v.bias"},
                    {"self_attn.o_proj.weight", "attn_output.weight"}, {"self_attn.o_proj.bias", "attn_output.bias"},
                    {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
                    {"post_attention_layernorm.weight", "ffn_norm.weight"},
                    {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.gate_proj.bias", "ffn_gate.bias"},
                    {"mlp.up_proj.weight", "ffn_up.weight"}, {"mlp.up_proj.bias", "ffn_up.bias"},
                    {"mlp.down_proj.weight", "ffn_down.weight"}, {"mlp.down_proj.bias", "ffn_down.bias"},
                    {"embed_tokens.weight", "token_embd.weight"}, {"norm.weight", "output_norm.weight"},
                    {"lm_head.weight", "output.weight"}},
        .flags = {{"output.weight", "tie_word_embeddings", true}, {"blk.0.attn_q.bias", "attention_bias"},
                  {"blk.0.ffn_up.bias", "mlp_bias"}},
        .token_embedding = "token_embd.weight",
    };
};

}  // namespace

const Family& llama_family() {
    static const Llama family;
    return family;
}

}  // namespace attntrace
