// GPT-2 (transformers models/gpt2/modeling_gpt2.py, GPT2Attention and GPT2Block): LayerNorm ln_1,
// q/k/v in one Conv1D c_attn (E, 3E) stored (in, out), causal, the score scale switched by
// scale_attn_weights and divided by layer + 1 under scale_attn_by_inverse_layer_idx.
#include <cmath>

#include "family.hpp"

namespace attntrace {

namespace {

class Gpt2 final : public Family {
public:
    Gpt2() : Family("h.", " (Conv1D c_attn, transposed)") {}

    std::vector<std::string_view> model_types() const override { return {"gpt2"}; }

    void read_layer(const ConfigReader& r, LayerConfig& c) const override {
        read_mha_sizes(r, c, "n_embd", "n_head", "n_layer");
        c.norm = NormKind::layer_norm;
        c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
        c.causal = true;
        c.scale = r.flag("scale_attn_weights", true) ? 1.0 / std::sqrt(double(c.head_dim)) : 1.0;
        if (r.flag("scale_attn_by_inverse_layer_idx", false)) c.scale /= static_cast<double>(c.layer + 1);
    }

    std::vector<TensorSpec> attention_tensors(const LayerConfig& c) const override {
        using enum Canonical;
        const std::size_t e = c.hidden;
        std::vector<TensorSpec> s;
        add_norm(s, "ln_1", e, true);
        add_linear(s, {"attn.c_attn", {e, 3 * e}, "(E, 3E)", {w_q, w_k, w_v}, {b_q, b_k, b_v}, true, Stored::conv1d,
                       Fused::stacked});
        add_linear(s, {"attn.c_proj", {e, e}, "(E, E)", {w_o}, {b_o}, true, Stored::conv1d});
        return s;
    }
};

}  // namespace

const Family& gpt2_family() {
    static const Gpt2 family;
    return family;
}

}  // namespace attntrace
