// Llama and the families that copy its attention (transformers models/llama/modeling_llama.py
// LlamaAttention; models/mistral, models/qwen2, models/qwen3): RMSNorm input_layernorm, separate
// q/k/v/o projections with grouped-query kv heads, rotate-half rotary (rope_theta, rope_scaling or
// rope_parameters), causal. What the four differ in:
//   biases          llama: attention_bias on all four; mistral: none; qwen2: q/k/v only
//   sliding window  mistral: sliding_window on every layer; qwen2/qwen3: use_sliding_window, on
//                   the layers layer_types marks "sliding_attention" (by default those from
//                   max_window_layers on)
//   q/k norm        qwen3: RMSNorm over P of each q and k head, before the rotary
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
        if (c.model_type == "mistral" && r.find("sliding_window")) c.window = r.count("sliding_window");
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
};

}  // namespace

const Family& llama_family() {
    static const Llama family;
    return family;
}

}  // namespace attntrace
